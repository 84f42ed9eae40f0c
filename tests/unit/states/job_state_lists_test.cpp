// job_state_lists_test: the copies of the job states that are not C++ (SQL, docs, OpenAPI, dashboard) against core::job_state.
//
// core::k_all_job_states, core::is_final and core::is_legal_transition are the
// one list (conventions 19). What cannot iterate it (a migration, a doc
// table, the dashboard's script) is read here from the source tree and
// compared; each failure says which file and what it should say, so adding a
// state is: the enum and its name, then whatever this test and the compiler
// ask for.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slurm/slurm_format.hpp"
#include "core/job_state.hpp"

namespace fs = std::filesystem;
using aqs::core::job_state;

namespace {

const fs::path k_tree = AQS_SOURCE_DIR;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), "cannot read " << p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using names = std::vector<std::string>;

names state_names(bool (*keep)(job_state)) {
  names out;
  for (const job_state s : aqs::core::k_all_job_states) {
    if (keep(s)) out.emplace_back(aqs::core::to_string(s));
  }
  return out;
}
names all_states() {
  return state_names([](job_state) { return true; });
}
names final_states() {
  return state_names([](job_state s) { return aqs::core::is_final(s); });
}
names live_states() {
  return state_names([](job_state s) { return !aqs::core::is_final(s); });
}
names held_states() {
  return state_names([](job_state s) { return aqs::core::holds_processors(s); });
}

std::set<std::string> as_set(const names& n) { return {n.begin(), n.end()}; }

// The names of `set` in the order of core::k_all_job_states.
names in_core_order(const std::set<std::string>& set) {
  names out;
  for (const auto& s : all_states()) {
    if (set.count(s)) out.push_back(s);
  }
  return out;
}

std::string joined(const names& n, const char* quote, const char* sep) {
  std::string out;
  for (const auto& s : n) out += (out.empty() ? "" : sep) + std::string(quote) + s + quote;
  return out;
}
std::string sql_list(const names& n) { return "(" + joined(n, "'", ", ") + ")"; }

bool is_state_name(const std::string& w) { return aqs::core::parse_job_state(w).has_value(); }

// The quoted words of an SQL list "('A', 'B')".
names sql_words(const std::string& text) {
  static const std::regex word(R"('([A-Z_]+)')");
  names out;
  for (std::sregex_iterator it(text.begin(), text.end(), word), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

// The text between the parenthesis at `open` and its match.
std::string balanced(const std::string& text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && --depth == 0) return text.substr(open + 1, i - open - 1);
  }
  FAIL("unbalanced parentheses after offset " << open);
  return {};
}

std::string without_comments(const std::string& sql) {
  std::string out;
  std::istringstream in(sql);
  for (std::string line; std::getline(in, line);) {
    const auto c = line.find("--");
    out += (c == std::string::npos ? line : line.substr(0, c)) + "\n";
  }
  return out;
}

// The schema that a folder of numbered migrations leaves: each named CHECK
// constraint's body, each index's definition and the body of each plpgsql
// function, as the last migration to touch it wrote it.
struct schema {
  std::map<std::string, std::string> checks;     // constraint name -> CHECK (...) body
  std::map<std::string, std::string> indexes;    // index name -> its CREATE INDEX statement
  std::map<std::string, std::string> functions;  // function name -> body between $$
};

schema replay(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".sql") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE_FALSE(files.empty());
  static const std::regex event(
      R"((DROP\s+CONSTRAINT\s+(?:IF\s+EXISTS\s+)?(\w+))|(CONSTRAINT\s+(\w+)\s+CHECK\s*\()|(DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(\w+))|(CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)[^;]*;)|(FUNCTION\s+(\w+)\s*\([^)]*\)[^$]*\$\$([\s\S]*?)\$\$))",
      std::regex::icase);
  schema s;
  for (const auto& f : files) {
    const std::string text = without_comments(read_file(f));
    for (std::sregex_iterator it(text.begin(), text.end(), event), end; it != end; ++it) {
      const auto& m = *it;
      if (m[1].matched) s.checks.erase(m[2]);
      if (m[3].matched) s.checks[m[4]] = balanced(text, static_cast<std::size_t>(m.position(0) + m.length(0) - 1));
      if (m[5].matched) s.indexes.erase(m[6]);
      if (m[7].matched) s.indexes[m[8]] = m[7];
      if (m[9].matched) s.functions[m[10]] = m[11];
    }
  }
  return s;
}

// Every "IN (...)" list of an SQL text that names a job state.
std::vector<names> state_lists(const std::string& sql) {
  std::vector<names> out;
  static const std::regex in_list(R"(\bIN\s*\()", std::regex::icase);
  for (std::sregex_iterator it(sql.begin(), sql.end(), in_list), end; it != end; ++it) {
    const names words = sql_words(balanced(sql, static_cast<std::size_t>(it->position(0) + it->length(0) - 1)));
    if (std::any_of(words.begin(), words.end(), is_state_name)) out.push_back(words);
  }
  return out;
}

// A markdown or prose list "`A`, `B`, ..." or "A, B, ..." of state names:
// the state names of the text from `anchor` to the next `stop`.
names doc_states_after(const std::string& doc, const std::string& file, const std::string& anchor,
                       const std::string& stop) {
  const auto at = doc.find(anchor);
  REQUIRE_MESSAGE(at != std::string::npos, file << ": the text \"" << anchor << "\" is gone; update this test with the doc");
  const auto end = doc.find(stop, at + anchor.size());
  REQUIRE(end != std::string::npos);
  const std::string part = doc.substr(at + anchor.size(), end - at - anchor.size());
  static const std::regex word(R"(\b[A-Z][A-Z_]+[A-Z]\b)");
  names out;
  for (std::sregex_iterator it(part.begin(), part.end(), word), e; it != e; ++it) {
    if (is_state_name(it->str()) && std::find(out.begin(), out.end(), it->str()) == out.end()) out.push_back(it->str());
  }
  return out;
}

}  // namespace

TEST_CASE("aqsd's migrations leave CHECK constraints and indexes that know exactly the core's states") {
  const schema s = replay(k_tree / "sql");
  const std::set<std::string> all = as_set(all_states()), finals = as_set(final_states()), live = as_set(live_states()),
                              held = as_set(held_states());
  const std::map<std::string, const std::set<std::string>*> checks = {{"jobs_known_state", &all},
                                                                      {"jobs_end_iff_final", &finals},
                                                                      {"job_events_known_states", &all},
                                                                      {"jobs_procs_only_held", &held},
                                                                      {"jobs_held_started", &held}};
  const std::map<std::string, const std::set<std::string>*> indexes = {{"jobs_live", &live}};
  const auto compare = [](const std::string& what, const std::map<std::string, std::string>& found,
                          const std::map<std::string, const std::set<std::string>*>& expected) {
    for (const auto& [name, want] : expected) {
      INFO(what << " " << name);
      REQUIRE_MESSAGE(found.count(name) == 1, "sql/: no live " << what << " " << name);
      const auto lists = state_lists(found.at(name));
      REQUIRE_FALSE(lists.empty());
      for (const auto& l : lists) {
        CHECK_MESSAGE(as_set(l) == *want, "sql/: " << what << " " << name << " lists " << sql_list(l)
                                                   << "; a new migration must make it " << sql_list(in_core_order(*want)));
      }
    }
    // Any other that lists several states is a copy nobody compares.
    for (const auto& [name, body] : found) {
      if (expected.count(name)) continue;
      for (const auto& l : state_lists(body)) {
        CHECK_MESSAGE(l.size() < 2, "sql/: " << what << " " << name << " lists job states " << sql_list(l)
                                             << ": compare it with core::job_state in this test");
      }
    }
  };
  compare("constraint", s.checks, checks);
  compare("index", s.indexes, indexes);
}

TEST_CASE("the store's statements list exactly the core's live states") {
  // scheduler/store/pg_statements.cpp selects live jobs with a literal list,
  // the same as the jobs_live index (so that the index serves them).
  const std::string text = read_file(k_tree / "scheduler/store/pg_statements.cpp");
  const auto lists = state_lists(text);
  REQUIRE_FALSE(lists.empty());
  for (const auto& l : lists) {
    CHECK_MESSAGE(as_set(l) == as_set(live_states()), "scheduler/store/pg_statements.cpp lists " << sql_list(l)
                                                                                                 << "; the live states are "
                                                                                                 << sql_list(live_states()));
  }
}

TEST_CASE("aqsd's transition trigger allows exactly core::is_legal_transition") {
  const schema s = replay(k_tree / "sql");
  REQUIRE(s.functions.count("aqs_check_job_transition") == 1);
  const std::string body = s.functions.at("aqs_check_job_transition");
  static const std::regex arm(R"(OLD\.state\s*=\s*'([A-Z_]+)'\s+AND\s+NEW\.state\s*(?:=\s*'([A-Z_]+)'|IN\s*\(([^)]*)\)))");
  std::set<std::pair<std::string, std::string>> allowed;
  for (std::sregex_iterator it(body.begin(), body.end(), arm), end; it != end; ++it) {
    const auto& m = *it;
    const names to = m[2].matched ? names{m[2]} : sql_words(m[3]);
    for (const auto& t : to) allowed.emplace(m[1], t);
  }
  REQUIRE_FALSE(allowed.empty());
  for (const job_state from : aqs::core::k_all_job_states) {
    names want;
    for (const job_state to : aqs::core::k_all_job_states) {
      if (aqs::core::is_legal_transition(from, to)) want.emplace_back(aqs::core::to_string(to));
    }
    const std::string f(aqs::core::to_string(from));
    for (const job_state to : aqs::core::k_all_job_states) {
      const std::string t(aqs::core::to_string(to));
      CHECK_MESSAGE(allowed.count({f, t}) == (aqs::core::is_legal_transition(from, to) ? 1u : 0u),
                    "sql/: aqs_check_job_transition " << (allowed.count({f, t}) ? "allows" : "refuses") << " " << f
                                                      << " -> " << t << "; a new migration must make its arm (OLD.state = '"
                                                      << f << "' AND NEW.state IN " << sql_list(want) << ")");
    }
  }
}

TEST_CASE("faucetsd's migrations leave no list of job states in its schema") {
  // faucets_store binds the final states from the core into each query
  // (001's partial index named five of six and kept OUT_OF_MEMORY jobs live).
  const schema s = replay(k_tree / "faucets/sql");
  for (const auto& [name, def] : s.indexes) {
    CHECK_MESSAGE(state_lists(def).empty(), "faucets/sql: index " << name << " lists job states: " << def);
  }
  for (const auto& [name, body] : s.checks) {
    CHECK_MESSAGE(state_lists(body).empty(), "faucets/sql: constraint " << name << " lists job states");
  }
  for (const auto& [name, body] : s.functions) {
    CHECK_MESSAGE(state_lists(body).empty(), "faucets/sql: function " << name << " lists job states");
  }
}

TEST_CASE("the OpenAPI document's job states are the core's") {
  const auto doc = nlohmann::json::parse(read_file(k_tree / "scheduler/http/openapi.json"));
  const auto& schemas = doc.at("components").at("schemas");
  REQUIRE(schemas.contains("JobState"));
  names listed;
  for (const auto& v : schemas.at("JobState").at("enum")) listed.push_back(v.get<std::string>());
  CHECK_MESSAGE(listed == all_states(), "scheduler/http/openapi.json: JobState.enum must be [" << joined(all_states(), "\"", ", ")
                                                                                              << "]");
  // Each state field refers to it instead of a list of its own.
  const std::string text = doc.dump();
  CHECK_MESSAGE(text.find("NODE_FAIL)") == std::string::npos, "openapi.json: a description lists the states by hand");
}

TEST_CASE("the dashboard's live states are the core's non-final states") {
  const std::string page = read_file(k_tree / "scheduler/http/dashboard.html");
  static const std::regex live(R"(const live = \[([^\]]*)\])");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(page, m, live), "dashboard.html: `const live = [...]` is gone; update this test");
  static const std::regex word(R"re("([A-Z_]+)")re");
  names listed;
  const std::string inner = m[1];
  for (std::sregex_iterator it(inner.begin(), inner.end(), word), end; it != end; ++it) listed.push_back((*it)[1]);
  CHECK_MESSAGE(as_set(listed) == as_set(live_states()),
                "scheduler/http/dashboard.html: const live must be [" << joined(live_states(), "\"", ", ") << "]");
}

TEST_CASE("the docs' lists of job states are the core's") {
  const std::string guide = read_file(k_tree / "docs/user-guide.md");
  CHECK_MESSAGE(doc_states_after(guide, "docs/user-guide.md", "Job states:\n", "\n\n`") == all_states(),
                "docs/user-guide.md: the job states table needs a row for each of " << joined(all_states(), "", ", ")
                                                                                    << ", in that order");
  const std::string protocol = read_file(k_tree / "docs/protocol.md");
  CHECK_MESSAGE(doc_states_after(protocol, "docs/protocol.md", "`states` are the job states", "\n(") == all_states(),
                "docs/protocol.md: list_jobs' `states` must name " << joined(all_states(), "`", ", "));
  CHECK_MESSAGE(doc_states_after(protocol, "docs/protocol.md", "A `job_event` with a final state", "ends the watch") ==
                    final_states(),
                "docs/protocol.md: the final states that end a watch are " << joined(final_states(), "`", ", "));
  const std::string store = read_file(k_tree / "docs/store.md");
  CHECK_MESSAGE(doc_states_after(store, "docs/store.md", "| final (", ")") == final_states(),
                "docs/store.md: the final row must name " << joined(final_states(), "", ", "));
}

TEST_CASE("every state has a Slurm name and code, and the user guide shows them") {
  const std::string guide = read_file(k_tree / "docs/user-guide.md");
  const std::string anchor = "Jobs and states in Slurm's words:";
  const auto at = guide.find(anchor);
  REQUIRE(at != std::string::npos);
  std::string para = guide.substr(at, guide.find("`sacct`", at) - at);
  std::replace(para.begin(), para.end(), '\n', ' ');  // a state and its code may straddle a line break
  // Slurm's own job state codes (squeue(1) JOB STATE CODES).
  const std::set<std::string> slurm_codes = {"BF", "CA", "CD", "CF", "CG", "DL", "F",  "NF", "OOM", "PD", "PR",
                                             "R",  "RD", "RF", "RH", "RQ", "RS", "RV", "SI", "SE", "SO", "ST",
                                             "S",  "TO"};
  for (const job_state s : aqs::core::k_all_job_states) {
    const auto n = aqs::slurm::slurm_state(s);
    INFO("state " << aqs::core::to_string(s));
    CHECK_MESSAGE(slurm_codes.count(n.compact) == 1,
                  "tools/slurm/slurm_format.cpp: slurm_state gives no Slurm code for " << aqs::core::to_string(s));
    if (n.name == aqs::core::to_string(s)) {
      CHECK_MESSAGE(para.find(n.name + " (" + n.compact) != std::string::npos,
                    "docs/user-guide.md: \"" << anchor << "\" must show " << n.name << " (" << n.compact << ")");
    } else {
      CHECK_MESSAGE(para.find(std::string(aqs::core::to_string(s))) != std::string::npos,
                    "docs/user-guide.md: \"" << anchor << "\" must say what " << aqs::core::to_string(s) << " is shown as");
    }
  }
}
