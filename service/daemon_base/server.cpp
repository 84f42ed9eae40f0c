// server: accept loops, the handshake and the read/write loops of sessions,
// with Boost.Asio C++20 coroutines, one strand per connection.
#include "daemon_base/server.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <malloc.h>
#include <mutex>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unordered_map>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "protocol/auth.hpp"
#include "protocol/framing.hpp"
#include "protocol/replies.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using strand_t = asio::strand<asio::io_context::executor_type>;

class session_base;

struct server::state {
  asio::io_context& io;
  server_options options;
  dispatcher& handler;
  std::mutex mu;
  bool stopped = false;
  std::uint64_t next_serial = 1;
  std::unordered_map<std::uint64_t, std::weak_ptr<session_base>> sessions;
  // Connections held per quota key ("uid:N" for a local user, "ip:A" for a
  // TCP peer still in its handshake); trusted peers have no key.
  std::unordered_map<std::string, std::size_t> quota;
  std::size_t handshakes = 0;  // TCP connections not yet authenticated (keys "ip:...")
  std::size_t closed_since_trim = 0;
  std::unique_ptr<asio::local::stream_protocol::acceptor> unix_acceptor;
  std::unique_ptr<asio::ip::tcp::acceptor> tcp_acceptor;
  std::atomic<unsigned short> port{0};
  std::atomic<bool> socket_bound{false};  // the Unix socket file is ours to remove

  state(asio::io_context& i, server_options o, dispatcher& h) : io(i), options(std::move(o)), handler(h) {}
};

// What the server needs of a session of either transport.
class session_base : public connection {
public:
  virtual void stop_now() = 0;
};

namespace {

bool is_trusted(const server_options& o, uid_t uid) {
  return std::find(o.trusted_uids.begin(), o.trusted_uids.end(), uid) != o.trusted_uids.end();
}

template <class Protocol>
using socket_t = typename Protocol::socket::template rebind_executor<strand_t>::other;

// One connection. All members are touched on its strand only.
template <class Protocol>
class session final : public session_base, public std::enable_shared_from_this<session<Protocol>> {
public:
  session(socket_t<Protocol> sock, std::shared_ptr<server::state> st, std::uint64_t serial, transport via,
          std::string quota_key)
      : sock_(std::move(sock)),
        timer_(sock_.get_executor()),
        idle_timer_(sock_.get_executor()),
        hold_timer_(sock_.get_executor()),
        st_(std::move(st)),
        serial_(serial),
        quota_key_(std::move(quota_key)) {
    peer_.via = via;
  }

  void start() {
    asio::co_spawn(sock_.get_executor(), [self = this->shared_from_this()] { return self->run(); }, asio::detached);
  }

  // connection
  void send(protocol::message m) override {
    asio::post(sock_.get_executor(), [self = this->shared_from_this(), m = std::move(m)]() mutable {
      self->enqueue(std::move(m));
    });
  }
  void close() override {
    asio::post(sock_.get_executor(), [self = this->shared_from_this()] { self->close_after_writes(); });
  }
  const peer_info& peer() const noexcept override { return peer_; }
  std::uint64_t serial() const noexcept override { return serial_; }
  void stop_now() override {
    asio::post(sock_.get_executor(), [self = this->shared_from_this()] { self->shut(); });
  }
  void hold_reads(std::chrono::microseconds d) override {
    const auto until = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           (std::chrono::steady_clock::now() + d).time_since_epoch())
                           .count();
    std::int64_t cur = hold_until_ns_.load();
    while (cur < until && !hold_until_ns_.compare_exchange_weak(cur, until)) {
    }
  }
  void streaming() override {
    asio::post(sock_.get_executor(), [self = this->shared_from_this()] {
      self->streaming_ = true;
      self->idle_timer_.cancel();
    });
  }

private:
  // GCC 12 miscompiles some try/catch blocks inside coroutines (double
  // destruction), so no coroutine here has one: everything that may throw
  // runs in plain member functions that catch for themselves.
  awaitable<void> run() {
    identify_transport();
    std::string nonce;
    if (peer_.via == transport::tcp && !send_challenge(nonce)) {
      finish();
      co_return;
    }
    std::optional<protocol::message> m;
    arm_deadline(st_->options.handshake_timeout, "no hello in time");  // for the whole handshake
    const bool said_hello = co_await read_into(m, true);
    disarm_deadline();
    if (said_hello && handshake(*m, nonce) && open()) {
      // hello may have come with the start of the next frame
      if (decoder_.buffered() > 0) arm_deadline(st_->options.frame_timeout, "frame not completed in time");
      start_idle_watch();
      while (!closing_) {
        m.reset();
        if (!co_await read_into(m, false)) break;
        dispatch(std::move(*m));
        // The handler asked to slow this peer (a job publishing past its
        // rate): nothing more is read, or parsed, until the hold ends.
        if (const auto wait = hold_left(); wait.count() > 0 && !closing_) {
          hold_timer_.expires_after(wait);
          boost::system::error_code ec;
          co_await hold_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
        }
      }
    }
    if (!closing_) close_after_writes();
    // Let queued replies (e.g. the error that explains the close) go out,
    // but not wait forever on a peer that does not read them.
    const auto drain_until = std::chrono::steady_clock::now() + st_->options.frame_timeout;
    while (writing_ && sock_.is_open() && std::chrono::steady_clock::now() < drain_until) {
      timer_.expires_after(std::chrono::milliseconds(5));
      boost::system::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    finish();
  }

  bool send_challenge(std::string& nonce) {
    try {
      nonce = protocol::make_nonce();
    } catch (const std::exception&) {
      return false;  // no randomness, no authentication: refuse the peer
    }
    enqueue(protocol::challenge{nonce});
    return true;
  }

  // The handler accepts the peer (or refuses it) before hello is answered:
  // a refused peer never sees ok.
  bool open() {
    try {
      st_->handler.on_open(this->shared_from_this());
      opened_ = true;
      enqueue(protocol::make_ok(hello_id_, protocol::hello_reply{}));
      return true;
    } catch (const protocol::protocol_error& e) {
      enqueue(protocol::make_error(e));
    } catch (const std::exception& e) {
      enqueue(protocol::error{std::nullopt, protocol::error_code::internal, e.what()});
    }
    close_after_writes();
    return false;
  }

  void finish() {
    shut();
    if (opened_) {
      try {
        st_->handler.on_close(this->shared_from_this());
      } catch (...) {
      }
    }
    bool trim = false;
    {
      std::lock_guard lock(st_->mu);
      st_->sessions.erase(serial_);
      release_quota_locked();
      // A burst of connections (one user opening thousands) leaves freed
      // memory in malloc's arenas: give it back to the system.
      if (++st_->closed_since_trim >= 256 || st_->sessions.empty()) {
        trim = st_->closed_since_trim >= 16;
        st_->closed_since_trim = trim ? 0 : st_->closed_since_trim;
      }
    }
    if (trim) ::malloc_trim(0);
  }

  void release_quota_locked() {
    if (quota_key_.empty()) return;
    auto it = st_->quota.find(quota_key_);
    if (it != st_->quota.end() && --it->second == 0) st_->quota.erase(it);
    if (quota_key_.starts_with("ip:") && st_->handshakes > 0) --st_->handshakes;
    quota_key_.clear();
  }

  void identify_transport() {
    if constexpr (std::is_same_v<Protocol, asio::local::stream_protocol>) {
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(sock_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        peer_.uid = cred.uid;
        peer_.gid = cred.gid;
        peer_.pid = cred.pid;
        peer_.remote = "unix:pid=" + std::to_string(cred.pid);
      }
    } else {
      boost::system::error_code ec;
      auto ep = sock_.remote_endpoint(ec);
      if (!ec) {
        peer_.address = ep.address().to_string();
        peer_.remote = peer_.address + ":" + std::to_string(ep.port());
      }
    }
  }

  // Validates hello; on refusal queues the error and returns false.
  bool handshake(protocol::message& first, const std::string& nonce) {
    auto refuse = [&](protocol::error_code code, std::string msg, std::optional<std::int64_t> id) {
      enqueue(protocol::error{id, code, std::move(msg)});
      close_after_writes();
      return false;
    };
    auto* h = std::get_if<protocol::hello>(&first);
    if (h == nullptr) {
      return refuse(protocol::error_code::bad_request,
                    "the first message must be hello, not " + std::string(protocol::type_of(first)),
                    protocol::id_of(first));
    }
    if (h->protocol != protocol::k_protocol_version) {
      return refuse(protocol::error_code::unsupported_version,
                    "protocol version " + std::to_string(h->protocol) + " is not supported: this aqsd speaks " +
                        std::to_string(protocol::k_protocol_version),
                    h->id);
    }
    if (h->role == protocol::peer_role::job && !h->job_id) {
      return refuse(protocol::error_code::bad_request, "hello with role job needs job_id", h->id);
    }
    if (peer_.via == transport::tcp) {
      auto key = st_->handler.tcp_key(h->role, h->job_id);
      if (!key || !h->auth || !protocol::verify_auth(*key, nonce, *h->auth)) {
        return refuse(protocol::error_code::unauthorized, "authentication failed", h->id);
      }
      std::lock_guard lock(st_->mu);
      release_quota_locked();  // proven: no longer a stranger's handshake
    } else if (h->role == protocol::peer_role::node &&
               !(peer_.uid && is_trusted(st_->options, *peer_.uid))) {
      // A node agent is sent other users' jobs, environments and tokens:
      // locally only root (or aqsd's own user) may be one.
      return refuse(protocol::error_code::permission_denied,
                    "only root or the user running aqsd may register a node on the Unix socket "
                    "(a remote agent proves the cluster key over TCP)",
                    h->id);
    }
    peer_.role = h->role;
    peer_.job_id = h->job_id;
    peer_.launcher = h->launcher;
    peer_.map_epoch = h->map_epoch.value_or(0);
    hello_id_ = h->id;
    return true;
  }

  // A client connection with nothing outstanding and no stream is closed
  // after idle_timeout without a frame. Agents and jobs are long-lived and
  // quiet by design: never idle.
  void start_idle_watch() {
    if (peer_.role != protocol::peer_role::client || st_->options.idle_timeout.count() <= 0) return;
    last_activity_ = std::chrono::steady_clock::now();
    arm_idle(st_->options.idle_timeout);
  }

  void arm_idle(std::chrono::steady_clock::duration after) {
    if (streaming_ || closing_) return;
    idle_timer_.expires_after(after);
    idle_timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->idle_check();
    });
  }

  void idle_check() {
    if (streaming_ || closing_) return;
    const auto idle = st_->options.idle_timeout;
    const auto quiet = std::chrono::steady_clock::now() - last_activity_;
    if (outstanding_ > 0 || decoder_.buffered() > 0) return arm_idle(idle);  // waiting on us, or mid-frame
    if (quiet < idle) return arm_idle(idle - quiet);
    enqueue(protocol::error{std::nullopt, protocol::error_code::bad_request,
                            "idle for " + std::to_string(idle.count() / 1000) + " s with nothing outstanding: closed"});
    close_after_writes();
  }

  void dispatch(protocol::message m) {
    const auto id = protocol::id_of(m);
    if (id && peer_.role == protocol::peer_role::client) ++outstanding_;
    if (!protocol::may_send(peer_.role, m)) {
      enqueue(protocol::error{id, protocol::error_code::unauthorized,
                              "a " + std::string(protocol::to_string(peer_.role)) + " may not send " +
                                  std::string(protocol::type_of(m))});
      return;
    }
    try {
      st_->handler.on_message(this->shared_from_this(), std::move(m));
    } catch (const protocol::protocol_error& e) {
      auto err = protocol::make_error(e);
      if (!err.id) err.id = id;
      enqueue(std::move(err));
    } catch (const std::exception& e) {
      enqueue(protocol::error{id, protocol::error_code::internal, e.what()});
    }
  }

  // Reads until `out` holds the next complete, parsed message (true), or the
  // connection ended or became unusable (false; an error may be queued).
  awaitable<bool> read_into(std::optional<protocol::message>& out, bool handshake) {
    while (true) {
      const int taken = take_frame(out, handshake);
      if (taken != 0) co_return taken > 0;
      if (closing_) co_return false;
      boost::system::error_code ec;
      const std::size_t n = co_await sock_.async_read_some(asio::buffer(buf_), asio::redirect_error(use_awaitable, ec));
      if (ec) {
        if (timed_out_) {
          enqueue(protocol::error{std::nullopt, protocol::error_code::bad_request, timeout_reason_});
          close_after_writes();
        }
        co_return false;
      }
      last_activity_ = std::chrono::steady_clock::now();
      const bool completed = feed(n);
      if (closing_) co_return false;
      if (!handshake) {
        // A frame has until frame_timeout after its first byte, however the
        // bytes trickle in; between frames the connection may idle.
        if (decoder_.buffered() == 0) {
          disarm_deadline();
        } else if (!deadline_armed_ || completed) {
          arm_deadline(st_->options.frame_timeout, "frame not completed in time");
        }
      }
    }
  }

  // 1: `out` holds the next queued message; 0: none queued; -1: stop reading.
  int take_frame(std::optional<protocol::message>& out, bool handshake) {
    while (!frames_.empty()) {
      std::string body = std::move(frames_.front());
      frames_.pop_front();
      try {
        out = protocol::parse_message(std::string_view(body));
        return 1;
      } catch (const protocol::protocol_error& e) {
        // The frame was intact, so the stream is still in step: answer and
        // carry on, except during the handshake.
        enqueue(protocol::make_error(e));
        if (handshake) {
          close_after_writes();
          return -1;
        }
      }
    }
    return 0;
  }

  // Feeds the bytes read to the decoder; true if a frame was completed.
  bool feed(std::size_t n) {
    try {
      decoder_.feed(std::string_view(buf_.data(), n), scratch_);
    } catch (const protocol::protocol_error& e) {
      enqueue(protocol::make_error(e));  // framing lost: say why, then close
      close_after_writes();
      return false;
    }
    const bool completed = !scratch_.empty();
    for (auto& f : scratch_) frames_.push_back(std::move(f));
    scratch_.clear();
    return completed;
  }

  // One deadline at a time. The generation makes a handler that was already
  // queued when the deadline was disarmed or re-armed do nothing.
  void arm_deadline(std::chrono::milliseconds d, const char* reason) {
    const std::uint64_t gen = ++deadline_gen_;
    deadline_armed_ = true;
    timeout_reason_ = reason;
    timer_.expires_after(d);
    timer_.async_wait([self = this->shared_from_this(), gen](boost::system::error_code ec) {
      if (ec || gen != self->deadline_gen_) return;
      self->timed_out_ = true;
      boost::system::error_code ignored;
      self->sock_.cancel(ignored);
    });
  }

  void disarm_deadline() {
    ++deadline_gen_;
    deadline_armed_ = false;
    timer_.cancel();
  }

  void enqueue(const protocol::message& m) {
    if (!sock_.is_open()) return;
    if (outstanding_ > 0 && (std::holds_alternative<protocol::ok>(m) || std::holds_alternative<protocol::error>(m)) &&
        protocol::id_of(m)) {
      --outstanding_;
      last_activity_ = std::chrono::steady_clock::now();
    }
    std::string frame;
    try {
      frame = protocol::encode(m);
    } catch (const protocol::protocol_error& e) {
      frame = protocol::encode(protocol::error{protocol::id_of(m), protocol::error_code::internal,
                                               std::string("reply could not be encoded: ") + e.what()});
    }
    queued_bytes_ += frame.size();
    if (queued_bytes_ > st_->options.max_queued_bytes) {
      shut();  // a peer that does not read its replies does not get to grow our memory
      return;
    }
    out_.push_back(std::move(frame));
    if (!writing_) {
      writing_ = true;
      asio::co_spawn(sock_.get_executor(), [self = this->shared_from_this()] { return self->write_loop(); },
                     asio::detached);
    }
  }

  // Owns out_ while it runs: nothing else may pop or clear it, since the
  // buffer of the write in flight is out_.front().
  awaitable<void> write_loop() {
    while (!out_.empty() && sock_.is_open()) {
      boost::system::error_code ec;
      co_await asio::async_write(sock_, asio::buffer(out_.front()), asio::redirect_error(use_awaitable, ec));
      if (ec) break;
      queued_bytes_ -= out_.front().size();
      out_.pop_front();
    }
    writing_ = false;
    if (!sock_.is_open() || closing_) {
      out_.clear();
      queued_bytes_ = 0;
      shut();
    }
  }

  void close_after_writes() {
    closing_ = true;
    if (!writing_) shut();
  }

  std::chrono::nanoseconds hold_left() const {
    const std::chrono::nanoseconds until(hold_until_ns_.load());
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    return until > now ? std::chrono::duration_cast<std::chrono::nanoseconds>(until - now) : std::chrono::nanoseconds(0);
  }

  void shut() {
    closing_ = true;
    boost::system::error_code ec;
    timer_.cancel();
    idle_timer_.cancel();
    hold_timer_.cancel();
    if (sock_.is_open()) {
      sock_.shutdown(asio::socket_base::shutdown_both, ec);
      sock_.close(ec);  // a write in flight completes with an error
    }
    if (!writing_) {
      out_.clear();
      queued_bytes_ = 0;
    }
  }

  socket_t<Protocol> sock_;
  using timer_t =
      asio::basic_waitable_timer<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>, strand_t>;
  timer_t timer_;
  timer_t idle_timer_;
  timer_t hold_timer_;                          // hold_reads
  std::atomic<std::int64_t> hold_until_ns_{0};  // steady clock; reads wait until then
  std::shared_ptr<server::state> st_;
  std::uint64_t serial_;
  std::string quota_key_;  // what this connection counts against (guarded by st_->mu)
  peer_info peer_;
  protocol::frame_decoder decoder_;
  // Small: an idle connection should cost little (frames longer than this
  // arrive over several reads).
  std::array<char, 16 * 1024> buf_{};
  std::vector<std::string> scratch_;
  std::deque<std::string> frames_;
  std::deque<std::string> out_;
  std::size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closing_ = false;
  bool opened_ = false;
  bool timed_out_ = false;
  bool deadline_armed_ = false;
  bool streaming_ = false;
  std::size_t outstanding_ = 0;  // client requests not yet answered
  std::chrono::steady_clock::time_point last_activity_{};
  std::int64_t hello_id_ = 0;
  std::uint64_t deadline_gen_ = 0;
  const char* timeout_reason_ = "";
};

// Whom a new connection counts against: "" for trusted peers (root and
// aqsd's own user on the Unix socket), "uid:N" for other local users,
// "ip:A" for a TCP peer until it authenticates.
template <class Protocol, class Socket>
std::string quota_key(Socket& sock, const server::state& st) {
  if constexpr (std::is_same_v<Protocol, asio::local::stream_protocol>) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(sock.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return "uid:unknown";
    if (is_trusted(st.options, cred.uid)) return "";
    return "uid:" + std::to_string(cred.uid);
  } else {
    boost::system::error_code ec;
    auto ep = sock.remote_endpoint(ec);
    return ec ? std::string("ip:unknown") : "ip:" + ep.address().to_string();
  }
}

// Tells a peer over its limit why, in one frame, and closes. The socket's
// buffer is empty, so the short write does not block.
template <class Socket>
void refuse_at_once(Socket& sock, const std::string& why) {
  boost::system::error_code ec;
  try {
    const std::string frame = protocol::encode(protocol::error{std::nullopt, protocol::error_code::too_large, why});
    sock.non_blocking(true, ec);
    if (!ec) asio::write(sock, asio::buffer(frame), ec);
  } catch (const std::exception&) {
  }
  sock.shutdown(asio::socket_base::shutdown_both, ec);
  sock.close(ec);
}

template <class Protocol, class Acceptor>
awaitable<void> accept_loop(std::shared_ptr<server::state> st, Acceptor& acceptor, transport via) {
  asio::steady_timer backoff(st->io);
  while (true) {
    boost::system::error_code ec;
    auto sock = co_await acceptor.async_accept(asio::make_strand(st->io), asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // EMFILE and friends: the situation may clear; do not spin.
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    const std::string key = quota_key<Protocol>(sock, *st);
    std::shared_ptr<session<Protocol>> s;
    std::string refusal;
    {
      std::lock_guard lock(st->mu);
      if (st->stopped) {
        sock.close(ec);
        continue;
      }
      if (!key.empty()) {
        const bool per_key_full = st->quota[key] >= (via == transport::tcp ? st->options.max_handshakes_per_address
                                                                           : st->options.max_connections_per_user);
        if (st->quota[key] == 0) st->quota.erase(key);
        if (per_key_full) {
          refusal = "too many connections from " + key + " (limit " +
                    std::to_string(via == transport::tcp ? st->options.max_handshakes_per_address
                                                         : st->options.max_connections_per_user) +
                    "): close some and retry";
        } else if (via == transport::tcp && st->handshakes >= st->options.max_handshakes) {
          refusal = "aqsd has too many connections still authenticating (" +
                    std::to_string(st->options.max_handshakes) + "): retry later";
        } else if (st->sessions.size() >= st->options.max_connections) {
          refusal = "aqsd has too many connections (" + std::to_string(st->options.max_connections) + "): retry later";
        }
      }
      if (refusal.empty()) {
        s = std::make_shared<session<Protocol>>(std::move(sock), st, st->next_serial++, via, key);
        st->sessions.emplace(s->serial(), s);
        if (!key.empty()) ++st->quota[key];
        if (key.starts_with("ip:")) ++st->handshakes;
      }
    }
    if (!s) {
      refuse_at_once(sock, refusal);
      continue;
    }
    s->start();
  }
}

std::pair<std::string, std::string> split_host_port(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) {
    throw server_error("--listen expects HOST:PORT, got '" + text + "'");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, text.substr(colon + 1)};
}

}  // namespace

server::server(asio::io_context& io, server_options options, dispatcher& handler)
    : state_(std::make_shared<state>(io, std::move(options), handler)) {}

server::~server() { stop(); }

void server::start() {
  auto& st = *state_;
  if (st.options.unix_socket) {
    const auto path = *st.options.unix_socket;
    if (path.string().size() >= sizeof(sockaddr_un::sun_path)) {
      throw server_error("socket path too long (max " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                         " bytes): " + path.string());
    }
    if (std::filesystem::exists(std::filesystem::symlink_status(path))) {
      asio::local::stream_protocol::socket probe(st.io);
      boost::system::error_code ec;
      probe.connect(path.string(), ec);
      if (!ec) throw server_error("another aqsd is already listening on " + path.string());
      std::filesystem::remove(path);  // stale: left by a daemon that died
    }
    auto acc = std::make_unique<asio::local::stream_protocol::acceptor>(st.io);
    boost::system::error_code ec;
    acc->open(asio::local::stream_protocol(), ec);
    if (!ec) acc->bind(path.string(), ec);
    if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw server_error("cannot listen on " + path.string() + ": " + ec.message());
    ::chmod(path.c_str(), 0666);
    st.socket_bound = true;
    st.unix_acceptor = std::move(acc);
    asio::co_spawn(st.io, accept_loop<asio::local::stream_protocol>(state_, *st.unix_acceptor, transport::unix_socket),
                   asio::detached);
  }
  if (st.options.tcp_listen) {
    auto [host, port] = split_host_port(*st.options.tcp_listen);
    asio::ip::tcp::resolver resolver(st.io);
    boost::system::error_code ec;
    auto results = resolver.resolve(host, port, asio::ip::tcp::resolver::passive | asio::ip::tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      throw server_error("cannot resolve --listen " + *st.options.tcp_listen + ": " + ec.message());
    }
    auto acc = std::make_unique<asio::ip::tcp::acceptor>(st.io);
    const auto ep = results.begin()->endpoint();
    acc->open(ep.protocol(), ec);
    if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acc->bind(ep, ec);
    if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw server_error("cannot listen on " + *st.options.tcp_listen + ": " + ec.message());
    st.port = acc->local_endpoint().port();
    st.tcp_acceptor = std::move(acc);
    asio::co_spawn(st.io, accept_loop<asio::ip::tcp>(state_, *st.tcp_acceptor, transport::tcp), asio::detached);
  }
}

void server::stop() {
  auto& st = *state_;
  std::vector<std::shared_ptr<session_base>> live;
  {
    std::lock_guard lock(st.mu);
    if (st.stopped) return;
    st.stopped = true;
    for (auto& [serial, weak] : st.sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  // The socket file goes now, not on the io_context: whoever called stop()
  // may look for it (or start another aqsd there) before that runs. Only the
  // file this server bound: a failed start() must not remove another aqsd's.
  if (st.socket_bound.load()) {
    std::error_code fs_ec;
    std::filesystem::remove(*st.options.unix_socket, fs_ec);
  }
  // Acceptors belong to the io_context's threads: close them there.
  asio::post(st.io, [s = state_] {
    boost::system::error_code ec;
    if (s->unix_acceptor) s->unix_acceptor->close(ec);
    if (s->tcp_acceptor) s->tcp_acceptor->close(ec);
  });
  for (auto& s : live) s->stop_now();
}

unsigned short server::tcp_port() const noexcept { return state_->port; }

std::size_t server::connections() const noexcept {
  std::lock_guard lock(state_->mu);
  return state_->sessions.size();
}

}  // namespace aqs::daemon
