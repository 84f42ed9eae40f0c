// Unit tests of the latency fields: register's probe port, heartbeat's
// samples, its ok's peers, and the listed node's round trips.
#include <doctest/doctest.h>

#include <string>

#include "protocol/errors.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"
#include "protocol/results.hpp"

using namespace aqs::protocol;
using nlohmann::json;

namespace {

std::string parse_failure(const std::string& text) {
  try {
    parse_message(std::string_view(text));
  } catch (const protocol_error& e) {
    CHECK(e.code() == error_code::bad_request);
    return e.what();
  }
  FAIL("no error for " << text);
  return "";
}

}  // namespace

TEST_CASE("an agent without a probe socket registers as before: probe_port is left out") {
  register_node r{1, "n1", 4, {0}, 0, 0, {}, ""};
  CHECK_FALSE(to_json(message{r}).contains("probe_port"));
  r.probe_port = 40123;
  CHECK(to_json(message{r})["probe_port"] == 40123);
  const auto back = parse_message(std::string_view(R"({"type":"register","id":1,"name":"n1","procs":4,"cpus":[0]})"));
  CHECK(std::get<register_node>(back).probe_port == 0);
  CHECK(parse_failure(R"({"type":"register","id":1,"name":"n1","procs":4,"cpus":[0],"probe_port":65536})")
            .find("'probe_port'") != std::string::npos);
}

TEST_CASE("a heartbeat's latency samples are optional, and bounded when present") {
  const auto plain = parse_message(std::string_view(R"({"type":"heartbeat","id":1,"running":[]})"));
  CHECK_FALSE(std::get<heartbeat>(plain).latency);
  CHECK_FALSE(to_json(plain).contains("latency"));
  const auto empty = parse_message(std::string_view(R"({"type":"heartbeat","id":1,"latency":[]})"));
  REQUIRE(std::get<heartbeat>(empty).latency);
  CHECK(std::get<heartbeat>(empty).latency->empty());  // a round that reached nobody
  using J = std::string;
  CHECK(parse_failure(R"({"type":"heartbeat","id":1,"latency":[{"node":"n2","rtt_us":-1}]})").find("'latency[0].rtt_us'") != J::npos);
  CHECK(parse_failure(R"({"type":"heartbeat","id":1,"latency":[{"node":"n2","rtt_us":60000001}]})").find("'latency[0].rtt_us'") != J::npos);
  CHECK(parse_failure(R"({"type":"heartbeat","id":1,"latency":[{"node":"n2","rtt_us":1.5}]})").find("'latency[0].rtt_us'") != J::npos);
  CHECK(parse_failure(R"({"type":"heartbeat","id":1,"latency":[{"rtt_us":5}]})").find("'latency[0].node'") != J::npos);
  CHECK(parse_failure(R"({"type":"heartbeat","id":1,"latency":[7]})").find("'latency[0]'") != J::npos);
  CHECK(parse_failure(R"({"type":"heartbeat","id":1,"latency":{"n2":5}})").find("'latency'") != J::npos);
  json many = {{"type", "heartbeat"}, {"id", 1}, {"latency", json::array()}};
  for (std::size_t i = 0; i <= k_max_latency_peers; ++i) many["latency"].push_back({{"node", "n"}, {"rtt_us", 1}});
  CHECK(parse_failure(many.dump()).find("more than 4096 entries") != J::npos);
}

TEST_CASE("a heartbeat's ok carries the peers to probe only when they changed") {
  CHECK_FALSE(read_reply<heartbeat_reply>(ok{3, json::object()}).peers);
  const heartbeat_reply r{std::vector<probe_peer>{{"n2", "10.0.0.3", 40000}, {"n3", "10.0.0.4", 1}}};
  const ok o = make_ok(3, r);
  CHECK(o.result["peers"][0] == json{{"name", "n2"}, {"address", "10.0.0.3"}, {"port", 40000}});
  CHECK(read_reply<heartbeat_reply>(o) == r);
  json bad = o.result;
  bad["peers"][1]["port"] = 0;
  CHECK_THROWS_WITH_AS(read_reply<heartbeat_reply>(ok{3, bad}), "field 'peers[1].port' must be in 1..65535",
                       protocol_error);
  bad = o.result;
  bad["peers"][0]["address"] = std::string(65, '1');
  CHECK_THROWS_AS(read_reply<heartbeat_reply>(ok{3, bad}), protocol_error);
}

TEST_CASE("a listed node's round trips are left out when none, and read back when some") {
  node_info n;
  n.name = "n1";
  CHECK_FALSE(to_json(n).contains("latency"));
  n.latency = {{"n2", 81}, {"n3", 20112}};
  const json j = to_json(n);
  CHECK(j["latency"] == json::parse(R"([{"node":"n2","rtt_us":81},{"node":"n3","rtt_us":20112}])"));
  CHECK(parse_node_info(j) == n);
  json bad = j;
  bad["latency"][1]["rtt_us"] = "fast";
  CHECK_THROWS_WITH_AS(parse_node_list(json{{"nodes", json::array({bad})}}),
                       "field 'nodes[0].latency[1].rtt_us' must be an integer in 0..60000000", protocol_error);
}
