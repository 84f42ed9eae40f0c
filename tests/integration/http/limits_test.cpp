// limits: issue 28's floods of aqsd's HTTP front, replayed against a real
// aqsd --http from sockets that belong to unprivileged throwaway users:
// unauthenticated 15 MiB POSTs (the token is checked on the head; no body
// is read and aqsd's memory stays bounded) and one user's half-sent
// requests from 127.0.0.1 (another user still gets in).
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <mutex>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "e2e.hpp"
#include "raw_peer.hpp"
#include "temp_dir.hpp"

namespace {

constexpr const char* k_alice = "aqs-ports-a";
constexpr const char* k_mallory = "aqs-ports-m";

struct setup {
  test::test_database db;
  std::unique_ptr<test::cluster> c;
  test::test_user alice, mallory;
  int port = 0;

  explicit setup(std::vector<std::string> extra = {}) {
    auto o = test::nodes_of(db, 1, 4);
    o.aqsd_args = {"--http", "127.0.0.1:0"};
    for (auto& e : extra) o.aqsd_args.push_back(std::move(e));
    c = std::make_unique<test::cluster>(o);
    alice = c->user(k_alice);
    mallory = c->user(k_mallory);
    port = c->http_port();
    c->wait_nodes_up(1);
  }
  // ftoken as `u`: the token, on its last line.
  std::string token(const test::test_user& u) {
    const auto r = c->cmd(AQS_FTOKEN_BINARY, {}, &u);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    return test::last_line(r.out);
  }
  std::vector<int> connect_as(const test::test_user& u, int count) {
    return test::connect_tcp_as("127.0.0.1", port, u.uid, u.gid, count);
  }
};

// aqsd's resident memory and its peak so far, in bytes (/proc/PID/status).
struct rss {
  std::size_t now = 0, peak = 0;
};
rss rss_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  rss r;
  for (std::string line; std::getline(in, line);) {
    auto kb = [&] { return static_cast<std::size_t>(std::stoull(line.substr(line.find(':') + 1))) * 1024; };
    if (line.starts_with("VmRSS:")) r.now = kb();
    if (line.starts_with("VmHWM:")) r.peak = kb();
  }
  return r;
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// The status code of an HTTP answer read from `fd` (0: none within `limit`).
unsigned read_status(int fd, std::chrono::milliseconds limit) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (got.find("\r\n") == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return 0;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return 0;
    got.append(buf, static_cast<std::size_t>(n));
  }
  if (!got.starts_with("HTTP/1.1 ") || got.size() < 12) return 0;
  return static_cast<unsigned>(std::stoi(got.substr(9, 3)));
}

// One GET on a fresh connection of `u`'s, closed after the answer.
unsigned get_as(setup& s, const test::test_user& u, const std::string& token, const std::string& target) {
  const int fd = s.connect_as(u, 1).at(0);
  send_all(fd, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                   "\r\nConnection: close\r\n\r\n");
  const unsigned status = read_status(fd, 60s);
  ::close(fd);
  return status;
}

}  // namespace

TEST_CASE("128 unauthenticated 15 MiB POSTs are answered 401 on their heads, and aqsd's memory stays bounded") {
  setup s;
  const pid_t pid = s.c->aqsd_pid();
  const rss before = rss_of(pid);
  constexpr int k_posts = 128;
  constexpr std::size_t k_body = std::size_t{15} << 20;
  // Generous: aqsd before the flood plus 192 MiB (the flood itself once
  // added 1.9 GB; bodies read before the token check).
  const std::size_t bound = before.now + (std::size_t{192} << 20);
  const auto fds = s.connect_as(s.mallory, k_posts);
  std::atomic<std::size_t> peak{0};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      const std::size_t n = rss_of(pid).now;
      std::size_t p = peak.load();
      while (n > p && !peak.compare_exchange_weak(p, n)) {
      }
      std::this_thread::sleep_for(20ms);
    }
  });
  // Each connection sends its head and then its body as fast as aqsd takes
  // it, watching for an answer between chunks (as curl does): what it had
  // sent when the answer came is what aqsd could have read.
  std::vector<unsigned> status(k_posts, 0);
  std::vector<std::size_t> sent_before_answer(k_posts, 0);
  std::vector<std::thread> posters;
  for (int i = 0; i < k_posts; ++i) {
    posters.emplace_back([&, i] {
      const int fd = fds[static_cast<std::size_t>(i)];
      send_all(fd, "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: " + std::to_string(k_body) + "\r\n\r\n");
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      const std::string chunk(64 << 10, 'x');
      std::size_t sent = 0;
      const auto give_up = std::chrono::steady_clock::now() + 300s;
      while (std::chrono::steady_clock::now() < give_up) {
        pollfd p{fd, static_cast<short>(POLLIN | (sent < k_body ? POLLOUT : 0)), 0};
        if (::poll(&p, 1, 1000) <= 0) continue;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
          ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
          sent_before_answer[static_cast<std::size_t>(i)] = sent;
          status[static_cast<std::size_t>(i)] = read_status(fd, 30s);
          break;
        }
        const ssize_t n = ::send(fd, chunk.data(), std::min(chunk.size(), k_body - sent), MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<std::size_t>(n);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
          sent_before_answer[static_cast<std::size_t>(i)] = sent;
          status[static_cast<std::size_t>(i)] = read_status(fd, 1s);
          break;
        }
      }
      ::close(fd);
    });
  }
  for (auto& t : posters) t.join();
  done = true;
  sampler.join();
  const rss after = rss_of(pid);
  const std::size_t highest = std::max(peak.load(), after.now);
  MESSAGE("aqsd RSS before " << before.now / 1024 / 1024 << " MiB, highest seen during the flood "
                             << highest / 1024 / 1024 << " MiB (bound " << bound / 1024 / 1024 << " MiB)");
  int unauthorized = 0, answered_early = 0;
  for (int i = 0; i < k_posts; ++i) {
    unauthorized += status[static_cast<std::size_t>(i)] == 401 ? 1 : 0;
    answered_early += sent_before_answer[static_cast<std::size_t>(i)] < k_body ? 1 : 0;
  }
  CHECK(unauthorized == k_posts);
  CHECK_MESSAGE(answered_early == k_posts, "answers that came only after the whole body was sent: "
                                               << k_posts - answered_early);
  CHECK(highest < bound);
  // aqsd serves on.
  CHECK(get_as(s, s.alice, s.token(s.alice), "/api/v1/jobs") == 200);
}

TEST_CASE("one user's 256 half-sent requests from 127.0.0.1 do not keep another user's GET /api/v1/jobs out") {
  // With the defaults, and with aqs.conf making the per-address pool of
  // anonymous connections far smaller than the flood (its oldest are then
  // closed to make room, over and over, as mallory reopens them).
  test::temp_dir conf_dir("aqs-ports-conf", 0755);
  const auto conf = conf_dir.path() / "aqs.conf";
  {
    std::ofstream out(conf);
    out << "# the listening ports' limits beside the partitions\nHttpMaxConnectionsPerAddress=32\n"
           "httpheadtimeout=2   # keys are case-insensitive\n";
  }
  std::unique_ptr<setup> made;
  SUBCASE("default limits") { made = std::make_unique<setup>(); }
  SUBCASE("HttpMaxConnectionsPerAddress=32 in aqs.conf") {
    made = std::make_unique<setup>(std::vector<std::string>{"--config", conf.string()});
  }
  setup& s = *made;
  const std::string alice = s.token(s.alice);
  const std::string mallory = s.token(s.mallory);
  constexpr int k_flood = 256;
  // Half a request: every even one stops inside its head (no token seen),
  // every odd one has a complete head with mallory's own token and stops
  // inside its body. Reopened as soon as aqsd drops it.
  auto begin = [&](int i, int fd) {
    if (i % 2 == 0) {
      send_all(fd, "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le");
    } else {
      send_all(fd, "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + mallory +
                       "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":");
    }
  };
  std::vector<int> held = s.connect_as(s.mallory, k_flood);
  for (int i = 0; i < k_flood; ++i) begin(i, held[static_cast<std::size_t>(i)]);
  std::atomic<bool> done{false};
  std::atomic<int> reopened{0};
  std::thread flooder([&] {
    while (!done) {
      std::vector<int> gone;
      for (int i = 0; i < k_flood; ++i) {
        pollfd p{held[static_cast<std::size_t>(i)], POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) gone.push_back(i);  // an answer or EOF: aqsd dropped it
      }
      if (!gone.empty()) {
        std::vector<int> fresh;
        try {
          fresh = s.connect_as(s.mallory, static_cast<int>(gone.size()));
        } catch (const std::exception&) {
          std::this_thread::sleep_for(50ms);
          continue;
        }
        for (std::size_t k = 0; k < gone.size(); ++k) {
          ::close(held[static_cast<std::size_t>(gone[k])]);
          held[static_cast<std::size_t>(gone[k])] = fresh[k];
          begin(gone[k], fresh[k]);
        }
        reopened += static_cast<int>(gone.size());
      }
      std::this_thread::sleep_for(20ms);
    }
  });
  std::this_thread::sleep_for(1s);  // the flood in place
  // For longer than the head deadline, alice asks again and again.
  int asked = 0;
  std::map<unsigned, int> answers;
  const auto until = std::chrono::steady_clock::now() + 12s;
  while (std::chrono::steady_clock::now() < until) {
    ++answers[get_as(s, s.alice, alice, "/api/v1/jobs")];
    ++asked;
    std::this_thread::sleep_for(200ms);
  }
  done = true;
  flooder.join();
  for (int fd : held) ::close(fd);
  std::string seen;
  for (const auto& [status, n] : answers) seen += std::to_string(status) + "x" + std::to_string(n) + " ";
  MESSAGE("alice's answers during the flood: " << seen << "(mallory's connections reopened: " << reopened.load() << ")");
  CHECK(answers[200] == asked);
}

TEST_CASE("bodies are judged on the head: 413 past the route's limit, 503 past the user's bodies in flight, never read") {
  setup s({"--http-max-body-bytes-per-user", "1M"});
  const std::string alice = s.token(s.alice);
  auto head = [&](const std::string& method, const std::string& target, std::size_t length) {
    return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + alice +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n";
  };
  // A PATCH takes 64 KiB at most: 100 KiB is refused on its head.
  int fd = s.connect_as(s.alice, 1).at(0);
  send_all(fd, head("PATCH", "/api/v1/jobs/1", 100 << 10));
  CHECK(read_status(fd, 30s) == 413);
  ::close(fd);
  // A submission may be larger, but alice's bodies in flight are capped at
  // 1 MiB: while 900 KiB of hers are being sent, another 900 KiB is 503.
  const int first = s.connect_as(s.alice, 1).at(0);
  send_all(first, head("POST", "/api/v1/jobs", 900 << 10) + "{\"name\":");
  std::this_thread::sleep_for(500ms);  // its head read and its body reserved
  fd = s.connect_as(s.alice, 1).at(0);
  send_all(fd, head("POST", "/api/v1/jobs", 900 << 10));
  CHECK(read_status(fd, 30s) == 503);
  ::close(fd);
  // Another user is not held back by alice's bodies.
  const std::string mallory = s.token(s.mallory);
  fd = s.connect_as(s.mallory, 1).at(0);
  send_all(fd, "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + mallory +
                   "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  CHECK(read_status(fd, 30s) == 400);  // read and judged: an empty job
  ::close(fd);
  // Once alice's first body is given up, she has her room again.
  ::close(first);
  bool back = false;
  for (int i = 0; i < 50 && !back; ++i) {
    fd = s.connect_as(s.alice, 1).at(0);
    send_all(fd, head("POST", "/api/v1/jobs", 2) + "{}");
    back = read_status(fd, 30s) == 400;
    ::close(fd);
    if (!back) std::this_thread::sleep_for(100ms);
  }
  CHECK(back);
}

TEST_CASE("a port limit in aqs.conf or a flag that is not a number stops aqsd with the file and line") {
  test::temp_dir dir("aqs-ports-bad", 0755);
  const auto conf = dir.path() / "aqs.conf";
  {
    std::ofstream out(conf);
    out << "PartitionName=main Nodes=ALL\nHttpHeadTimeout=soon\n";
  }
  auto r = test::run({test::bin().aqsd, "--state-dir", (dir.path() / "state").string(), "--foreground", "--config",
                      conf.string()});
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.err.find(conf.string() + ":2: HttpHeadTimeout takes seconds") != std::string::npos, r.err);
  r = test::run({test::bin().aqsd, "--state-dir", (dir.path() / "state").string(), "--foreground",
                 "--http-max-body", "lots"});
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.err.find("--http-max-body") != std::string::npos, r.err);
}
