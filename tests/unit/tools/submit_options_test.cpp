// Unit tests of the submission options' declaration (cmdline/submit_options.hpp):
// walked option by option, every form it declares (command line, long and
// short, #SBATCH and #AQS lines, sbatch's SBATCH_* variable) makes the same
// submission, and each --help lists each of its options once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cmdline/job_options.hpp"
#include "cmdline/submit_options.hpp"
#include "cmdline/usage_error.hpp"

using namespace aqs::cmdline;
using args = std::vector<std::string>;

namespace {

// A value each option takes. A new option that takes a value needs one
// here: the walk below fails until it has one.
const std::map<std::string, std::string, std::less<>> k_samples = {
    {"ntasks", "4"},       {"nodes", "2"},          {"ntasks-per-node", "2"}, {"cpus-per-task", "2"},
    {"mem", "1G"},         {"mem-per-cpu", "100"},  {"gres", "gpu:1"},        {"gpus-per-node", "1"},
    {"gpus", "2"},         {"partition", "main"},   {"array", "0-3"},         {"min", "2"},
    {"max", "4"},          {"time", "10"},          {"job-name", "x"},        {"output", "out-%j"},
    {"error", "err-%j"},   {"chdir", "/tmp"},       {"dependency", "afterok:1"}, {"export", "ALL,A=1"},
    {"signal", "B:USR1@90"}, {"exclusive", "user"}, {"wrap", "true"},    {"socket", "/tmp/aqsd.sock"},
    {"account", "proj"},   {"qos", "normal"},       {"reservation", "maint"}, {"nodelist", "n[1-2]"}, {"exclude", "n3"},       {"begin", "2030-01-01T08:00"},
    {"pref", "2"},         {"speedup", "amdahl:0.9"}, {"resize-cost", "10"},
    {"clusters", "auto"},  {"faucets", "https://f:1"}, {"faucets-ca", "/ca.pem"}, {"token-file", "/token"},
    {"broker", "last-name"},
    {"stage-in", "input.dat"},
    {"deadline", "now+600"}, {"max-price", "2.5"},   {"value", "10"},         {"value-decay", "60"},
};

std::string sample(const submit_option& o) {
  if (const auto it = k_samples.find(o.name); it != k_samples.end()) return it->second;
  // Recorded options keep any text; flags take none.
  return o.kind == option_kind::recorded && o.arg != option_arg::none ? "x1" : "";
}

submit_context ctx() {
  submit_context c;
  c.cwd = "/home/alice";
  c.environment = {"PATH=/usr/bin"};
  c.umask = 022;
  return c;
}

// What one form of an option does: the submission, or the error.
struct outcome {
  std::optional<aqs::protocol::job_spec> job;
  bool parsable = false;
  std::vector<std::string> warnings;  // without their "script line N: " / "$VAR: " prefix
  std::string error;
};

std::string unprefixed(std::string s) {
  for (const std::string_view p : {"script line 2: ", "$"}) {
    if (s.starts_with(p)) s = s.substr(p == "$" ? s.find(": ") + 2 : p.size());
  }
  return s;
}

template <class F>
outcome run(F&& make) {
  outcome out;
  try {
    const fsub_request r = make();
    out.job = r.request.job;
    out.job->script.reset();  // holds the directive lines themselves
    out.parsable = r.parsable;
    for (const auto& w : r.warnings) out.warnings.push_back(unprefixed(w));
  } catch (const usage_error& e) {
    out.error = unprefixed(e.what());
  }
  return out;
}

outcome command_line(const args& words) {
  return run([&] {
    args a = words;
    a.emplace_back("job.sh");
    return build_fsub_request(parse_fsub_command_line(a), "#!/bin/sh\ntrue\n", ctx());
  });
}

outcome directive(const std::string& keyword, const std::string& words) {
  return run([&] {
    return build_fsub_request(parse_fsub_command_line(args{"job.sh"}), "#!/bin/sh\n" + keyword + " " + words + "\ntrue\n",
                              ctx());
  });
}

outcome environment(const std::string& variable) {
  return run([&] {
    auto cmd = parse_fsub_command_line(args{"job.sh"});
    read_sbatch_environment(cmd, args{variable});
    return build_fsub_request(cmd, "#!/bin/sh\ntrue\n", ctx());
  });
}

void check_same(const outcome& want, const outcome& got) {
  CHECK(got.error == want.error);
  CHECK(got.job == want.job);
  CHECK(got.parsable == want.parsable);
  CHECK(got.warnings == want.warnings);
}

// The option words of the help's left column ("-n, --ntasks N" gives
// "-n", "--ntasks").
std::vector<std::string> listed(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("  ")) continue;
    std::istringstream words(line.substr(0, std::min<std::size_t>(line.size(), 27)));
    for (std::string w; words >> w;) {
      if (w.ends_with(',')) w.pop_back();
      if (w.starts_with("-")) out.push_back(w.substr(0, w.find('=')));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every batch option makes the same submission on the command line, in #SBATCH and #AQS lines and in SBATCH_*") {
  int walked = 0, with_env = 0;
  for (const auto& o : submit_options()) {
    if (!in_scope(o.scope, option_scope::batch) || o.kind == option_kind::slurm) continue;
    if (o.name == "help") continue;  // --help ends the parse: nothing to submit
    CAPTURE(o.name);
    const std::string value = sample(o);
    ++walked;
    if (o.kind == option_kind::refused) {
      // Refused in one line naming the option, wherever it is given.
      const std::string word = "--" + std::string(o.name);
      const outcome want = command_line({word});
      CHECK(want.error == std::string(o.why) + " (" + word + ")");
      check_same(want, directive("#SBATCH", word));
      check_same(want, directive("#AQS", word));
      continue;
    }
    if (o.arg == option_arg::required) REQUIRE_MESSAGE(!value.empty(), "add a sample value for --" << o.name);
    const std::string attached = value.empty() ? "" : "=" + value;
    const outcome want = command_line({"--" + std::string(o.name) + attached});
    // (fsub's command-line-only options are checked together elsewhere:
    // --wrap with a script, -M without a server, ... are errors alone.)
    if (!o.command_line_only) CHECK(want.error.empty());
    if (!o.alias.empty()) check_same(want, command_line({"--" + std::string(o.alias) + attached}));
    if (o.arg == option_arg::required) check_same(want, command_line({"--" + std::string(o.name), value}));
    std::vector<std::string> directive_words{"--" + std::string(o.name) + attached};
    if (o.short_name != 0) {
      // Short forms: "-n4" and "-n 4" (refusals name the option as spelled).
      const std::string s = std::string("-") + o.short_name;
      check_same(want, command_line({s + value}));
      if (o.arg == option_arg::required) check_same(want, command_line({s, value}));
      directive_words.push_back(s + (o.arg == option_arg::required ? " " : "") + value);
    }
    for (const std::string keyword : {"#SBATCH", "#AQS"}) {
      for (const auto& w : directive_words) {
        CAPTURE(keyword);
        CAPTURE(w);
        const outcome d = directive(keyword, w);
        if (o.command_line_only) {
          CHECK(d.error.find("only allowed on the command line") != std::string::npos);
        } else {
          check_same(want, d);
        }
      }
    }
    if (!o.env.empty()) {
      ++with_env;
      CHECK(o.env.starts_with("SBATCH_"));
      CHECK_FALSE(o.command_line_only);
      check_same(want, environment(std::string(o.env) + "=" + (value.empty() ? "1" : value)));
    }
  }
  CHECK(walked >= 100);
  CHECK(with_env >= 20);
}

TEST_CASE("every frun option means on frun's command line what the declaration says") {
  for (const auto& o : submit_options()) {
    if (!in_scope(o.scope, option_scope::interactive) || o.kind == option_kind::slurm || o.name == "help") continue;
    CAPTURE(o.name);
    const std::string value = sample(o);
    args a{"--" + std::string(o.name) + (value.empty() ? "" : "=" + value), "true"};
    std::string error;
    frun_command_line cmd;
    try {
      cmd = parse_frun_command_line(a);
    } catch (const usage_error& e) {
      error = e.what();
    }
    if (o.kind == option_kind::refused) {
      CHECK(error == std::string(o.why) + " (--" + std::string(o.name) + ")");
    } else if (o.kind == option_kind::recorded) {
      CHECK(error.empty());
      CHECK(cmd.options.recorded == std::vector<std::string>{std::string(o.name) + (value.empty() ? "" : "=" + value)});
      CHECK(cmd.warnings.size() == 1);
    } else {
      CHECK(error.empty());
    }
  }
  // Options of the other scope are found and refused saying whose they are.
  for (const auto& o : submit_options()) {
    if (o.other_scope.empty()) continue;
    CAPTURE(o.name);
    const std::string word = "--" + std::string(o.name) + (o.arg == option_arg::required ? "=v" : "");
    const std::string want = "option '--" + std::string(o.name) + "' " + std::string(o.other_scope);
    if (o.scope == option_scope::interactive) {
      CHECK_THROWS_WITH_AS(parse_fsub_command_line(args{word, "job.sh"}), want.c_str(), usage_error);
    } else {
      CHECK_THROWS_WITH_AS(parse_frun_command_line(args{word, "true"}), want.c_str(), usage_error);
    }
  }
}

TEST_CASE("fsub's and frun's --help list each of their options once, from the declaration") {
  for (const auto scope : {option_scope::batch, option_scope::interactive}) {
    const std::string help = scope == option_scope::batch ? fsub_usage() : frun_usage();
    CAPTURE(help);
    const auto words = listed(help);
    const std::multiset<std::string> counted(words.begin(), words.end());
    for (const auto& w : counted) {
      CAPTURE(w);
      CHECK(counted.count(w) == 1);
    }
    for (const auto& o : submit_options()) {
      if (o.kind != option_kind::acted || !in_scope(o.scope, scope)) continue;
      CAPTURE(o.name);
      // Each of AQS's own options has its line, in the helps of its scope.
      CHECK_FALSE(o.usage.empty());
      CHECK_FALSE(o.help.empty());
      const bool shown = in_scope(o.help_scope, scope);
      CHECK(counted.count("--" + std::string(o.name)) == (shown ? 1U : 0U));
      if (o.short_name != 0) CHECK(counted.count(std::string("-") + o.short_name) == (shown ? 1U : 0U));
    }
  }
}

TEST_CASE("each option is declared once per scope, with a one-line reason when refused") {
  std::set<std::pair<std::string, unsigned>> names, shorts;
  for (const auto& o : submit_options()) {
    CAPTURE(o.name);
    for (const unsigned bit : {1U, 2U}) {
      if ((static_cast<unsigned>(o.scope) & bit) == 0) continue;
      // frun's --mpi flag and srun's --mpi=TYPE share a name, as in Slurm.
      const bool twin = o.name == "mpi" && o.kind != option_kind::acted;
      if (!twin) CHECK(names.emplace(std::string(o.name), bit).second);
      if (o.short_name != 0) CHECK(shorts.emplace(std::string(1, o.short_name), bit).second);
    }
    CHECK((o.kind == option_kind::refused) == !o.why.empty());
    CHECK(o.why.find('\n') == std::string_view::npos);
    CHECK((o.kind == option_kind::acted) == (o.set != nullptr));
  }
}

TEST_CASE("sbatch's environment sits under the command line and over the script's directives") {
  auto cmd = parse_fsub_command_line(args{"-J", "cli", "job.sh"});
  read_sbatch_environment(cmd, args{"SBATCH_JOB_NAME=env", "SBATCH_PARTITION=envp", "SBATCH_TIMELIMIT=", "HOME=/x"});
  const auto r = build_fsub_request(cmd, "#!/bin/sh\n#SBATCH -J script -p scriptp -t 5\ntrue\n", ctx());
  CHECK(r.request.job.name == "cli");
  REQUIRE(r.request.job.geometry);
  CHECK(r.request.job.geometry->partition == "envp");
  CHECK(r.request.job.walltime_s == 300);  // an empty variable is unset
  auto bad = parse_fsub_command_line(args{"job.sh"});
  CHECK_THROWS_WITH_AS(read_sbatch_environment(bad, args{"SBATCH_TIMELIMIT=soon"}),
                       doctest::Contains("$SBATCH_TIMELIMIT: "), usage_error);
  // fsub reads no environment: only sbatch calls read_sbatch_environment.
  CHECK(parse_fsub_command_line(args{"job.sh"}).environment_options == job_options{});
}

TEST_CASE("Slurm options whose value is optional take it attached only, as Slurm's getopt does") {
  // --nice and --propagate were read as needing a value: "--nice job.sh"
  // took the script for the value, and "#SBATCH --propagate" was refused.
  const auto cmd = parse_fsub_command_line(args{"--nice", "job.sh"});
  REQUIRE(cmd.script_path);
  CHECK(*cmd.script_path == "job.sh");
  CHECK(cmd.options.recorded == std::vector<std::string>{"nice"});
  const auto d = parse_directives("#!/bin/sh\n#SBATCH --propagate\n#SBATCH --nice=5\n");
  CHECK(d.options.recorded == std::vector<std::string>{"propagate", "nice=5"});
}

namespace {

// The text of the user guide between "<!-- begin: NAME" and "<!-- end: NAME".
std::string guide_section(const std::string& name) {
  std::ifstream in(std::string(AQS_SOURCE_DIR) + "/docs/user-guide.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  const auto begin = all.find("<!-- begin: " + name);
  const auto end = all.find("<!-- end: " + name);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  return all.substr(begin, end - begin);
}

}  // namespace

TEST_CASE("the user guide's fsub table and its list of SBATCH_* variables are the declaration's") {
  // Each row's first column names options; each of fsub's own options is in
  // exactly one row.
  std::multiset<std::string> in_rows;
  std::istringstream rows(guide_section("fsub options"));
  for (std::string line; std::getline(rows, line);) {
    if (!line.starts_with("| `")) continue;
    const std::string first = line.substr(2, line.find(" | ", 2) - 2);
    std::istringstream words(first);
    for (std::string w; words >> w;) {
      w.erase(std::remove(w.begin(), w.end(), '`'), w.end());
      if (w.ends_with(',')) w.pop_back();
      if (w.starts_with("-")) in_rows.insert(w.substr(0, w.find_first_of("=[")));
    }
  }
  for (const auto& o : submit_options()) {
    if (o.kind != option_kind::acted || !in_scope(o.scope, option_scope::batch)) continue;
    CAPTURE(o.name);
    CHECK(in_rows.count("--" + std::string(o.name)) == 1);
    if (o.short_name != 0) CHECK(in_rows.count(std::string("-") + o.short_name) == 1);
  }
  std::set<std::string> listed_env, declared_env;
  const std::string env_text = guide_section("sbatch's environment");
  for (std::size_t at = env_text.find("SBATCH_"); at != std::string::npos; at = env_text.find("SBATCH_", at + 1)) {
    std::size_t end = at;
    while (end < env_text.size() && (std::isupper(static_cast<unsigned char>(env_text[end])) || env_text[end] == '_')) {
      ++end;
    }
    listed_env.insert(env_text.substr(at, end - at));
  }
  for (const auto& o : submit_options()) {
    if (!o.env.empty()) declared_env.insert(std::string(o.env));
  }
  CHECK(listed_env == declared_env);
}
