// control_channel against a scripted aqsd on a Unix socket: what the leader
// rank's connection makes of the bytes aqsd sends.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "control_channel.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"
#include "temp_dir.hpp"

using namespace aqs;
using namespace std::chrono_literals;

namespace {

// A listening Unix socket at `path` (one connection at a time).
int listen_at(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  return fd;
}

// A one-connection server: accepts, reads the hello, then sends `reply`
// (one or more frames) in a single write, and keeps the connection open
// until destroyed.
class scripted_aqsd {
public:
  scripted_aqsd(const std::string& path, std::string reply) : path_(path) {
    listen_fd_ = listen_at(path);
    server_ = std::thread([this, reply = std::move(reply)] {
      conn_ = ::accept(listen_fd_, nullptr, nullptr);
      if (conn_ < 0) return;
      protocol::frame_decoder dec;
      std::vector<std::string> frames;
      char buf[4096];
      while (frames.empty()) {
        const ssize_t n = ::recv(conn_, buf, sizeof buf, 0);
        if (n <= 0) return;
        dec.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
      }
      hello_ = frames.front();
      [[maybe_unused]] auto w = ::send(conn_, reply.data(), reply.size(), MSG_NOSIGNAL);
    });
  }
  ~scripted_aqsd() {
    if (server_.joinable()) server_.join();
    if (conn_ >= 0) ::close(conn_);
    ::close(listen_fd_);
  }
  std::string hello() {
    if (server_.joinable()) server_.join();
    return hello_;
  }

private:
  std::string path_;
  int listen_fd_ = -1;
  int conn_ = -1;
  std::string hello_;
  std::thread server_;
};

runtime::control_address at(const std::string& path) {
  runtime::control_address a;
  a.socket_path = path;
  a.job_id = 7;
  return a;
}

// A map of `procs`, every processor on host "h", cpus 0, 1, ...
std::string map_frame(std::int64_t epoch, const std::string& procs) {
  const auto n = static_cast<std::size_t>(std::count(procs.begin(), procs.end(), '1'));
  std::vector<std::int64_t> cpus(n);
  for (std::size_t i = 0; i < n; ++i) cpus[i] = static_cast<std::int64_t>(i);
  return protocol::encode(protocol::new_map{7, epoch, procs, std::vector<std::string>(n, "h"), cpus});
}

bool wait_epoch(const runtime::control_channel& c, std::int64_t epoch) {
  for (int i = 0; i < 500 && c.newest_epoch() != epoch; ++i) std::this_thread::sleep_for(10ms);
  return c.newest_epoch() == epoch;
}

}  // namespace

TEST_CASE("a map aqsd sends in the same write as its hello reply is not lost") {
  test::temp_dir dir;
  const std::string path = (dir.path() / "aqsd.sock").string();
  // A job that connects while its resize is already under way gets the map
  // right behind the handshake's ok, often in one segment.
  scripted_aqsd server(path, protocol::encode(protocol::ok{1, {}}) + map_frame(3, "11"));
  runtime::control_channel c(at(path));
  CHECK(server.hello().find("\"job\"") != std::string::npos);
  REQUIRE(wait_epoch(c, 3));
  auto u = c.newest_after(0);
  REQUIRE(u);
  CHECK(u->procs == "11");
  CHECK(u->cpus == std::vector<std::int64_t>{0, 1});
  CHECK(u->hosts == std::vector<std::string>{"h", "h"});
  CHECK_FALSE(c.newest_after(3));
}

TEST_CASE("of several maps in flight the newest one is kept") {
  test::temp_dir dir;
  const std::string path = (dir.path() / "aqsd.sock").string();
  scripted_aqsd server(path, protocol::encode(protocol::ok{1, {}}) + map_frame(2, "1") + map_frame(4, "1111") +
                                 map_frame(3, "11"));
  runtime::control_channel c(at(path));
  REQUIRE(wait_epoch(c, 4));
  CHECK(c.newest_after(0)->procs == "1111");
  CHECK(c.alive());
}

TEST_CASE("a refusal in the handshake is an error naming the address") {
  test::temp_dir dir;
  const std::string path = (dir.path() / "aqsd.sock").string();
  scripted_aqsd server(path,
                       protocol::encode(protocol::error{1, protocol::error_code::unauthorized, "not your job"}));
  try {
    runtime::control_channel c(at(path));
    FAIL("connected");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    CHECK(std::string(e.what()).find("not your job") != std::string::npos);
  }
}

TEST_CASE("nothing listening is an error naming the address") {
  test::temp_dir dir;
  const std::string path = (dir.path() / "none.sock").string();
  CHECK_THROWS_WITH_AS(runtime::control_channel(at(path)), doctest::Contains(path.c_str()), std::runtime_error);
}

namespace {

// After the handshake, reads what the job sends: the values of its publish
// frames; answers each publish with `answer` (its id filled in) if given.
class publish_sink {
public:
  publish_sink(const std::string& path, std::optional<nlohmann::json> answer) {
    listen_fd_ = listen_at(path);
    server_ = std::thread([this, answer = std::move(answer)] {
      conn_ = ::accept(listen_fd_, nullptr, nullptr);
      if (conn_ < 0) return;
      protocol::frame_decoder dec;
      std::vector<std::string> frames;
      char buf[65536];
      bool hello = false;
      for (;;) {
        const ssize_t n = ::recv(conn_, buf, sizeof buf, 0);
        if (n <= 0) return;
        frames.clear();
        dec.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
        for (const std::string& f : frames) {
          if (!hello) {
            hello = true;
            const std::string ok = protocol::encode(protocol::ok{1, {}});
            [[maybe_unused]] auto w = ::send(conn_, ok.data(), ok.size(), MSG_NOSIGNAL);
            continue;
          }
          const auto m = protocol::parse_message(nlohmann::json::parse(f));
          if (const auto* p = std::get_if<protocol::publish>(&m)) {
            values_ += p->values.size();
            if (answer) {
              const std::string ok = protocol::encode(protocol::ok{p->id, *answer});
              [[maybe_unused]] auto w = ::send(conn_, ok.data(), ok.size(), MSG_NOSIGNAL);
            }
          }
        }
      }
    });
  }
  ~publish_sink() {
    if (conn_ >= 0) ::shutdown(conn_, SHUT_RDWR);
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (server_.joinable()) server_.join();
    if (conn_ >= 0) ::close(conn_);
    ::close(listen_fd_);
  }
  std::size_t values() const { return values_.load(); }

private:
  int listen_fd_ = -1;
  int conn_ = -1;
  std::atomic<std::size_t> values_{0};
  std::thread server_;
};

}  // namespace

TEST_CASE("a program publishing in a tight loop sends no more than the job's rate allows: the rest is dropped at the source") {
  test::temp_dir dir;
  const std::string path = (dir.path() / "aqsd.sock").string();
  publish_sink sink(path, std::nullopt);
  runtime::control_channel c(at(path));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) REQUIRE(c.publish("flood", i));
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::this_thread::sleep_for(300ms);  // the reader thread sends what is due
  // aqsd's defaults until it says otherwise: a burst of 1,000, 200 a second.
  CHECK(sink.values() >= 1000);
  CHECK(static_cast<double>(sink.values()) <= 1000 + 200 * (elapsed + 0.3) + 1);
}

TEST_CASE("the shim keeps the rate aqsd answers with") {
  test::temp_dir dir;
  const std::string path = (dir.path() / "aqsd.sock").string();
  publish_sink sink(path, nlohmann::json{{"accepted", 1}, {"dropped", 0}, {"rate", 0}, {"burst", 1}});
  runtime::control_channel c(at(path));
  REQUIRE(c.publish("x", 1));  // the first batch goes at once; its answer says: no more
  for (int i = 0; i < 100 && sink.values() == 0; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(sink.values() == 1);
  std::this_thread::sleep_for(200ms);  // the answer is read
  for (int i = 0; i < 500; ++i) REQUIRE(c.publish("x", i));
  std::this_thread::sleep_for(300ms);
  CHECK(sink.values() <= 2);  // at most the one token left of its burst of 1
}
