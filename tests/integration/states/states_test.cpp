// states: every job state of core::job_state through every output a user or a script reads it from.
//
// For each state in core::k_all_job_states there is a job in that state:
// from a real run where a run reaches it reliably (COMPLETED, FAILED,
// CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, RUNNING, SUSPENDED,
// PENDING), and for every state also one written through aqsd's own store
// (RESIZING is only held for the moment an MPI program takes to migrate).
// Each is then read from fjobs --json, REST GET /api/v1/jobs/ID, aqs-squeue,
// aqs-sacct and aqs-scontrol show job; /metrics counts each final state's
// real run in aqs_jobs_ended_total; faucetsd's store tells live jobs from
// ended ones by the same list. A state added to the core and missing in an
// output fails here by name.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e.hpp"
#include "slurm/slurm_format.hpp"
#include "core/job_state.hpp"
#include "http_client.hpp"
#include "server/faucets_store.hpp"
#include "store/pg_job_store.hpp"
#include "store_samples.hpp"

using nlohmann::json;

namespace {

std::string name_of(job_state s) { return std::string(core::to_string(s)); }

std::int64_t id_of(const test::run_result& r) {
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return std::stoll(r.out);
}

// A job written through the store, brought into `state` by legal
// transitions (aqsd reads every view from the store).
std::int64_t store_job_in(store::job_store& st, job_state state) {
  store::job_submission q = test::sample_request("aqs-layers-store", 2);
  q.adaptive = true;
  q.max_pe = 4;
  q.name = "via-store-" + name_of(state);
  const auto id = st.submit(q);
  if (state == job_state::pending) return id;
  const auto map = core::processor_set::from_string("11000000");
  st.transition({.job_id = id, .to = job_state::running, .procs = map});
  if (state == job_state::resizing) {
    st.transition({.job_id = id, .to = job_state::resizing, .procs = core::processor_set::from_string("11110000")});
  } else if (state != job_state::running) {
    store::job_transition t{.job_id = id, .to = state, .reason = "set by the test"};
    if (core::is_final(state)) t.exit_code = state == job_state::completed ? 0 : 1;
    st.transition(t);
  }
  REQUIRE(st.get_job(id)->status.state == state);
  return id;
}

struct outputs {
  test::cluster& c;
  test::http_target web;
  std::string token;

  test::run_result run_slurm(const std::string& cmd, std::vector<std::string> args) {
    args.insert(args.begin(), std::string(AQS_SLURM_BIN_DIR) + "/aqs-" + cmd);
    return test::run(args, {{"AQS_SOCKET", c.socket()}, {"TZ", "UTC"}, {"USER", "root"}});
  }

  // Every output's view of job `id`, which must be in `state`.
  void check(std::int64_t id, job_state state) {
    const std::string want = name_of(state);
    const std::string sid = std::to_string(id);
    INFO("job " << id << " in " << want);

    const auto fj = c.cmd(bin().fjobs, {"--json", "--all"});
    REQUIRE_MESSAGE(fj.status == 0, fj.err);
    std::string seen = "(not listed)";
    for (const auto& j : json::parse(fj.out)) {
      if (j.at("id").get<std::int64_t>() == id) seen = j.at("state").get<std::string>();
    }
    CHECK_MESSAGE(seen == want, "fjobs --json shows " << seen);

    const auto r = test::http_request(web, "GET", "/api/v1/jobs/" + sid, token);
    REQUIRE_MESSAGE(r.status == 200, r.body);
    CHECK_MESSAGE(r.json().at("state").get<std::string>() == want, "REST shows " << r.body);

    const auto slurm_names = slurm::slurm_state(state);
    const auto q = run_slurm("squeue", {"-h", "-j", sid, "-o", "%t|%T"});
    CHECK_MESSAGE(q.status == 0, q.err);
    CHECK_MESSAGE(q.out == slurm_names.compact + "|" + slurm_names.name + "\n", "squeue shows " << q.out);

    const auto a = run_slurm("sacct", {"-X", "-n", "-P", "-j", sid, "--format=JobID,State"});
    CHECK_MESSAGE(a.status == 0, a.err);
    CHECK_MESSAGE(a.out.starts_with(sid + "|" + slurm_names.name), "sacct shows " << a.out);

    const auto s = run_slurm("scontrol", {"show", "job", sid});
    CHECK_MESSAGE(s.status == 0, s.err);
    CHECK_MESSAGE(s.out.find("JobState=" + slurm_names.name + " ") != std::string::npos, "scontrol shows " << s.out);
  }
};

}  // namespace

TEST_CASE("every job state reads the same in fjobs --json, REST, squeue, sacct, scontrol and /metrics") {
  test::test_database db;
  auto o = test::nodes_of(db, 2, 4);
  o.heartbeat_timeout_s = 3;
  o.aqsd_args = {"--http", "127.0.0.1:0"};
  o.agent_args = {"--memory", "4G"};
  test::cluster c(o);
  c.wait_nodes_up(2);

  outputs out{c, {}, {}};
  {
    out.web.port = c.http_port();
    const auto t = c.cmd(AQS_FTOKEN_BINARY, {});
    REQUIRE_MESSAGE(t.status == 0, t.err);
    out.token = test::last_line(t.out);
  }

  // Real runs, the final states first (each frees its processors).
  std::map<job_state, std::int64_t> real;
  const auto submit = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "--parsable");
    return id_of(c.cmd(bin().fsub, args));
  };
  const std::vector<job_state> ends = {job_state::completed, job_state::failed, job_state::cancelled,
                                       job_state::timeout, job_state::out_of_memory, job_state::node_fail};
  real[job_state::completed] = submit({"--wrap", "true"});
  real[job_state::failed] = submit({"--wrap", "false"});
  real[job_state::cancelled] = submit({"--wrap", "sleep 300"});
  real[job_state::timeout] = submit({"-t", "0:02", "--wrap", "sleep 300"});
  // tail holds a 200 MB line: over a 100 MB limit.
  real[job_state::out_of_memory] =
      submit({"--mem=100M", "--wrap", "{ head -c 200000000 /dev/zero; sleep 5; } | tail -n 1 | wc -c"});
  c.wait_state(real[job_state::cancelled], {job_state::running});
  REQUIRE(c.cmd(bin().fkill, {std::to_string(real[job_state::cancelled])}).status == 0);
  for (const job_state s : {job_state::completed, job_state::failed, job_state::cancelled, job_state::timeout,
                            job_state::out_of_memory}) {
    CHECK_MESSAGE(c.wait_state(real[s], {s, job_state::completed, job_state::failed, job_state::cancelled,
                                         job_state::timeout, job_state::out_of_memory},
                               90s)
                          .state == s,
                  name_of(s));
  }
  // NODE_FAIL: the agent of the node it runs on dies and stays silent.
  real[job_state::node_fail] = submit({"--wrap", "sleep 300"});
  const auto on = c.wait_state(real[job_state::node_fail], {job_state::running});
  const int node = on.nodes.find("node1") != std::string::npos ? 1 : 0;
  c.kill_agent(node);
  CHECK(c.wait_state(real[job_state::node_fail], {job_state::node_fail, job_state::pending}, 60s).state ==
        job_state::node_fail);
  c.start_agent(node);
  c.wait_nodes_up(2);

  // The live states.
  real[job_state::running] = submit({"--wrap", "sleep 300"});
  c.wait_state(real[job_state::running], {job_state::running});
  real[job_state::suspended] = submit({"--wrap", "sleep 300"});
  c.wait_state(real[job_state::suspended], {job_state::running});
  const auto susp = c.cmd(bin().fctl, {"suspend", std::to_string(real[job_state::suspended])});
  REQUIRE_MESSAGE(susp.status == 0, susp.err);
  c.wait_state(real[job_state::suspended], {job_state::suspended});
  // The whole cluster while one processor is busy: it waits.
  real[job_state::pending] = submit({"-n", "8", "--wrap", "sleep 1"});
  std::this_thread::sleep_for(1s);
  REQUIRE(c.job(real[job_state::pending])->state == job_state::pending);

  // Every state through the store too, RESIZING among them.
  store::pg_job_store_options so;
  so.conninfo = db.conninfo();
  store::pg_job_store st(so);
  std::map<job_state, std::int64_t> stored;
  for (const job_state s : core::k_all_job_states) stored[s] = store_job_in(st, s);

  std::set<job_state> covered;
  for (const auto& [s, id] : real) {
    out.check(id, s);
    covered.insert(s);
  }
  for (const auto& [s, id] : stored) {
    out.check(id, s);
    covered.insert(s);
  }
  CHECK(covered.size() == core::k_all_job_states.size());

  // /metrics: one real run ended in each final state.
  const auto m = test::http_request(out.web, "GET", "/metrics", out.token);
  REQUIRE(m.status == 200);
  for (const job_state s : core::k_all_job_states) {
    const std::string prefix = "aqs_jobs_ended_total{state=\"" + name_of(s) + "\"} ";
    if (!core::is_final(s)) {
      CHECK_MESSAGE(m.body.find(prefix) == std::string::npos, name_of(s));
      continue;
    }
    const bool ran = std::find(ends.begin(), ends.end(), s) != ends.end();
    CHECK_MESSAGE(m.body.find(prefix + (ran ? "1" : "0") + "\n") != std::string::npos,
                  "/metrics: " << prefix << "... in\n" << m.body);
  }
  REQUIRE(c.cmd(bin().fkill, {std::to_string(real[job_state::running]), std::to_string(real[job_state::suspended]),
                              std::to_string(real[job_state::pending])})
              .status == 0);
}

TEST_CASE("faucetsd's store keeps a job live in each non-final state and ends it in each final one") {
  auto db = test::test_database::empty();  // faucetsd's own schema, not aqsd's
  faucets::faucets_store fs(db.conninfo());
  std::map<job_state, std::int64_t> ids;
  for (const job_state s : core::k_all_job_states) {
    faucets::stored_job j;
    j.owner = "aqs-layers-store";
    j.name = "via-faucets-" + name_of(s);
    j.submit = "{}";
    const auto id = fs.add_job(j);
    const bool ended = core::is_final(s);
    fs.update(id, name_of(s), ended ? 0 : 2, ended ? std::optional<std::int64_t>(0) : std::nullopt,
              std::string("2026-11-28T00:00:00Z"),
              ended ? std::optional<std::string>("2026-11-28T00:01:00Z") : std::nullopt);
    ids[s] = id;
  }
  std::set<std::int64_t> live, listed;
  for (const auto& j : fs.live_jobs()) live.insert(j.id);
  for (const auto& j : fs.jobs(std::nullopt, false, std::nullopt, 1000)) listed.insert(j.id);
  for (const auto& [s, id] : ids) {
    INFO(name_of(s));
    CHECK(faucets::is_final_state(name_of(s)) == core::is_final(s));
    CHECK(live.count(id) == (core::is_final(s) ? 0u : 1u));
    CHECK(listed.count(id) == (core::is_final(s) ? 0u : 1u));
    const auto j = fs.job(id);
    REQUIRE(j);
    CHECK(faucets::to_json(*j).at("state").get<std::string>() == name_of(s));
  }
}
