// fnodes --latency end to end: three agents on namespace hosts of their own
// measure each other through their UDP probe sockets, aqsd gathers the
// numbers, fnodes shows them; a probe not signed with the cluster key gets
// no answer; with netem, a delay on one host shows in its pairs only.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e.hpp"
#include "protocol/probe_packet.hpp"

namespace {

constexpr int k_probe_port = 47123;  // every agent on a host (namespace) of its own

// fnodes --latency as rtt[from][to] in ms; "-" cells are left out.
using matrix = std::map<std::string, std::map<std::string, double>>;
matrix parse_matrix(const std::string& text) {
  matrix m;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> columns;
  bool header = true;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    if (header) {
      REQUIRE(w.front() == "FROM\\TO");
      columns.assign(w.begin() + 1, w.end());
      header = false;
      continue;
    }
    REQUIRE(w.size() == columns.size() + 1);
    for (std::size_t j = 0; j < columns.size(); ++j) {
      if (w[j + 1] != "-") m[w[0]][columns[j]] = std::stod(w[j + 1]);
    }
  }
  return m;
}

bool all_pairs(const matrix& m, int n) {
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const auto row = m.find("node" + std::to_string(i));
      if (row == m.end() || row->second.count("node" + std::to_string(j)) == 0) return false;
    }
  }
  return true;
}

// Polls fnodes --latency until `done` holds for its matrix (or the limit).
matrix wait_matrix(test::cluster& c, const std::function<bool(const matrix&)>& done, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  matrix m;
  std::string last;
  while (std::chrono::steady_clock::now() < until) {
    const auto r = c.cmd(bin().fnodes, {"--latency"});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    last = r.out;
    m = parse_matrix(r.out);
    if (done(m)) {
      MESSAGE("fnodes --latency:\n" << r.out);  // for the reader of the log: what it looks like
      return m;
    }
    std::this_thread::sleep_for(500ms);
  }
  MESSAGE("last fnodes --latency:\n" << last);
  return m;
}

// Sends `datagram` from this (the root) namespace to ip:port; the answer,
// if one comes within `wait`.
std::optional<std::vector<unsigned char>> ask_udp(const std::string& ip, int port,
                                                  std::span<const unsigned char> datagram,
                                                  std::chrono::milliseconds wait = 1500ms) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  REQUIRE(::inet_pton(AF_INET, ip.c_str(), &to.sin_addr) == 1);
  REQUIRE(::sendto(fd, datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) ==
          static_cast<ssize_t>(datagram.size()));
  pollfd p{fd, POLLIN, 0};
  std::optional<std::vector<unsigned char>> answer;
  if (::poll(&p, 1, static_cast<int>(wait.count())) == 1) {
    std::vector<unsigned char> buf(512);
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n >= 0) {
      buf.resize(static_cast<std::size_t>(n));
      answer = std::move(buf);
    }
  }
  ::close(fd);
  return answer;
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_CASE("fnodes --latency shows a round trip for every ordered pair of nodes, and only the key gets answers") {
  if (!test::netns_available()) return;
  test::test_database db;
  auto o = test::nodes_of(db, 3, 1);
  o.netns = true;
  o.agent_args = {"--probe-interval", "1", "--probe-port", std::to_string(k_probe_port)};
  test::cluster c(o);
  c.wait_nodes_up(3);

  const matrix m = wait_matrix(c, [](const matrix& x) { return all_pairs(x, 3); }, 60s);
  CHECK(all_pairs(m, 3));
  for (const auto& [from, row] : m) {
    CHECK(row.count(from) == 0);  // no node measures itself
    for (const auto& [to, ms] : row) {
      CAPTURE(from);
      CAPTURE(to);
      CHECK(ms >= 0.0);
    }
  }
  // --json carries the same numbers, in microseconds, per node.
  for (const auto& n : c.nodes()) {
    CAPTURE(n.name);
    CHECK(n.latency.size() == 2);
  }

  SUBCASE("a probe not signed with the cluster key gets no answer") {
    const std::string key = test::slurp(c.dir() / "state" / "cluster.key");
    const std::string trimmed = key.substr(0, key.find_last_not_of("\r\n ") + 1);
    const std::string ip = c.hosts()->ip(0);
    // Right key: answered (the test's socket does see answers) ...
    const auto valid = protocol::encode_probe(trimmed, protocol::make_probe_request(now_us()));
    const auto answer = ask_udp(ip, k_probe_port, valid);
    REQUIRE(answer);
    const auto reply = protocol::verify_probe(trimmed, *answer);
    REQUIRE(reply);
    CHECK(reply->kind == protocol::probe_kind::reply);
    // ... once: the same datagram again is a replay.
    CHECK_FALSE(ask_udp(ip, k_probe_port, valid));
    // Signed with another key, a forged MAC, garbage, a stale stamp: silence.
    CHECK_FALSE(ask_udp(ip, k_probe_port, protocol::encode_probe("not-the-key", protocol::make_probe_request(now_us()))));
    auto forged = protocol::encode_probe(trimmed, protocol::make_probe_request(now_us()));
    forged[40] ^= 0xff;
    CHECK_FALSE(ask_udp(ip, k_probe_port, forged));
    const std::vector<unsigned char> garbage(64, 0x41);
    CHECK_FALSE(ask_udp(ip, k_probe_port, garbage));
    const auto stale = protocol::encode_probe(trimmed, protocol::make_probe_request(now_us() - 600'000'000));
    CHECK_FALSE(ask_udp(ip, k_probe_port, stale));
    // The agent is still there and still answers.
    CHECK(ask_udp(ip, k_probe_port, protocol::encode_probe(trimmed, protocol::make_probe_request(now_us()))));
  }

  SUBCASE("a delay on one host's link shows in the pairs through it, not in the others") {
    // node1's host delays everything it sends by 20 ms: requests from it and
    // answers to others' requests alike.
    const auto tc = test::run(c.hosts()->on_host(1, {"tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "20ms"}));
    if (tc.status != 0) {
      MESSAGE("skipped the delay check: netem is not available here (tc: " << tc.err << ")");
      return;
    }
    // Polled until it holds (a round on a loaded machine may be slow once;
    // the least of 5 probes through node1 can never be under 20 ms).
    const auto slow_through_node1 = [](const matrix& x) {
      return all_pairs(x, 3) && x.at("node0").at("node1") >= 20.0 && x.at("node1").at("node0") >= 20.0 &&
             x.at("node1").at("node2") >= 20.0 && x.at("node2").at("node1") >= 20.0 &&
             x.at("node0").at("node2") < 20.0 && x.at("node2").at("node0") < 20.0;
    };
    CHECK(slow_through_node1(wait_matrix(c, slow_through_node1, 90s)));
  }
}
