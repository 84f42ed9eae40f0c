// parking: a rank that a shrink dropped reaches the leader's pool and is
// called back, also from a host where the leader's host name resolves
// nowhere (namespace hosts, clusters without DNS for their nodes); a slow
// rank is neither dropped nor stranded (issue 15).
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <poll.h>
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
// said unless `say_host` is false; -1 when it cannot connect.
int park_by_hand(int port, bool say_host = true) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  if (say_host) {
    const std::string hello = "host " + local_host_name() + "\n";
    (void)!::write(fd, hello.data(), hello.size());
  }
  return fd;
}

// One line from `fd` (blocking), without its "\n"; what came before the end
// of the connection if it ends first.
std::string line_from(int fd) {
  std::string got;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') got += c;
  return got;
}
void say(int fd, const std::string& line) {
  const std::string text = line + "\n";
  (void)!::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
}

// A stand-in for a leader's pool: a listening socket on loopback, so that a
// test can play the leader's side of the protocol step by step.
struct fake_leader {
  int fd = -1;
  int port = 0;
  fake_leader() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 8) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~fake_leader() { ::close(fd); }
  std::string address() const { return local_host_name() + " " + std::to_string(port); }
  // The next connection, or -1 if none comes within 30 s (a rank that never
  // comes back fails the test instead of hanging it).
  int accept_one() const {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30'000) != 1) return -1;
    return ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
  }
};

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
    const std::string got = line_from(fd);
    std::this_thread::sleep_for(2500ms);
    say(fd, "ok");
    const std::string go = line_from(fd);
    ::close(fd);
    return got + ", " + go;
  });
  REQUIRE(collect(pool, 1));
  CHECK(pool.call_back(local_host_name(), "port-3"));
  CHECK(slow.get() == "join port-3, go");
}

TEST_CASE("a called-back rank connects only after the leader's go; if the leader gave up, it parks again") {
  // Issue 15: a leader that stops waiting for a rank's "ok" accepts on
  // nothing; a rank that then connected anyway would wait forever on a port
  // nobody accepts on. It must come back to the pool instead.
  fake_leader leader;
  auto parked = std::async(std::launch::async, [a = leader.address()] { return wait_parked(a); });
  // First call-back: the leader hears "ok" only after it gave up (closed).
  int c = leader.accept_one();
  REQUIRE(c >= 0);
  CHECK(line_from(c) == "host " + local_host_name());
  say(c, "join port-given-up");
  CHECK(line_from(c) == "ok");
  ::close(c);  // gave up: no "go"
  // The rank did not take that port: it parked again, at the same address.
  c = leader.accept_one();
  REQUIRE(c >= 0);
  CHECK(line_from(c) == "host " + local_host_name());
  CHECK(parked.wait_for(0s) == std::future_status::timeout);
  say(c, "join port-5");
  CHECK(line_from(c) == "ok");
  CHECK(parked.wait_for(0s) == std::future_status::timeout);  // not before "go"
  say(c, "go");
  CHECK(parked.get() == std::optional<std::string>("port-5"));
  ::close(c);
}

TEST_CASE("a rank slow to say its host is kept until it does, and collecting never waits for it") {
  // Issue 15: the pool used to wait up to 10 s for the host line and then
  // close the connection, which the rank took for the job's end.
  park_pool pool;
  const auto w = words(pool.address());
  const int fd = park_by_hand(std::stoi(w[1]), false);  // connected, silent
  REQUIRE(fd >= 0);
  pool.collect();  // it is in the accept queue: taken, but not parked yet
  CHECK(pool.parked() == 0);
  say(fd, "host " + local_host_name());
  REQUIRE(collect(pool, 1));
  auto back = std::async(std::launch::async, [fd] {
    const std::string got = line_from(fd);
    say(fd, "ok");
    return got + ", " + line_from(fd);
  });
  CHECK(pool.call_back(local_host_name(), "port-6"));
  CHECK(back.get() == "join port-6, go");
  ::close(fd);
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
