// Hostile values through the job store: whatever a user can type (quotes,
// backslashes, SQL, array syntax, every Unicode plane, huge scripts and
// environments) comes back byte for byte; what PostgreSQL cannot hold (NUL,
// invalid UTF-8) is refused with a clear error and writes nothing.
#include <doctest/doctest.h>

#include <future>
#include <random>
#include <string>

#include <pqxx/pqxx>

#include "core/utf8.hpp"
#include "store/pg_job_store.hpp"
#include "store/sql_text.hpp"
#include "store_test_util.hpp"
#include "test_pg.hpp"

using namespace aqs::store;
using namespace std::string_literals;
using namespace aqs::test;  // the store tests' helpers (store_test_util.hpp) and databases

namespace {

const std::vector<std::string> k_nasty = {
    "",
    " ",
    "'",
    "''",
    "\"",
    "\\",
    "\\\\",
    "\\'",
    "'; DROP TABLE jobs; --",
    "\"); DELETE FROM job_events; --",
    "$1",
    "$$",
    "$q$ body $q$",
    ";",
    "a,b",
    "{",
    "}",
    "{}",
    "{\"a\",\"b\"}",
    "{NULL}",
    "NULL",
    "null",
    "(1,2)",
    "[1:2]={a,b}",
    "%s%n%j%x",
    "line1\nline2\r\nline3\ttab",
    "\x01\x02\x1b[31mred\x1b[0m\x7f",
    "Gr\xC3\xBC\xC3\x9F" "e, \xC3\xA9t\xC3\xA9",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
    "\xF0\x9F\x9A\x80\xF0\x9F\x94\xA5\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB",  // emoji incl. ZWJ sequence
    "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D",        // Arabic and Hebrew (RTL)
    "\xE2\x80\xAE" "override\xE2\x80\xAC",                                             // RTL override
    "\xEF\xBB\xBF" "bom",
    "\xF4\x8F\xBF\xBF",  // U+10FFFF
    "\\u0000 is not a NUL here",
};

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += p + "|";
  return out;
}

}  // namespace

TEST_CASE_FIXTURE(fresh_store, "hostile strings in every text field and array round-trip exactly") {
  std::vector<std::int64_t> ids;
  std::vector<job_submission> requests;
  for (std::size_t i = 0; i < k_nasty.size(); ++i) {
    const std::string& s = k_nasty[i];
    job_submission q = simple_request("user " + s);
    q.submit_token = "tok " + s + std::to_string(i);
    q.name = s;
    q.script = "#!/bin/sh\necho " + s + "\n";
    q.workdir = "/tmp/" + s;
    q.stdout_pattern = s + "%j.out";
    q.stderr_pattern = s;
    q.argv = k_nasty;
    q.environment = {"X=" + s, s, "Y=" + join(k_nasty)};
    requests.push_back(q);
    ids.push_back(store.submit(q));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CAPTURE(k_nasty[i]);
    auto rec = store.get_job(ids[i]);
    REQUIRE(rec);
    CHECK(rec->request == requests[i]);
    // The listing path reads the same columns its own way.
    auto listed = store.list_jobs({.user_name = requests[i].user_name});
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].name == requests[i].name);
  }
  // Resubmitting finds every job by its hostile token (the token lookup
  // passes them as one text[] literal), in one batch, and adds nothing.
  std::vector<std::future<std::int64_t>> again;
  for (const auto& q : requests) again.push_back(store.submit_async(q));
  for (std::size_t i = 0; i < again.size(); ++i) CHECK(again[i].get() == ids[i]);
  // Nothing was executed: both tables are still there with all rows.
  pqxx::connection c(db.conninfo());
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT count(*) FROM jobs")[0].as<std::size_t>() == k_nasty.size());
  CHECK(tx.exec1("SELECT count(*) FROM job_events")[0].as<std::size_t>() == k_nasty.size());
}

TEST_CASE_FIXTURE(fresh_store, "a 1 MB script and 1,000 environment variables round-trip exactly") {
  std::mt19937 rng(42);
  std::string script = "#!/bin/bash\n";
  const std::string alphabet = "abc XYZ 019 '\"\\;,{}$`\t\n#%()[]<>|&*?!~";
  while (script.size() < (1u << 20)) {
    // Whole pieces only, so that multi-byte characters stay intact.
    script += k_nasty[rng() % k_nasty.size()];
    script += alphabet.substr(rng() % (alphabet.size() - 8), 1 + rng() % 8);
    script += '\n';
  }
  while (!aqs::core::is_valid_utf8(script)) script.pop_back();
  REQUIRE(script.size() > 1'000'000);

  job_submission q = simple_request();
  q.submit_token = "big-one";
  q.script = script;
  for (int i = 0; i < 1000; ++i) {
    q.environment.push_back("VAR_" + std::to_string(i) + "=" + k_nasty[static_cast<std::size_t>(i) % k_nasty.size()] +
                            "," + std::to_string(i));
  }
  q.argv.assign(200, "arg with \"quotes\", commas and {braces}");
  const auto id = store.submit(q);
  auto rec = store.get_job(id);
  REQUIRE(rec);
  CHECK(rec->request.script.size() == script.size());
  CHECK(rec->request.script == script);
  CHECK(rec->request.environment == q.environment);
  CHECK(rec->request.argv == q.argv);
  CHECK(rec->request.name == q.name);
  CHECK(rec->request.submit_token == q.submit_token);
  CHECK(rec->request == q);
}

TEST_CASE_FIXTURE(fresh_store, "NUL bytes and invalid UTF-8 are refused naming the field, and nothing is written") {
  auto refused = [&](auto change, const char* msg) {
    CHECK_THROWS_WITH_AS(store.submit_async(changed_request(change)), doctest::Contains(msg), invalid_job);
  };
  refused([](job_submission& q) { q.script = "echo a\0b"s; }, "script contains a NUL byte");
  refused([](job_submission& q) { q.name = "\0"s; }, "name contains a NUL byte");
  refused([](job_submission& q) { q.environment = {"OK=1", "BAD=\0"s}; }, "environment contains a NUL byte");
  refused([](job_submission& q) { q.argv = {"x\0"s}; }, "argv contains a NUL byte");
  refused([](job_submission& q) { q.workdir = "/tmp/\xFF"; }, "workdir is not valid UTF-8");
  refused([](job_submission& q) { q.user_name = "\xC0\xAF"; }, "user_name is not valid UTF-8");
  refused([](job_submission& q) { q.submit_token = "\xED\xA0\x80"; }, "submit_token is not valid UTF-8");
  CHECK_THROWS_WITH_AS(store.register_node({.name = "n\0"s, .nprocs = 1}), doctest::Contains("NUL"), invalid_job);
  CHECK_THROWS_WITH_AS(store.transition({.job_id = 1, .to = aqs::core::job_state::cancelled, .reason = "r\0"s}),
                       doctest::Contains("reason contains a NUL byte"), invalid_job);
  pqxx::connection c(db.conninfo());
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT count(*) FROM jobs")[0].as<int>() == 0);
  CHECK(tx.exec1("SELECT count(*) FROM nodes")[0].as<int>() == 0);
}

TEST_CASE_FIXTURE(fresh_store, "hostile transition reasons and node fields round-trip exactly") {
  for (const auto& s : k_nasty) {
    if (s.empty()) continue;
    auto n = store.register_node({.name = "node " + s, .address = s, .nprocs = 1, .cpus = s});
    CHECK(n.name == "node " + s);
    CHECK(n.address == s);
    CHECK(n.cpus == s);
    const auto id = store.submit(simple_request());
    store.transition({.job_id = id, .to = aqs::core::job_state::cancelled, .reason = s});
    auto h = store.job_history(id);
    REQUIRE(h.size() == 2);
    CHECK(h[1].reason == s);
  }
  CHECK(store.list_nodes().size() == k_nasty.size() - 1);
}
