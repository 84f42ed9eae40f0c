// Unit tests of the typed replies: round trips, the bytes aqsd sends today, and validation of what a client reads.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/framing.hpp"
#include "protocol/replies.hpp"
#include "samples.hpp"

using namespace aqs::protocol;
using aqs::core::job_state;
using nlohmann::json;

namespace {

job_info sample_job_info(std::int64_t id) {
  job_info j = aqs::test::sample_job_info();
  j.id = id;
  j.name = "heat" + std::to_string(id);
  j.submit_time = "2026-11-21T21:00:00.000Z";  // as aqsd writes times
  j.start_time = "2026-11-21T21:00:01.000Z";
  return j;
}

listed_node sample_node(const std::string& name, bool connected) {
  listed_node n;
  n.name = name;
  n.state = node_state::up;
  n.first_proc = 4;
  n.nprocs = 4;
  n.procs = "4-7";
  n.jobs = {42, 43};
  n.memory_mb = 16000;
  n.gpus = 1;
  n.connected = connected;
  return n;
}

job_history_reply sample_history() {
  job_history_reply h;
  h.job = sample_job_info(42);
  h.events.push_back({"2026-11-21T21:00:00.000Z", std::nullopt, job_state::pending, "", "", "submitted", {}, {}});
  h.events.push_back({"2026-11-21T21:00:01.000Z", job_state::pending, job_state::running, "", "00111100", "", {}, {}});
  h.events.push_back(
      {"2026-11-21T21:05:00.000Z", job_state::running, job_state::failed, "00111100", "", "exit 3", 3, std::nullopt});
  h.events.push_back({"2026-11-21T21:06:00.000Z", job_state::running, job_state::cancelled, "0011", "", "by bob",
                      std::nullopt, 9});
  return h;
}

// What a client gets: the frame's body parsed as a message.
ok received(const ok& sent) {
  frame_decoder d;
  const auto bodies = d.feed(encode(sent));
  REQUIRE(bodies.size() == 1);
  return std::get<ok>(parse_message(std::string_view(bodies[0])));
}

template <class Reply>
void check_round_trip(const Reply& r) {
  CHECK(read_reply<Reply>(received(make_ok(9, r))) == r);
}

template <class Reply>
std::string reply_error(const json& result) {
  try {
    (void)read_reply<Reply>(ok{1, result});
  } catch (const protocol_error& e) {
    CHECK(e.code() == error_code::bad_request);
    return e.what();
  }
  FAIL("read without error: " << result.dump());
  return "";
}

}  // namespace

TEST_CASE("every reply survives make_ok, framing, parsing and read_reply unchanged") {
  check_round_trip(hello_reply{});
  check_round_trip(submit_reply{17, {}});
  check_round_trip(submit_reply{17, {"partition 'gpu' is recorded; this cluster has one partition of all its nodes"}});
  check_round_trip(cancel_reply{{1, 2}, {{3, error_code::invalid_state, "job 3 has already ended (COMPLETED)"},
                                         {4, error_code::not_found, "no pending or running job 4"}}});
  check_round_trip(cancel_reply{});
  check_round_trip(list_jobs_reply{{sample_job_info(1), sample_job_info(2)}, true});
  check_round_trip(list_jobs_reply{{}, false});
  check_round_trip(list_nodes_reply{{sample_node("node0", true), sample_node("node1", false)}, {}, 3, 2});
  check_round_trip(list_nodes_reply{});
  listed_node busy = sample_node("node3", true);
  busy.alloc = 3;  // processors held, for /api/v1/partitions
  check_round_trip(list_nodes_reply{{busy}, {}, 0, 1});
  // With partitions: the node's and the partitions' own (sinfo).
  listed_node in = sample_node("node2", true);
  in.partitions = {"debug", "batch"};
  check_round_trip(list_nodes_reply{{in},
                                    {partition_info{"debug", "UP", true, "node[0-2]", 1800, 600, 1, 0, 4, 1},
                                     partition_info{"batch", "DOWN", false, "ALL", 0, 0, 0, 64, 0, 0}}, 0, 0});
  check_round_trip(sample_history());
  check_round_trip(register_reply{8, {5, 6}, "0123456789abcdef0123456789abcdef"});
  check_round_trip(register_reply{0, {}, "0123456789abcdef0123456789abcdef"});
  check_round_trip(remote_exec_reply{"node1"});
  check_round_trip(token_reply{"abc.def", "0123abcd", "alice", 1000, 1763900000});
}

// The expressions below are those of aqsd's handlers (scheduler/daemon) that
// build the replies as JSON; the daemon switches to make_ok with no change
// on the wire.
TEST_CASE("make_ok encodes the same bytes as aqsd's handlers build today") {
  SUBCASE("hello (server.cpp)") {
    CHECK(encode(make_ok(0, hello_reply{})) ==
          encode(ok{0, {{"protocol", k_protocol_version}, {"server", "aqsd"}}}));
  }
  SUBCASE("submit (submit.cpp)") {
    const std::int64_t id = 4711;
    CHECK(encode(make_ok(3, submit_reply{id, {}})) == encode(ok{3, {{"job_id", id}}}));
  }
  SUBCASE("register (nodes.cpp)") {
    const std::size_t first_proc = 16;
    json kill = json::array();
    kill.push_back(std::int64_t{5});
    kill.push_back(std::int64_t{9});
    CHECK(encode(make_ok(2, register_reply{16, {5, 9}, "0123456789abcdef0123456789abcdef"})) ==
          encode(ok{2, {{"first_proc", first_proc}, {"kill", kill}, {"cluster_id", "0123456789abcdef0123456789abcdef"}}}));
    CHECK(encode(make_ok(2, register_reply{0, {}, "0123456789abcdef0123456789abcdef"})) ==
          encode(ok{2, {{"first_proc", std::size_t{0}}, {"kill", json::array()}, {"cluster_id", "0123456789abcdef0123456789abcdef"}}}));
  }
  SUBCASE("cancel (kill.cpp)") {
    json cancelled = json::array();
    json failed = json::array();
    cancelled.push_back(std::int64_t{1});
    cancelled.push_back(std::int64_t{2});
    failed.push_back({{"job_id", std::int64_t{3}}, {"code", to_string(error_code::invalid_state)},
                      {"message", std::string("job 3 has already ended (COMPLETED)")}});
    const cancel_reply r{{1, 2}, {{3, error_code::invalid_state, "job 3 has already ended (COMPLETED)"}}};
    CHECK(encode(make_ok(5, r)) == encode(ok{5, {{"cancelled", cancelled}, {"failed", failed}}}));
    CHECK(encode(make_ok(5, cancel_reply{})) ==
          encode(ok{5, {{"cancelled", json::array()}, {"failed", json::array()}}}));
  }
  SUBCASE("list_jobs (views.cpp: the jobs as text after \"more\")") {
    for (const bool more : {false, true}) {
      for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
        std::vector<job_info> jobs;
        for (std::size_t i = 0; i < n; ++i) jobs.push_back(sample_job_info(static_cast<std::int64_t>(i + 1)));
        if (n > 0) jobs.front().name = "q\"b\\s/h\xc3\xa9";  // escapes and UTF-8 alike
        std::string text = "\"jobs\":[";
        std::size_t sent = 0;
        for (const auto& j : jobs) {
          if (sent > 0) text += ',';
          append_json(text, j);
          ++sent;
        }
        text += ']';
        ok today{7, {{"more", more}}};
        today.raw_members = std::move(text);
        const ok typed = make_ok(7, list_jobs_reply{jobs, more});
        CHECK(encode(typed) == encode(today));
        // And the text path is the JSON the description writes.
        CHECK(received(typed).result == json{{"more", more}, {"jobs", json::parse(encode_body(typed))["jobs"]}});
        CHECK(read_reply<list_jobs_reply>(received(typed)) == list_jobs_reply{jobs, more});
      }
    }
  }
  SUBCASE("list_nodes (views.cpp)") {
    json out = json::array();
    std::vector<listed_node> nodes;
    for (const bool connected : {true, false}) {
      const listed_node n = sample_node(connected ? "node0" : "node1", connected);
      json j = to_json(static_cast<const node_info&>(n));
      j["connected"] = connected;
      out.push_back(std::move(j));
      nodes.push_back(n);
    }
    CHECK(encode(make_ok(4, list_nodes_reply{nodes, {}, 0, 0})) == encode(ok{4, {{"nodes", std::move(out)}}}));
  }
  SUBCASE("job_history (views.cpp)") {
    const job_history_reply h = sample_history();
    json events = json::array();
    for (const auto& e : h.events) {
      json ev = {{"time", e.time},
                 {"old_state", e.old_state ? json(aqs::core::to_string(*e.old_state)) : json()},
                 {"new_state", aqs::core::to_string(e.new_state)},
                 {"old_procs", e.old_procs},
                 {"new_procs", e.new_procs},
                 {"reason", e.reason}};
      if (e.exit_code) ev["exit_code"] = static_cast<std::int32_t>(*e.exit_code);
      if (e.signal) ev["signal"] = static_cast<std::int32_t>(*e.signal);
      events.push_back(std::move(ev));
    }
    CHECK(encode(make_ok(6, h)) == encode(ok{6, {{"job", to_json(h.job)}, {"events", events}}}));
  }
  SUBCASE("remote_exec (remote_exec.cpp)") {
    const std::string name = "node3";
    CHECK(encode(make_ok(8, remote_exec_reply{name})) == encode(ok{8, {{"node", name}}}));
  }
}

TEST_CASE("what fkill and fjobs --history print with --json is the result aqsd sent") {
  const json failed =
      json::array({json{{"job_id", 3}, {"code", "not_found"}, {"message", "no pending or running job 3"}}});
  const json cancel = {{"cancelled", json::array({1, 2})}, {"failed", failed}};
  CHECK(to_json(read_reply<cancel_reply>(ok{1, cancel})).dump() == cancel.dump());
  const json history = make_ok(1, sample_history()).result;
  CHECK(to_json(read_reply<job_history_reply>(ok{1, history}))["events"].dump() == history["events"].dump());
}

TEST_CASE("a reply that does not validate names the field at fault") {
  CHECK(reply_error<submit_reply>(json::object()) == "field 'job_id' is missing");
  CHECK(reply_error<submit_reply>({{"job_id", 0}}) == "field 'job_id' must be in 1..9007199254740991");
  CHECK(reply_error<submit_reply>({{"job_id", "7"}}) == "field 'job_id' must be an integer in 1..9007199254740991");
  CHECK(reply_error<submit_reply>(json::array()) == "field '(top)' must be an object");
  CHECK(reply_error<hello_reply>({{"protocol", 1}}) == "field 'server' is missing");
  CHECK(reply_error<cancel_reply>({{"cancelled", {1, 0}}}) == "field 'cancelled[1]' must be in 1..9007199254740991");
  CHECK(reply_error<cancel_reply>({{"failed", {{{"job_id", 3}, {"code", 4}, {"message", "m"}}}}}) ==
        "field 'failed[0].code' must be a string");
  CHECK(reply_error<cancel_reply>({{"failed", {3}}}) == "field 'failed[0]' must be an object");
  CHECK(reply_error<register_reply>({{"first_proc", 0}, {"kill", "5"}}) == "field 'kill' must be an array");
  CHECK(reply_error<register_reply>({{"kill", json::array()}}) == "field 'first_proc' is missing");
  CHECK(reply_error<remote_exec_reply>({{"node", ""}}) == "field 'node' must not be empty");
  // The listed objects are read as parse_job_info and parse_node_info read them.
  json bad_job = to_json(sample_job_info(2));
  bad_job["state"] = "SLEEPING";
  CHECK(reply_error<list_jobs_reply>({{"jobs", {to_json(sample_job_info(1)), bad_job}}}) ==
        "field 'jobs[1].state' is not a job state (PENDING, RUNNING, ... NODE_FAIL)");
  CHECK(reply_error<list_jobs_reply>({{"jobs", {1}}}) == "field 'jobs[0]' must be an object");
  CHECK(reply_error<list_jobs_reply>(json::object()) == "field 'jobs' is missing");
  CHECK(reply_error<list_jobs_reply>({{"jobs", json::array()}, {"more", 1}}) == "field 'more' must be true or false");
  json node = make_ok(1, list_nodes_reply{{sample_node("n", true)}, {}, 0, 0}).result["nodes"][0];
  node["connected"] = "yes";
  CHECK(reply_error<list_nodes_reply>({{"nodes", {node}}}) == "field 'nodes[0].connected' must be true or false");
  node["state"] = "IDLE";
  CHECK(reply_error<list_nodes_reply>({{"nodes", {node}}}) == "field 'nodes[0].state' must be UP, DOWN or DRAIN");
  json history = make_ok(1, sample_history()).result;
  history["events"][1]["new_procs"] = "0120";
  CHECK(reply_error<job_history_reply>(history) == "field 'events[1].new_procs' must contain only 0 and 1");
  history["events"][1]["new_procs"] = "0110";
  history["events"][0]["old_state"] = "BEFORE";
  CHECK(reply_error<job_history_reply>(history) ==
        "field 'events[0].old_state' is not a job state (PENDING, RUNNING, ... NODE_FAIL)");
  history.erase("job");
  CHECK(reply_error<job_history_reply>(history) == "field 'job' is missing");
}

TEST_CASE("a reply from a newer aqsd reads with its unknown members ignored and absent lists empty") {
  const auto r = read_reply<register_reply>(ok{1, {{"first_proc", 8}, {"drain", true}, {"cluster_id", "0123456789abcdef0123456789abcdef"}}});
  CHECK(r == register_reply{8, {}, "0123456789abcdef0123456789abcdef"});
  const auto c = read_reply<cancel_reply>(
      ok{1, {{"cancelled", {4}}, {"failed", {{{"job_id", 5}, {"code", "quota_exceeded"}, {"message", "m"}}}}}});
  CHECK(c.failed.at(0).code == error_code::internal);  // a code this version does not know
  const json node = to_json(node_info{"n", node_state::up, 0, 1, "0", {}, 0, 0, {}, {}});
  const auto n = read_reply<list_nodes_reply>(ok{1, {{"nodes", {node}}}});
  CHECK_FALSE(n.nodes.at(0).connected);
}
