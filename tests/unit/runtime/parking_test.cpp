// parking: a rank that a shrink dropped reaches the leader's pool and is
// called back, also from a host where the leader's host name resolves
// nowhere (namespace hosts, clusters without DNS for their nodes).
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "parking.hpp"

using namespace aqs::runtime;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Waits (up to 10 s) until `pool` holds `n` parked ranks.
bool collect(park_pool& pool, std::size_t n) {
  for (int i = 0; i < 1000 && pool.parked() < n; ++i) {
    pool.collect();
    if (pool.parked() < n) std::this_thread::sleep_for(10ms);
  }
  return pool.parked() == n;
}

// A parked rank by hand: connected to the pool on loopback `port`, its host
// said; -1 when it cannot connect.
int park_by_hand(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  const std::string hello = "host " + local_host_name() + "\n";
  (void)!::write(fd, hello.data(), hello.size());
  return fd;
}

}  // namespace

TEST_CASE("the pool's address names this host and a port, then this host's addresses") {
  park_pool pool;
  const auto w = words(pool.address());
  REQUIRE(w.size() >= 2);
  CHECK(w[0] == local_host_name());
  CHECK(std::stoi(w[1]) > 0);
  if (w.size() == 3) CHECK(w[2].find("127.") == std::string::npos);  // loopback is implied on the same host
  CHECK(pool.address() == pool.address());  // it listens once
}

TEST_CASE("a parked rank comes back with the port it is called back to") {
  park_pool pool;
  auto parked = std::async(std::launch::async, [a = pool.address()] { return wait_parked(a); });
  REQUIRE(collect(pool, 1));
  CHECK_FALSE(pool.call_back("some-other-host", "port-1"));  // none parked there
  CHECK(pool.call_back(local_host_name(), "port-1"));
  CHECK(parked.get() == std::optional<std::string>("port-1"));
  CHECK(pool.parked() == 0);
}

TEST_CASE("a rank parked on another host reaches the leader at one of its addresses when its name does not resolve") {
  park_pool pool;
  const auto w = words(pool.address());
  // As seen from another host: a name nothing resolves, a bad entry, then
  // an address that works.
  const std::string address = "leader-host-without-dns.invalid " + w[1] + " not-an-address,127.0.0.1";
  auto parked = std::async(std::launch::async, [address] { return wait_parked(address); });
  REQUIRE(collect(pool, 1));
  CHECK(pool.call_back(local_host_name(), "port-2"));
  CHECK(parked.get() == std::optional<std::string>("port-2"));
}

TEST_CASE("a called-back rank that answers slowly still counts: it is about to connect") {
  park_pool pool;
  const auto w = words(pool.address());
  // A parked rank by hand, slow to be scheduled once called back.
  auto slow = std::async(std::launch::async, [port = std::stoi(w[1])] {
    const int fd = park_by_hand(port);
    if (fd < 0) return std::string("no connect");
    std::string got;
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n') got += c;
    std::this_thread::sleep_for(2500ms);
    (void)!::write(fd, "ok\n", 3);
    ::close(fd);
    return got;
  });
  REQUIRE(collect(pool, 1));
  CHECK(pool.call_back(local_host_name(), "port-3"));
  CHECK(slow.get() == "join port-3");
}

TEST_CASE("a called-back rank that is gone is passed over at once") {
  park_pool other;
  const auto w = words(other.address());
  const int fd = park_by_hand(std::stoi(w[1]));
  REQUIRE(fd >= 0);
  ::close(fd);  // it dies before it is called back
  REQUIRE(collect(other, 1));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(other.call_back(local_host_name(), "port-4"));
  CHECK(std::chrono::steady_clock::now() - t0 < 30s);  // not the minute a live rank may take
}

TEST_CASE("parked ranks follow the leader when it moves, and finish when the job ends") {
  park_pool first, second;
  auto parked = std::async(std::launch::async, [a = first.address()] { return wait_parked(a); });
  REQUIRE(collect(first, 1));
  first.move_all(second.address());
  REQUIRE(collect(second, 1));
  second.close();
  CHECK(parked.get() == std::nullopt);
}
