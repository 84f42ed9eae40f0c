// Unit tests of the protocol messages: round trips of every type and validation of bad fields.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"
#include "refusals.hpp"
#include "protocol/accounts_wire.hpp"
#include "samples.hpp"

using namespace aqs::protocol;
using aqs::core::job_state;
using nlohmann::json;
using aqs::test::parse_error;
using aqs::test::sample_job;
using aqs::test::samples;

namespace {

json submit_json() { return to_json(submit{21, sample_job()}); }

protocol_error submit_error(const std::function<void(json&)>& mutate) {
  json j = submit_json();
  mutate(j);
  return parse_error(j.dump());
}

}  // namespace

TEST_CASE("every message type survives encoding, framing, decoding and parsing unchanged") {
  const auto all = samples();
  std::vector<std::string> types_seen;
  for (const auto& m : all) {
    CAPTURE(type_of(m));
    const std::string frame = encode(m);
    frame_decoder d;
    const auto bodies = d.feed(frame);
    REQUIRE(bodies.size() == 1);
    const message back = parse_message(std::string_view(bodies[0]));
    CHECK(back == m);
    CHECK(json::parse(bodies[0])["type"] == std::string(type_of(m)));
    types_seen.emplace_back(type_of(m));
  }
  // The sample list covers every alternative of the variant.
  std::sort(types_seen.begin(), types_seen.end());
  types_seen.erase(std::unique(types_seen.begin(), types_seen.end()), types_seen.end());
  CHECK(types_seen.size() == std::variant_size_v<message>);
}

// Byte compatibility: what the descriptions write is what the hand-written
// writers wrote (these bodies are theirs), sparse and null fields included.
TEST_CASE("the samples encode to the very bytes the wire has always carried") {
  const std::vector<std::pair<std::size_t, const char*>> bodies = {
      {1, R"js({"id":8,"job_id":12,"protocol":1,"role":"job","type":"hello"})js"},
      {2, R"js({"id":8,"job_id":12,"launcher":true,"protocol":1,"role":"job","type":"hello"})js"},
      {7, R"js({"code":"bad_request","id":null,"message":"invalid JSON","type":"error"})js"},
      {9, R"js({"data":"","job_id":17,"stream":"stdout","type":"output"})js"},
      {11, R"js({"id":2,"job":{"adaptive":false,"afterok":[],"argv":["hostname"],"environment":[],)js"
          R"js("interactive":true,"max_pe":1,"min_pe":1,"name":"hostname","requeue":false,"stdout":"aqs-%j.out",)js"
          R"js("workdir":"/"},"type":"submit"})js"},
      {13, R"js({"id":4,"job_ids":[],"type":"cancel","user":"bob"})js"},
      {15, R"js({"all":false,"id":6,"job_ids":[],"states":[],"type":"list_jobs"})js"},
      {16, R"js({"all":true,"before_id":4242,"id":6,"job_ids":[],"limit":1000,"newest":true,"states":[],)js"
          R"js("type":"list_jobs"})js"},
      {22, R"js({"job_id":42,"procs":"0011","state":"RUNNING","type":"job_event"})js"},
      {23, R"js({"cpus":[0,1,2,3],"gpus":2,"id":10,"memory_mb":64000,"name":"node2","procs":16,"running":[5,6],)js"
          R"js("type":"register"})js"},
      {24, R"js({"cpus":[0,1],"gpus":0,"host":"host-b.example","id":10,"memory_mb":0,"name":"node3","procs":2,)js"
          R"js("running":[],"type":"register"})js"},
      {33, R"js({"escalate":false,"grace_s":0,"id":17,"job_id":5,"signal":10,"type":"kill"})js"},
      {34, R"js({"epoch":2,"job_id":5,"procs":"1100","type":"new_map"})js"},
      {35, R"js({"epoch":3,"job_id":5,"proc_cpus":[1,0],"proc_hosts":["h1","h2"],"procs":"0110","type":"new_map"})js"},
      {41, R"js({"job_id":5,"node":"node1","signal":9,"type":"step_ended"})js"},
  };
  const auto all = samples();
  for (const auto& [index, body] : bodies) {
    CAPTURE(index);
    CHECK(encode_body(all.at(index)) == body);
  }
}

TEST_CASE("replies put the result beside type and id, as the documentation shows") {
  const json j = to_json(ok{3, json{{"job_id", 17}}});
  CHECK(j == json::parse(R"({"type":"ok","id":3,"job_id":17})"));
  const json e = to_json(error{4, error_code::permission_denied, "not your job"});
  CHECK(e == json::parse(R"({"type":"error","id":4,"code":"permission_denied","message":"not your job"})"));
}

TEST_CASE("a submit written by hand in the documented shape parses with defaults filled in") {
  const auto m = parse_message(std::string_view(
      R"({"type":"submit","id":1,"job":{"name":"a","argv":["/bin/true"],"workdir":"/tmp",)"
      R"("min_pe":1,"max_pe":1,"some_future_field":{"x":[1,2]}},"also_unknown":true})"));
  const auto& s = std::get<submit>(m);
  CHECK(s.id == 1);
  CHECK(s.job.stdout_pattern == "aqs-%j.out");
  CHECK_FALSE(s.job.stderr_pattern.has_value());
  CHECK_FALSE(s.job.walltime_s.has_value());
  CHECK_FALSE(s.job.adaptive);
  CHECK(s.job.environment.empty());
}

TEST_CASE("a 1 MB script with 1,000 environment variables fits in one frame and parses") {
  job_spec s = sample_job();
  s.script = "#!/bin/sh\n" + std::string(1 << 20, 'e');
  s.environment.clear();
  for (int i = 0; i < 1000; ++i) s.environment.push_back("VAR" + std::to_string(i) + "=" + std::string(200, 'v'));
  const std::string frame = encode(submit{1, s});
  CHECK(frame.size() < k_max_frame);
  frame_decoder d;
  const auto bodies = d.feed(frame);
  REQUIRE(bodies.size() == 1);
  CHECK(std::get<submit>(parse_message(std::string_view(bodies[0]))).job == s);
}

TEST_CASE("an unknown type is unknown_type; a missing or non-string type is bad_request") {
  auto e = parse_error(R"({"type":"frobnicate","id":3})");
  CHECK(e.code() == error_code::unknown_type);
  CHECK(e.request_id() == 3);
  CHECK(std::string(e.what()).find("frobnicate") != std::string::npos);
  CHECK(parse_error(R"({"id":3})").code() == error_code::bad_request);
  CHECK(parse_error(R"({"type":7})").code() == error_code::bad_request);
  CHECK(parse_error(R"([1,2])").code() == error_code::bad_request);
  CHECK(parse_error("").code() == error_code::bad_request);
  CHECK(parse_error("{\"type\":\"submit\"").code() == error_code::bad_request);
}

TEST_CASE("submit validation names the field at fault and keeps the request id") {
  struct bad_case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* field;
  };
  const std::vector<bad_case> cases = {
      {"missing job", [](json& j) { j.erase("job"); }, "'job'"},
      {"job not an object", [](json& j) { j["job"] = 3; }, "'job'"},
      {"missing name", [](json& j) { j["job"].erase("name"); }, "'job.name'"},
      {"empty name", [](json& j) { j["job"]["name"] = ""; }, "'job.name'"},
      {"name with newline", [](json& j) { j["job"]["name"] = "a\nb"; }, "'job.name'"},
      {"name with NUL", [](json& j) { j["job"]["name"] = std::string("a\0b", 3); }, "'job.name'"},
      {"script with NUL", [](json& j) { j["job"]["script"] = std::string("#!\0", 3); }, "'job.script'"},
      {"name too long", [](json& j) { j["job"]["name"] = std::string(300, 'n'); }, "'job.name'"},
      {"min_pe zero", [](json& j) { j["job"]["min_pe"] = 0; }, "'job.min_pe'"},
      {"min_pe negative", [](json& j) { j["job"]["min_pe"] = -4; }, "'job.min_pe'"},
      {"min_pe a string", [](json& j) { j["job"]["min_pe"] = "4"; }, "'job.min_pe'"},
      {"min_pe fractional", [](json& j) { j["job"]["min_pe"] = 2.5; }, "'job.min_pe'"},
      {"min_pe a bool", [](json& j) { j["job"]["min_pe"] = true; }, "'job.min_pe'"},
      {"max_pe below min_pe", [](json& j) { j["job"]["max_pe"] = 1; }, "'job.max_pe'"},
      {"max_pe too big", [](json& j) { j["job"]["max_pe"] = (1 << 20) + 1; }, "'job.max_pe'"},
      {"max_pe huge unsigned", [](json& j) { j["job"]["max_pe"] = 18446744073709551615ull; }, "'job.max_pe'"},
      {"rigid with min < max", [](json& j) { j["job"]["adaptive"] = false; }, "'job.max_pe'"},
      {"adaptive not a bool", [](json& j) { j["job"]["adaptive"] = 1; }, "'job.adaptive'"},
      {"walltime zero", [](json& j) { j["job"]["walltime_s"] = 0; }, "'job.walltime_s'"},
      {"relative workdir", [](json& j) { j["job"]["workdir"] = "run"; }, "'job.workdir'"},
      {"env without =", [](json& j) { j["job"]["environment"] = {"PATH"}; }, "'job.environment[0]'"},
      {"env starting with =", [](json& j) { j["job"]["environment"] = {"A=1", "=x"}; }, "'job.environment[1]'"},
      {"env not strings", [](json& j) { j["job"]["environment"] = {1}; }, "'job.environment[0]'"},
      {"env not an array", [](json& j) { j["job"]["environment"] = "A=1"; }, "'job.environment'"},
      {"afterok zero", [](json& j) { j["job"]["afterok"] = {0}; }, "'job.afterok[0]'"},
      {"no script and no argv", [](json& j) { j["job"].erase("script"); j["job"]["argv"] = json::array(); }, "'job.argv'"},
      {"empty program", [](json& j) { j["job"].erase("script"); j["job"]["argv"] = {""}; }, "'job.argv[0]'"},
      {"too many argv", [](json& j) { j["job"]["argv"] = json::array(); for (int i = 0; i < 16385; ++i) j["job"]["argv"].push_back("a"); }, "'job.argv'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const auto e = submit_error(c.mutate);
    CHECK(e.code() == error_code::bad_request);
    CHECK(e.request_id() == 21);
    CHECK(std::string(e.what()).find(c.field) != std::string::npos);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

// The messages are read from their descriptions since issue 16; these are
// the exact texts the hand-written readers produced before, one input per
// rule and check, so peers and scripts see the same refusals.
TEST_CASE("every validation error reads word for word as it did before the descriptions") {
  struct bad_input {
    std::string text;
    const char* what;
  };
  // A submit of job "a" (argv ["a"], in "/"), its other fields to follow.
  const std::string job_a = R"js({"type":"submit","id":21,"job":{"name":"a","argv":["a"],"workdir":"/",)js";
  // A launch of job "a" as alice, its other fields to follow.
  const std::string launch_a = R"js({"type":"launch","id":15,"job_id":5,"job":{"name":"a","argv":["a"],"workdir":"/",)js"
                               R"js("min_pe":1,"max_pe":1},"user":"alice",)js";
  const std::vector<bad_input> cases = {
      {R"js({"type":"submit","id":21})js", "field 'job' is missing"},
      {R"js({"type":"submit","id":21,"job":3})js", "field 'job' must be an object"},
      {R"js({"type":"submit","id":21,"job":{"argv":["a"],"workdir":"/","min_pe":1,"max_pe":1}})js",
       "field 'job.name' is missing"},
      {R"js({"type":"submit","id":21,"job":{"name":"","argv":["a"],"workdir":"/","min_pe":1,"max_pe":1}})js",
       "field 'job.name' must not be empty"},
      {R"js({"type":"submit","id":21,"job":{"name":"a\nb","argv":["a"],"workdir":"/","min_pe":1,"max_pe":1}})js",
       "field 'job.name' contains a control character"},
      {R"js({"type":"submit","id":21,"job":{"name":"a\u0000b","argv":["a"],"workdir":"/","min_pe":1,"max_pe":1}})js",
       "field 'job.name' contains a NUL character"},
      {R"js({"type":"submit","id":21,"job":{"name":"a","argv":[],"workdir":"/","min_pe":1,"max_pe":1}})js",
       "field 'job.argv' must not be empty when there is no script"},
      {R"js({"type":"submit","id":21,"job":{"name":"a","argv":[""],"workdir":"/","min_pe":1,"max_pe":1}})js",
       "field 'job.argv[0]' must not be empty"},
      {R"js({"type":"submit","id":21,"job":{"name":"a","argv":"a","workdir":"/","min_pe":1,"max_pe":1}})js",
       "field 'job.argv' must be an array"},
      {R"js({"type":"submit","id":21,"job":{"name":"a","argv":["a"],"workdir":"run","min_pe":1,"max_pe":1}})js",
       "field 'job.workdir' must be an absolute path"},
      {job_a + R"js("environment":["A=1","=x"],"min_pe":1,"max_pe":1}})js",
       "field 'job.environment[1]' must have the form KEY=VALUE"},
      {job_a + R"js("environment":["PATH",7],"min_pe":1,"max_pe":1}})js",
       "field 'job.environment[1]' must be a string"},
      {job_a + R"js("min_pe":0,"max_pe":1}})js", "field 'job.min_pe' must be in 1..1048576"},
      {job_a + R"js("min_pe":2.5,"max_pe":1}})js", "field 'job.min_pe' must be an integer in 1..1048576"},
      {job_a + R"js("min_pe":1,"max_pe":18446744073709551615}})js", "field 'job.max_pe' must be in 1..1048576"},
      {job_a + R"js("min_pe":4,"max_pe":2,"adaptive":true}})js", "field 'job.max_pe' must be >= min_pe"},
      {job_a + R"js("min_pe":2,"max_pe":4}})js",
       "field 'job.max_pe' must equal min_pe for a rigid job (min_pe < max_pe needs adaptive)"},
      {job_a + R"js("min_pe":1,"max_pe":1,"adaptive":1}})js", "field 'job.adaptive' must be true or false"},
      {job_a + R"js("min_pe":1,"max_pe":1,"walltime_s":0}})js", "field 'job.walltime_s' must be in 1..316224000"},
      {job_a + R"js("min_pe":1,"max_pe":1,"afterok":[3,0]}})js",
       "field 'job.afterok[1]' must be in 1..9007199254740991"},
      {job_a + R"js("min_pe":1,"max_pe":1,"umask":512}})js", "field 'job.umask' must be in 0..511"},
      {job_a + R"js("min_pe":1,"max_pe":1,"stdout":""}})js", "field 'job.stdout' must not be empty"},
      {R"js({"type":"list_nodes"})js", "field 'id' is missing"},
      {R"js({"type":"list_nodes","id":-1})js", "field 'id' must be in 0..9007199254740991"},
      {R"js({"type":"hello","id":0,"protocol":1,"role":"admin"})js",
       "field 'role' must be \"client\", \"node\" or \"job\""},
      {R"js({"type":"hello","id":0,"role":"client"})js", "field 'protocol' is missing"},
      {R"js({"type":"hello","id":0,"protocol":1,"role":"job"})js", "field 'job_id' is required for role \"job\""},
      {R"js({"type":"hello","id":0,"protocol":1,"role":"client","launcher":true})js",
       "field 'launcher' is only for role \"job\""},
      {R"js({"type":"hello","id":0,"protocol":1,"role":"client","auth":""})js", "field 'auth' must not be empty"},
      {R"js({"type":"hello","id":0,"protocol":1,"role":"client","map_epoch":3})js",
       "field 'map_epoch' is only for a job's shim"},
      {R"js({"type":"hello","id":0,"protocol":1,"role":"job","job_id":4,"launcher":true,"map_epoch":3})js",
       "field 'map_epoch' is only for a job's shim"},
      {R"js({"type":"hello","id":0,"protocol":1,"role":"job","job_id":4,"map_epoch":0})js",
       "field 'map_epoch' must be in 1..9007199254740991"},
      {R"js({"type":"challenge","nonce":"xyz"})js", "field 'nonce' must be 32 to 128 hex digits"},
      {R"js({"type":"error","id":2,"code":7,"message":"m"})js", "field 'code' must be a string"},
      {R"js({"type":"output","job_id":1,"stream":"stdout","data":"abc"})js", "field 'data' must be padded base64"},
      {R"js({"type":"output","job_id":1,"stream":"tty","data":""})js",
       "field 'stream' must be \"stdout\" or \"stderr\""},
      {R"js({"type":"cancel","id":1})js", "field 'job_ids' must not be empty when no user is given"},
      {R"js({"type":"cancel","id":1,"job_ids":[1],"signal":65})js", "field 'signal' must be in 1..64"},
      {R"js({"type":"list_jobs","id":1,"states":["DONE"]})js",
       "field 'states[0]' is not a job state (PENDING, RUNNING, ... NODE_FAIL)"},
      {R"js({"type":"list_jobs","id":1,"states":[3]})js", "field 'states[0]' must be a job state string"},
      {R"js({"type":"list_jobs","id":1,"limit":10001})js", "field 'limit' must be in 1..10000"},
      {R"js({"type":"job_history","id":12,"job_id":0})js", "field 'job_id' must be in 1..9007199254740991"},
      {R"js({"type":"job_event","job_id":1,"state":"running"})js",
       "field 'state' is not a job state (PENDING, RUNNING, ... NODE_FAIL)"},
      {R"js({"type":"job_event","job_id":1,"state":"RUNNING","procs":"012"})js",
       "field 'procs' must contain only 0 and 1"},
      {R"js({"type":"register","id":1,"name":"n:1","procs":4,"cpus":[0]})js",
       "field 'name' must not contain ':', ',', '/' or spaces"},
      {R"js({"type":"register","id":1,"name":"n1","procs":4,"cpus":[]})js", "field 'cpus' must not be empty"},
      {R"js({"type":"register","id":1,"name":"n1","procs":4})js", "field 'cpus' must not be empty"},
      {R"js({"type":"register","id":1,"name":"n1","procs":4,"cpus":[65536]})js", "field 'cpus[0]' must be in 0..65535"},
      {R"js({"type":"register","id":1,"name":"n","procs":1,"cpus":[0],"running":[],"host":"a b"})js",
       "field 'host' must be a host name (letters, digits, '-', '.', '_')"},
      {R"js({"type":"register","id":1,"name":"n","procs":1,"cpus":[0],"memory_mb":-1})js",
       "field 'memory_mb' must be in 0..1099511627776"},
      {R"js({"type":"job_exited","id":1,"job_id":1,"state":"RUNNING","exit_code":0})js",
       "field 'state' must be COMPLETED, FAILED, CANCELLED, TIMEOUT or OUT_OF_MEMORY"},
      {R"js({"type":"job_exited","id":1,"job_id":1,"state":"COMPLETED"})js",
       "field 'exit_code' or 'signal' must be given, not both"},
      {R"js({"type":"job_exited","id":1,"job_id":1,"state":"FAILED","exit_code":1,"signal":9})js",
       "field 'exit_code' or 'signal' must be given, not both"},
      {R"js({"type":"job_exited","id":1,"job_id":1,"state":"FAILED","exit_code":256})js",
       "field 'exit_code' must be in 0..255"},
      {R"js({"type":"job_exited","id":1,"job_id":1,"state":"COMPLETED","exit_code":0,"user_cpu_us":-1})js",
       "field 'user_cpu_us' must be in 0..9007199254740992"},
      {R"js({"type":"job_exited","id":1,"job_id":1,"state":"COMPLETED","exit_code":0,"max_rss_kb":"big"})js",
       "field 'max_rss_kb' must be an integer in 0..1125899906842624"},
      {launch_a + R"js("uid":1000,"gid":1000,"procs":"0111","nprocs":2,"local_cpus":[0],"nodelist":"n:0"})js",
       "field 'nprocs' must equal the number of 1s in 'procs'"},
      {launch_a + R"js("uid":1000,"gid":1000,"procs":"0111","nprocs":3,"local_cpus":[],"nodelist":"n:0"})js",
       "field 'local_cpus' must not be empty"},
      {launch_a + R"js("uid":-1,"gid":1000,"procs":"0111","nprocs":3,"local_cpus":[0],"nodelist":"n:0"})js",
       "field 'uid' must be in 0..4294967294"},
      {launch_a + R"js("uid":1000,"gid":1000,"procs":"0111","nprocs":3,"local_cpus":[0],"nodelist":"n:0","spare_hosts":["h3","bad host"]})js",
       "field 'spare_hosts[1]' must be a host name (letters, digits, '-', '.', '_')"},
      {launch_a + R"js("uid":1000,"gid":1000,"procs":"0111","nprocs":3,"local_cpus":[0],"nodelist":"n:0","spare_hosts":["bad host",7]})js",
       "field 'spare_hosts[1]' must be a string"},
      {launch_a + R"js("uid":1000,"gid":1000,"procs":"0111","nprocs":3,"local_cpus":[0],"nodelist":"n:0","spare_hosts":"h3"})js",
       "field 'spare_hosts' must be an array"},
      {launch_a + R"js("uid":1000,"gid":1000,"procs":"0111","nprocs":3,"local_cpus":[0],"nodelist":"n:0","proc_hosts":["a","b","c"],"proc_cpus":[0,1,65536]})js",
       "field 'proc_cpus[2]' must be in 0..65535"},
      {R"js({"type":"kill","id":1,"job_id":1,"signal":65})js", "field 'signal' must be in 1..64"},
      {R"js({"type":"kill","id":1,"job_id":1,"signal":9,"grace_s":3601})js", "field 'grace_s' must be in 0..3600"},
      {R"js({"type":"kill","id":1,"job_id":1,"signal":9,"escalate":"no"})js", "field 'escalate' must be true or false"},
      {R"js({"type":"new_map","job_id":1,"epoch":1,"procs":"0120"})js", "field 'procs' must contain only 0 and 1"},
      {R"js({"type":"new_map","job_id":1,"epoch":1,"procs":"0000"})js", "field 'procs' must contain at least one 1"},
      {R"js({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_hosts":["a"],"proc_cpus":[0,1]})js",
       "field 'proc_hosts' must have one entry per processor"},
      {R"js({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_cpus":[0,1]})js",
       "field 'proc_hosts' is missing"},
      {R"js({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_hosts":["a","b"],"proc_cpus":[0]})js",
       "field 'proc_cpus' must have one entry per processor"},
      {R"js({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_hosts":["a",7],"proc_cpus":[0,1]})js",
       "field 'proc_hosts[1]' must be a string"},
      {R"js({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_hosts":["a","a\nb"],"proc_cpus":[0,1]})js",
       "field 'proc_hosts[1]' contains a control character"},
      {R"js({"type":"resize_ack","id":1,"job_id":1,"epoch":0,"procs":"1"})js",
       "field 'epoch' must be in 1..9007199254740991"},
      {R"js({"type":"resize_ack","id":1,"job_id":1,"epoch":1,"procs":"1","wait_us":-1})js",
       "field 'wait_us' must be in 0..9007199254740992"},
      {R"js({"type":"resize_refused","id":1,"job_id":1,"epoch":1,"reason":""})js", "field 'reason' must not be empty"},
      {R"js({"type":"resize_begin","id":1,"job_id":1})js", "field 'epoch' is missing"},
      {R"js({"type":"remote_exec","id":1,"job_id":1,"host":"h","command":"","environment":[]})js",
       "field 'command' must not be empty"},
      {R"js({"type":"remote_exec","id":1,"job_id":1,"host":"h","command":"x","environment":["X"]})js",
       "field 'environment[0]' must have the form KEY=VALUE"},
      {R"js({"type":"step_ended","job_id":1,"exit_code":0})js", "field 'node' is missing"},
      {R"js({"type":"heartbeat","id":1,"running":[0]})js", "field 'running[0]' must be in 1..9007199254740991"},
      {R"js({"type":"job_started","id":1})js", "field 'job_id' is missing"},
      {R"js({"type":"watch_job","id":1,"job_id":"1"})js", "field 'job_id' must be an integer in 1..9007199254740991"},
      {R"js({"type":"node_leaving","id":"x"})js", "field 'id' must be an integer in 0..9007199254740991"},
      {R"js({"type":"shutdown","id":9007199254740992})js", "field 'id' must be in 0..9007199254740991"},
      {R"js({"type":"ok"})js", "field 'id' is missing"},
      {R"js({"type":"frobnicate","id":3})js", "unknown message type \"frobnicate\""},
      {R"js([1,2])js", "a message must be a JSON object"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    CHECK(std::string(parse_error(c.text).what()) == c.what);
  }
  // Bounds on sizes, and text that is not UTF-8 in a JSON value built in memory.
  CHECK(std::string(submit_error([](json& j) { j["job"]["name"] = std::string(257, 'n'); }).what()) ==
        "field 'job.name' is longer than 256 bytes");
  json many = {{"type", "list_jobs"}, {"id", 1}};
  const std::size_t max_states = aqs::core::k_all_job_states.size() * 4;
  many["states"] = std::vector<std::string>(max_states + 1, "RUNNING");
  CHECK(std::string(parse_error(many.dump()).what()) ==
        "field 'states' has more than " + std::to_string(max_states) + " entries");
  try {
    parse_message(json{{"type", "submit"}, {"id", 1}, {"job", {{"name", "caf\xe9"}}}});
    FAIL("no error");
  } catch (const protocol_error& e) {
    CHECK(std::string(e.what()) == "field 'job.name' is not valid UTF-8");
  }
}

TEST_CASE("a bad or missing request id is bad_request without an id") {
  auto e = parse_error(R"({"type":"list_nodes"})");
  CHECK(e.code() == error_code::bad_request);
  CHECK_FALSE(e.request_id().has_value());
  CHECK(std::string(e.what()).find("'id'") != std::string::npos);
  CHECK_FALSE(parse_error(R"({"type":"list_nodes","id":-1})").request_id().has_value());
  CHECK_FALSE(parse_error(R"({"type":"list_nodes","id":"1"})").request_id().has_value());
}

TEST_CASE("hello validation: role, version as any integer, job_id for the job role") {
  const auto m = parse_message(std::string_view(R"({"type":"hello","id":0,"protocol":99,"role":"client"})"));
  CHECK(std::get<hello>(m).protocol == 99);  // the server, not the parser, refuses versions
  CHECK(parse_error(R"({"type":"hello","id":0,"protocol":1,"role":"admin"})").code() == error_code::bad_request);
  CHECK(parse_error(R"({"type":"hello","id":0,"role":"client"})").code() == error_code::bad_request);
  const auto e = parse_error(R"({"type":"hello","id":0,"protocol":1,"role":"job"})");
  CHECK(std::string(e.what()).find("'job_id'") != std::string::npos);
}

TEST_CASE("node and job messages validate maps, states, exit status and names") {
  using J = std::string;
  CHECK(std::string(parse_error(R"({"type":"new_map","job_id":1,"epoch":1,"procs":"0120"})").what()).find("'procs'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"new_map","job_id":1,"epoch":1,"procs":"0000"})").what()).find("'procs'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"resize_ack","id":1,"job_id":1,"epoch":0,"procs":"1"})").what()).find("'epoch'") != J::npos);
  // Placement: one host and one cpu per processor of the map, or neither.
  CHECK(std::string(parse_error(R"({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_hosts":["a"],"proc_cpus":[0,1]})").what()).find("'proc_hosts'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_cpus":[0,1]})").what()).find("'proc_hosts'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_hosts":["a","b"],"proc_cpus":[0]})").what()).find("'proc_cpus'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"new_map","job_id":1,"epoch":1,"procs":"011","proc_hosts":["a",7],"proc_cpus":[0,1]})").what()).find("'proc_hosts[1]'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"register","id":1,"name":"n","procs":1,"cpus":[0],"running":[],"host":"a b"})").what()).find("'host'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"job_exited","id":1,"job_id":1,"state":"RUNNING","exit_code":0})").what()).find("'state'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"job_exited","id":1,"job_id":1,"state":"COMPLETED"})").what()).find("'exit_code'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"job_exited","id":1,"job_id":1,"state":"FAILED","exit_code":1,"signal":9})").what()).find("'exit_code'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"job_exited","id":1,"job_id":1,"state":"FAILED","exit_code":256})").what()).find("'exit_code'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"job_event","job_id":1,"state":"running"})").what()).find("'state'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"register","id":1,"name":"n:1","procs":4,"cpus":[0]})").what()).find("'name'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"register","id":1,"name":"n1","procs":4,"cpus":[]})").what()).find("'cpus'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"kill","id":1,"job_id":1,"signal":65})").what()).find("'signal'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"cancel","id":1})").what()).find("'job_ids'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"list_jobs","id":1,"states":["DONE"]})").what()).find("'states[0]'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"list_jobs","id":1,"limit":10001})").what()).find("'limit'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"output","job_id":1,"stream":"stdout","data":"abc"})").what()).find("'data'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"output","job_id":1,"stream":"tty","data":""})").what()).find("'stream'") != J::npos);
  CHECK(std::string(parse_error(R"({"type":"challenge","nonce":"xyz"})").what()).find("'nonce'") != J::npos);
  // launch: nprocs must match the map.
  json l;
  for (const auto& m : samples()) {
    if (std::holds_alternative<launch>(m)) l = to_json(m);
  }
  REQUIRE(l["type"] == "launch");
  l["nprocs"] = 2;
  CHECK(std::string(parse_error(l.dump()).what()).find("'nprocs'") != J::npos);
  // launch: spare hosts are host names.
  l["nprocs"] = 3;
  l["spare_hosts"] = {"h3", "bad host"};
  CHECK(std::string(parse_error(l.dump()).what()).find("'spare_hosts[1]'") != J::npos);
  l["spare_hosts"] = "h3";
  CHECK(std::string(parse_error(l.dump()).what()).find("'spare_hosts'") != J::npos);
}

TEST_CASE("an error reply with a code from a newer version reads as internal") {
  const auto m = parse_message(std::string_view(R"({"type":"error","id":2,"code":"quota_exceeded","message":"m"})"));
  CHECK(std::get<error>(m).code == error_code::internal);
  CHECK(std::get<error>(m).message == "m");
}

TEST_CASE("make_error turns a protocol_error into the error reply the server sends") {
  const auto e = parse_error(R"({"type":"job_history","id":12,"job_id":0})");
  const error reply = make_error(e);
  CHECK(reply.id == 12);
  CHECK(reply.code == error_code::bad_request);
  CHECK(reply.message.find("'job_id'") != std::string::npos);
}

TEST_CASE("each role may send only its own messages") {
  CHECK(may_send(peer_role::client, submit{}));
  CHECK(may_send(peer_role::client, hello{}));
  CHECK_FALSE(may_send(peer_role::client, register_node{}));
  CHECK_FALSE(may_send(peer_role::client, launch{}));
  CHECK(may_send(peer_role::node, job_exited{}));
  CHECK(may_send(peer_role::node, ok{}));
  CHECK_FALSE(may_send(peer_role::node, shutdown{}));
  CHECK(may_send(peer_role::node, node_leaving{}));
  CHECK_FALSE(may_send(peer_role::client, node_leaving{}));
  CHECK(may_send(peer_role::node, job_signal{}));
  CHECK_FALSE(may_send(peer_role::job, job_signal{}));
  CHECK_FALSE(may_send(peer_role::client, job_signal{}));
  CHECK(may_send(peer_role::job, resize_ack{}));
  CHECK(may_send(peer_role::job, resize_refused{}));
  CHECK(may_send(peer_role::job, resize_begin{}));
  CHECK_FALSE(may_send(peer_role::client, resize_begin{}));
  CHECK_FALSE(may_send(peer_role::node, resize_begin{}));
  CHECK(may_send(peer_role::job, remote_exec{}));
  CHECK_FALSE(may_send(peer_role::job, step_ended{}));
  CHECK_FALSE(may_send(peer_role::client, remote_exec{}));
  CHECK_FALSE(may_send(peer_role::job, submit{}));
  CHECK_FALSE(may_send(peer_role::job, new_map{}));
}

TEST_CASE("job_cpus goes from aqsd to node agents only: no role may send it, only a node receives it") {
  for (auto r : {peer_role::client, peer_role::node, peer_role::job}) CHECK_FALSE(may_send(r, job_cpus{}));
  CHECK(may_receive(peer_role::node, job_cpus{}));
  CHECK_FALSE(may_receive(peer_role::client, job_cpus{}));
  CHECK_FALSE(may_receive(peer_role::job, job_cpus{}));
  // The rest of the receiving half: what each role is sent.
  CHECK(may_receive(peer_role::node, launch{}));
  CHECK(may_receive(peer_role::node, kill{}));
  CHECK_FALSE(may_receive(peer_role::node, new_map{}));
  CHECK(may_receive(peer_role::job, new_map{}));
  CHECK_FALSE(may_receive(peer_role::job, launch{}));
  CHECK(may_receive(peer_role::client, job_event{}));
  for (auto r : {peer_role::client, peer_role::node, peer_role::job}) {
    CHECK(may_receive(r, ok{}));
    CHECK(may_receive(r, error{}));
    CHECK_FALSE(may_receive(r, submit{}));
  }
  // On the wire: job and cpus required, cpus may be empty, each a cpu number.
  CHECK(encode_body(job_cpus{7, 5, {2, 3}}) == R"js({"cpus":[2,3],"id":7,"job_id":5,"type":"job_cpus"})js");
  CHECK(std::get<job_cpus>(parse_message(R"({"type":"job_cpus","id":7,"job_id":5,"cpus":[]})")).cpus.empty());
  CHECK(parse_error(R"({"type":"job_cpus","id":7,"job_id":5})").code() == error_code::bad_request);
  CHECK(parse_error(R"({"type":"job_cpus","id":7,"job_id":5,"cpus":[-1]})").code() == error_code::bad_request);
  CHECK(parse_error(R"({"type":"job_cpus","id":7,"cpus":[1]})").code() == error_code::bad_request);
}

TEST_CASE("accounts: clients send it; its action, entity and record are checked on parsing") {
  CHECK(may_send(peer_role::client, accounts{}));
  CHECK(may_send(peer_role::client, reservations{}));
  CHECK_FALSE(may_send(peer_role::node, reservations{}));
  CHECK_FALSE(may_send(peer_role::job, reservations{}));
  CHECK_FALSE(may_send(peer_role::node, accounts{}));
  CHECK_FALSE(may_send(peer_role::job, accounts{}));
  CHECK(std::get<accounts>(parse_message(R"({"type":"accounts","id":1,"action":"shares"})")).action == "shares");
  CHECK(parse_error(R"({"type":"accounts","id":1,"action":"drop"})").code() == error_code::bad_request);
  CHECK(parse_error(R"({"type":"accounts","id":1,"action":"add","entity":"user"})").code() == error_code::bad_request);
  CHECK(parse_error(R"({"type":"accounts","id":1,"action":"add","entity":"group","record":"{}"})").code() ==
        error_code::bad_request);
  CHECK(parse_error(R"({"type":"accounts","id":1,"action":"delete","entity":"qos"})").code() == error_code::bad_request);
}

TEST_CASE("id_of gives the correlation id and nothing for messages without one") {
  CHECK(id_of(submit{41, {}}) == 41);
  CHECK_FALSE(id_of(challenge{}).has_value());
  CHECK_FALSE(id_of(new_map{}).has_value());
  CHECK_FALSE(id_of(error{}).has_value());
  CHECK(id_of(error{5, error_code::internal, ""}) == 5);
}

TEST_CASE("error codes and roles have stable wire spellings") {
  for (const auto c : {error_code::bad_request, error_code::unknown_type, error_code::unsupported_version,
                       error_code::unauthorized, error_code::not_found, error_code::permission_denied,
                       error_code::invalid_state, error_code::too_large, error_code::internal}) {
    CHECK(parse_error_code(to_string(c)) == c);
  }
  CHECK(to_string(error_code::unsupported_version) == "unsupported_version");
  CHECK_FALSE(parse_error_code("BAD_REQUEST").has_value());
  CHECK(parse_role("node") == peer_role::node);
  CHECK_FALSE(parse_role("Node").has_value());
}

TEST_CASE("encoding a string that is not UTF-8 is a bad_request, not a crash") {
  submit s{1, sample_job()};
  s.job.name = "caf\xe9";
  try {
    encode(s);
    FAIL("no error");
  } catch (const protocol_error& e) {
    CHECK(e.code() == error_code::bad_request);
  }
}

TEST_CASE("frame text can be parsed from a std::string, a literal or a string_view alike") {
  const std::string text = R"({"type":"list_nodes","id":4})";
  CHECK(std::get<list_nodes>(parse_message(text)).id == 4);
  CHECK(std::get<list_nodes>(parse_message(R"({"type":"list_nodes","id":5})")).id == 5);
  CHECK(std::get<list_nodes>(parse_message(std::string_view(text))).id == 4);
  // The JSON overload validates an already-parsed value the same way.
  CHECK(std::get<list_nodes>(parse_message(json::parse(text))).id == 4);
}

TEST_CASE("a submit's umask is optional, absent from old clients, and must be within 0..0777") {
  json j = submit_json();
  j["job"].erase("umask");
  CHECK_FALSE(std::get<submit>(parse_message(j)).job.umask.has_value());
  CHECK(submit_error([](json& x) { x["job"]["umask"] = 512; }).code() == error_code::bad_request);
  CHECK(submit_error([](json& x) { x["job"]["umask"] = -1; }).code() == error_code::bad_request);
  CHECK(std::string(submit_error([](json& x) { x["job"]["umask"] = "077"; }).what()).find("umask") != std::string::npos);
}

TEST_CASE("accounts_wire: a tree goes to JSON and back unchanged; bad records are one-line errors") {
  aqs::core::account_tree t;
  t.accounts.push_back({"root", "", 1, {}, "", ""});
  aqs::core::limits l;
  l.max_jobs = 4;
  l.grp_cpus = 64;
  t.accounts.push_back({"physics", "root", 3, l, "the physicists", "uni"});
  t.associations.push_back({"alice", "physics", 2, l});
  t.qos_list.push_back({"high", 100, l, "urgent"});
  t.default_account["alice"] = "physics";
  const aqs::core::account_tree back = tree_from_json(to_json(t));
  REQUIRE(back.accounts.size() == 2);
  CHECK(back.accounts[1].lim == l);
  CHECK(back.accounts[1].shares == 3);
  CHECK(back.accounts[1].description == "the physicists");
  CHECK(back.associations[0].user == "alice");
  CHECK(back.associations[0].lim.max_jobs == 4u);
  CHECK(back.qos_list[0].priority == 100u);
  CHECK(back.default_account.at("alice") == "physics");
  CHECK_THROWS_WITH_AS(account_from_json(nlohmann::json::object()), "accounts: 'name' is missing", std::invalid_argument);
  CHECK_THROWS_AS(user_from_json(nlohmann::json{{"user", "a"}, {"account", "b"}, {"shares", -1}}), std::invalid_argument);
  CHECK_THROWS_AS(qos_from_json(nlohmann::json{{"name", "q"}, {"limits", {{"max_jobs", "many"}}}}), std::invalid_argument);
}
