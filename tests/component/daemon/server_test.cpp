// Component tests of aqsd's network layer over real Unix and TCP sockets,
// with a fake dispatcher: handshake, hostile input, deadlines, role checks,
// server pushes, concurrency and limits.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "daemon_base/server.hpp"
#include "temp_dir.hpp"
#include "protocol/auth.hpp"
#include "protocol/framing.hpp"

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;

namespace {

const std::string k_key = "test-cluster-key";

// Answers a few requests in fixed ways and records what it saw.
struct fake_dispatcher : daemon::dispatcher {
  std::mutex mu;
  std::vector<std::shared_ptr<daemon::connection>> open;
  std::atomic<int> opened{0}, closed{0};
  std::optional<uid_t> last_uid;

  void on_open(const std::shared_ptr<daemon::connection>& c) override {
    std::lock_guard lock(mu);
    open.push_back(c);
    last_uid = c->peer().uid;
    ++opened;
  }
  void on_message(const std::shared_ptr<daemon::connection>& c, protocol::message m) override {
    const auto id = protocol::id_of(m).value_or(0);
    if (std::holds_alternative<protocol::list_nodes>(m)) {
      c->send(protocol::ok{id, {{"nodes", nlohmann::json::array()}}});
    } else if (auto* s = std::get_if<protocol::submit>(&m)) {
      c->send(protocol::ok{id, {{"job_id", s->job.min_pe * 100}}});
    } else if (std::holds_alternative<protocol::job_history>(m)) {
      throw protocol::protocol_error(protocol::error_code::not_found, "no job 5");
    } else if (std::holds_alternative<protocol::cancel>(m)) {
      throw std::runtime_error("boom");
    } else if (std::holds_alternative<protocol::heartbeat>(m)) {
      c->send(protocol::ok{id, {}});
    }
  }
  void on_close(const std::shared_ptr<daemon::connection>&) override { ++closed; }
  std::optional<std::string> tcp_key(protocol::peer_role, std::optional<std::int64_t>) override { return k_key; }
};

struct fixture {
  test::temp_dir tmp{"aqs-srv"};
  fs::path dir = tmp.path();
  asio::io_context io;
  fake_dispatcher disp;
  std::unique_ptr<daemon::server> srv;
  std::vector<std::thread> threads;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;

  explicit fixture(daemon::server_options o = {}) {
    o.unix_socket = dir / "aqsd.sock";
    o.tcp_listen = "127.0.0.1:0";
    o.cluster_key = k_key;
    srv = std::make_unique<daemon::server>(io, o, disp);
    srv->start();
    work.emplace(io.get_executor());
    for (int i = 0; i < 2; ++i) threads.emplace_back([this] { io.run(); });
  }
  ~fixture() {
    srv->stop();
    work.reset();
    for (auto& t : threads) t.join();
  }
};

// A blocking client speaking frames.
template <class Socket>
struct client {
  asio::io_context io;
  Socket sock{io};
  protocol::frame_decoder dec;
  std::deque<std::string> pending;

  void send_raw(std::string_view bytes) { asio::write(sock, asio::buffer(bytes.data(), bytes.size())); }
  void send(const protocol::message& m) { send_raw(protocol::encode(m)); }
  // Next message, or nullopt at EOF.
  std::optional<protocol::message> recv() {
    while (pending.empty()) {
      std::array<char, 4096> buf;
      boost::system::error_code ec;
      std::size_t n = sock.read_some(asio::buffer(buf), ec);
      if (ec) return std::nullopt;
      for (auto& f : dec.feed(std::string_view(buf.data(), n))) pending.push_back(std::move(f));
    }
    auto body = std::move(pending.front());
    pending.pop_front();
    return protocol::parse_message(std::string_view(body));
  }
  template <class T>
  T expect() {
    auto m = recv();
    REQUIRE(m.has_value());
    INFO("got " << protocol::encode_body(*m));
    REQUIRE(std::holds_alternative<T>(*m));
    return std::get<T>(*m);
  }
  bool closed_by_server() { return !recv().has_value(); }
};

struct unix_client : client<asio::local::stream_protocol::socket> {
  explicit unix_client(const fixture& f, bool say_hello = true) {
    sock.connect(asio::local::stream_protocol::endpoint((f.dir / "aqsd.sock").string()));
    if (say_hello) {
      send(protocol::hello{1, protocol::k_protocol_version, protocol::peer_role::client, {}, {}, false});
      CHECK(expect<protocol::ok>().result["protocol"] == protocol::k_protocol_version);
    }
  }
};

struct tcp_client : client<asio::ip::tcp::socket> {
  explicit tcp_client(const fixture& f) {
    sock.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), f.srv->tcp_port()));
  }
};

protocol::job_spec spec(std::int64_t pe) {
  protocol::job_spec j;
  j.name = "t";
  j.argv = {"true"};
  j.workdir = "/tmp";
  j.min_pe = j.max_pe = pe;
  return j;
}

}  // namespace

TEST_CASE("a local client says hello, is identified by its uid, and gets answers") {
  fixture f;
  unix_client c(f);
  c.send(protocol::list_nodes{7});
  auto r = c.expect<protocol::ok>();
  CHECK(r.id == 7);
  CHECK(r.result["nodes"].is_array());
  CHECK(f.disp.last_uid == ::getuid());
  CHECK(f.disp.opened == 1);
}

TEST_CASE("a first message other than hello, or a wrong version, is refused and the connection closed") {
  fixture f;
  {
    unix_client c(f, false);
    c.send(protocol::list_nodes{3});
    auto e = c.expect<protocol::error>();
    CHECK(e.code == protocol::error_code::bad_request);
    CHECK(e.id == 3);
    CHECK(c.closed_by_server());
  }
  {
    unix_client c(f, false);
    c.send(protocol::hello{1, 99, protocol::peer_role::client, {}, {}, false});
    auto e = c.expect<protocol::error>();
    CHECK(e.code == protocol::error_code::unsupported_version);
    CHECK(e.message.find("99") != std::string::npos);
    CHECK(c.closed_by_server());
  }
  CHECK(f.disp.opened == 0);
}

TEST_CASE("garbage in an intact frame gets an error reply and the connection keeps working") {
  fixture f;
  unix_client c(f);
  c.send_raw(protocol::encode_frame("{not json"));
  CHECK(c.expect<protocol::error>().code == protocol::error_code::bad_request);
  c.send_raw(protocol::encode_frame(R"({"type":"launch_missiles","id":4})"));
  auto e = c.expect<protocol::error>();
  CHECK(e.code == protocol::error_code::unknown_type);
  CHECK(e.id == 4);
  c.send_raw(protocol::encode_frame(R"({"type":"submit","id":5,"job":{"name":"x","argv":["a"],"workdir":"/","min_pe":0,"max_pe":1}})"));
  CHECK(c.expect<protocol::error>().code == protocol::error_code::bad_request);
  c.send(protocol::list_nodes{6});
  CHECK(c.expect<protocol::ok>().id == 6);
}

TEST_CASE("an oversized frame is refused from its header alone and the connection closed") {
  fixture f;
  unix_client c(f);
  c.send_raw(std::string("\x7f\xff\xff\xff", 4));
  CHECK(c.expect<protocol::error>().code == protocol::error_code::too_large);
  CHECK(c.closed_by_server());
  unix_client other(f);  // the server still serves everyone else
  other.send(protocol::list_nodes{1});
  CHECK(other.expect<protocol::ok>().id == 1);
}

TEST_CASE("a peer that stalls in the handshake or inside a frame is cut off at the deadline") {
  daemon::server_options o;
  o.handshake_timeout = 300ms;
  o.frame_timeout = 300ms;
  fixture f(o);
  unix_client silent(f, false);
  CHECK(silent.expect<protocol::error>().message == "no hello in time");
  CHECK(silent.closed_by_server());

  unix_client c(f, false);
  c.send(protocol::hello{1, protocol::k_protocol_version, protocol::peer_role::client, {}, {}, false});
  (void)c.expect<protocol::ok>();
  c.send_raw(std::string("\x00\x00", 2));  // half a header, then nothing
  CHECK(c.expect<protocol::error>().message == "frame not completed in time");
  CHECK(c.closed_by_server());
}

TEST_CASE("the deadlines hold for the whole handshake and the whole frame, however slowly bytes trickle in") {
  daemon::server_options o;
  o.handshake_timeout = 300ms;
  o.frame_timeout = 300ms;
  fixture f(o);
  // Every byte arrives well within the deadline, the whole never does.
  auto trickle = [](auto& c, const std::string& bytes) {
    for (char ch : bytes) {
      boost::system::error_code ec;
      asio::write(c.sock, asio::buffer(&ch, 1), ec);
      if (ec) return;
      std::this_thread::sleep_for(50ms);
    }
  };
  {
    unix_client c(f, false);
    trickle(c, protocol::encode(protocol::hello{1, protocol::k_protocol_version, protocol::peer_role::client, {}, {}, false}));
    CHECK(c.expect<protocol::error>().message == "no hello in time");
  }
  {
    unix_client c(f, false);
    c.send(protocol::hello{1, protocol::k_protocol_version, protocol::peer_role::client, {}, {}, false});
    (void)c.expect<protocol::ok>();
    trickle(c, protocol::encode(protocol::list_nodes{2}));
    CHECK(c.expect<protocol::error>().message == "frame not completed in time");
  }
}

TEST_CASE("a connection may stay idle between frames for longer than any deadline") {
  daemon::server_options o;
  o.handshake_timeout = 2s;
  o.frame_timeout = 200ms;
  fixture f(o);
  unix_client c(f);
  c.send(protocol::list_nodes{1});
  CHECK(c.expect<protocol::ok>().id == 1);
  std::this_thread::sleep_for(700ms);
  c.send(protocol::list_nodes{2});
  CHECK(c.expect<protocol::ok>().id == 2);
}

TEST_CASE("a request the peer's role may not send is refused, and handler errors become replies") {
  fixture f;
  unix_client c(f);
  c.send(protocol::heartbeat{8, {}});
  auto e = c.expect<protocol::error>();
  CHECK(e.code == protocol::error_code::unauthorized);
  CHECK(e.id == 8);
  c.send(protocol::job_history{9, 5});
  e = c.expect<protocol::error>();
  CHECK(e.code == protocol::error_code::not_found);
  CHECK(e.id == 9);
  c.send(protocol::cancel{10, {1}, {}, {}, {}});
  e = c.expect<protocol::error>();
  CHECK(e.code == protocol::error_code::internal);
  CHECK(e.message == "boom");
  c.send(protocol::list_nodes{11});
  CHECK(c.expect<protocol::ok>().id == 11);
}

TEST_CASE("a TCP peer must prove the cluster key with the HMAC of the server's nonce") {
  fixture f;
  {
    tcp_client c(f);
    auto ch = c.expect<protocol::challenge>();
    c.send(protocol::hello{1, protocol::k_protocol_version, protocol::peer_role::node,
                           protocol::compute_auth(k_key, ch.nonce), {}, false});
    CHECK(c.expect<protocol::ok>().id == 1);
    c.send(protocol::heartbeat{2, {}});  // a node may send heartbeats
    CHECK(c.expect<protocol::ok>().id == 2);
  }
  {
    tcp_client c(f);
    auto ch = c.expect<protocol::challenge>();
    c.send(protocol::hello{1, protocol::k_protocol_version, protocol::peer_role::node,
                           protocol::compute_auth("wrong-key", ch.nonce), {}, false});
    CHECK(c.expect<protocol::error>().code == protocol::error_code::unauthorized);
    CHECK(c.closed_by_server());
  }
  {
    tcp_client c(f);
    (void)c.expect<protocol::challenge>();
    c.send(protocol::hello{1, protocol::k_protocol_version, protocol::peer_role::client, {}, {}, false});
    CHECK(c.expect<protocol::error>().code == protocol::error_code::unauthorized);
    CHECK(c.closed_by_server());
  }
}

TEST_CASE("the server can push messages to a connection from any thread") {
  fixture f;
  unix_client c(f);
  std::shared_ptr<daemon::connection> conn;
  {
    std::lock_guard lock(f.disp.mu);
    REQUIRE(f.disp.open.size() == 1);
    conn = f.disp.open.front();
  }
  std::thread pusher([conn] {
    for (int i = 1; i <= 3; ++i) conn->send(protocol::job_event{std::nullopt, i, core::job_state::running, {}, {}, "0011"});
  });
  pusher.join();
  for (int i = 1; i <= 3; ++i) CHECK(c.expect<protocol::job_event>().job_id == i);
  conn->close();
  CHECK(c.closed_by_server());
}

TEST_CASE("many concurrent clients each get their own answers") {
  fixture f;
  std::atomic<int> good{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 16; ++t) {
    ts.emplace_back([&, t] {
      unix_client c(f);
      for (int i = 1; i <= 50; ++i) {
        c.send(protocol::submit{i, spec(t + 1)});
        auto r = c.expect<protocol::ok>();
        if (r.id == i && r.result["job_id"] == (t + 1) * 100) ++good;
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(good == 16 * 50);
}

TEST_CASE("connections beyond the limit are closed at once") {
  daemon::server_options o;
  o.max_connections = 2;
  o.trusted_uids = {};  // this test runs as root: count it like anyone
  fixture f(o);
  unix_client a(f), b(f);
  unix_client c(f, false);
  CHECK(std::string(c.expect<protocol::error>().message).find("too many connections") != std::string::npos);
  CHECK(c.closed_by_server());
  a.send(protocol::list_nodes{1});
  CHECK(a.expect<protocol::ok>().id == 1);
}

TEST_CASE("one user's connections beyond their limit are refused with an error, trusted users are not limited") {
  daemon::server_options o;
  o.max_connections_per_user = 2;
  o.trusted_uids = {};
  {
    fixture f(o);
    unix_client a(f), b(f);
    unix_client c(f, false);
    auto e = c.expect<protocol::error>();
    CHECK(e.code == protocol::error_code::too_large);
    CHECK(std::string(e.message).find("too many connections") != std::string::npos);
    CHECK(c.closed_by_server());
  }
  o.trusted_uids = {::geteuid()};
  o.max_connections = 2;
  fixture f(o);
  unix_client a(f), b(f), c(f), d(f);  // over both limits: trusted gets in
  d.send(protocol::list_nodes{1});
  CHECK(d.expect<protocol::ok>().id == 1);
}

TEST_CASE("a client connection idle with nothing outstanding is closed with an error") {
  daemon::server_options o;
  o.idle_timeout = std::chrono::milliseconds(200);
  fixture f(o);
  unix_client idle(f);
  auto e = idle.expect<protocol::error>();
  CHECK(std::string(e.message).find("idle") != std::string::npos);
  CHECK(idle.closed_by_server());
}

TEST_CASE("a second server on a live socket is refused, a stale socket file is replaced") {
  fixture f;
  asio::io_context io2;
  fake_dispatcher d2;
  daemon::server_options o;
  o.unix_socket = f.dir / "aqsd.sock";
  daemon::server second(io2, o, d2);
  CHECK_THROWS_WITH_AS(second.start(), doctest::Contains("another aqsd is already listening"), daemon::server_error);

  // A socket file nobody listens on (a daemon killed with SIGKILL leaves one).
  const fs::path stale = f.dir / "stale.sock";
  {
    asio::local::stream_protocol::acceptor acc(io2, asio::local::stream_protocol::endpoint(stale.string()));
  }
  REQUIRE(fs::exists(stale));
  daemon::server_options o2;
  o2.unix_socket = stale;
  daemon::server third(io2, o2, d2);
  CHECK_NOTHROW(third.start());
  third.stop();
}

TEST_CASE("stopping the server closes every connection and removes the socket") {
  fixture f;
  unix_client a(f), b(f);
  f.srv->stop();
  CHECK(a.closed_by_server());
  CHECK(b.closed_by_server());
  for (int i = 0; i < 200 && f.srv->connections() > 0; ++i) std::this_thread::sleep_for(5ms);
  CHECK(f.srv->connections() == 0);
  CHECK_FALSE(fs::exists(f.dir / "aqsd.sock"));
  CHECK(f.disp.closed == 2);
}
