// control_channel: blocking sockets; a reader thread keeps the newest map.
#include "control_channel.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol/auth.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"

namespace aqs::runtime {

namespace {

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int connect_unix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long: " + path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("cannot create a socket: ") + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot reach aqsd at " + path + ": " + std::strerror(err));
  }
  return fd;
}

int connect_tcp(const std::string& server) {
  const auto colon = server.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == server.size()) {
    throw std::runtime_error("bad aqsd address '" + server + "' (want HOST:PORT)");
  }
  std::string host = server.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = server.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    throw std::runtime_error("cannot resolve aqsd address " + server + ": " + ::gai_strerror(rc));
  }
  int err = 0;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      return fd;
    }
    err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  throw std::runtime_error("cannot reach aqsd at " + server + ": " + std::strerror(err));
}

// Reads until one whole frame is in (handshake only: the reader thread does
// the rest). Throws on a closed connection.
std::string read_frame(int fd, protocol::frame_decoder& dec, std::vector<std::string>& pending) {
  while (pending.empty()) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("aqsd closed the connection during the handshake");
    dec.feed(std::string_view(buf, static_cast<std::size_t>(n)), pending);
  }
  std::string f = std::move(pending.front());
  pending.erase(pending.begin());
  return f;
}

}  // namespace

std::optional<control_address> control_address_from_env() {
  const char* job = std::getenv("AQS_JOB_ID");
  if (job == nullptr || *job == '\0') return std::nullopt;
  control_address a;
  char* end = nullptr;
  a.job_id = std::strtoll(job, &end, 10);
  if (end == job || *end != '\0' || a.job_id <= 0) return std::nullopt;
  if (const char* s = std::getenv("AQS_SERVER")) a.server = s;
  if (const char* s = std::getenv("AQS_SOCKET")) a.socket_path = s;
  if (const char* s = std::getenv("AQS_JOB_TOKEN")) a.token = s;
  if (a.server.empty() && a.socket_path.empty()) return std::nullopt;
  return a;
}

control_channel::control_channel(const control_address& where) : job_id_(where.job_id) {
  // The local socket when there is one: no secret needed, the uid speaks.
  const bool tcp = where.socket_path.empty();
  fd_ = tcp ? connect_tcp(where.server) : connect_unix(where.socket_path);
  const std::string shown = tcp ? where.server : where.socket_path;
  try {
    protocol::frame_decoder& dec = decoder_;
    std::vector<std::string> pending;
    protocol::hello h;
    h.id = next_id_++;
    h.role = protocol::peer_role::job;
    h.job_id = job_id_;
    if (tcp) {
      auto m = protocol::parse_message(read_frame(fd_, dec, pending));
      const auto* ch = std::get_if<protocol::challenge>(&m);
      if (ch == nullptr) throw std::runtime_error("aqsd at " + shown + " sent no challenge");
      if (where.token.empty()) throw std::runtime_error("no AQS_JOB_TOKEN to answer aqsd's challenge");
      h.auth = protocol::compute_auth(where.token, ch->nonce);
    }
    send_frame(protocol::encode(h));
    auto reply = protocol::parse_message(read_frame(fd_, dec, pending));
    if (const auto* e = std::get_if<protocol::error>(&reply)) {
      throw std::runtime_error("aqsd at " + shown + " refused job " + std::to_string(job_id_) + ": " + e->message);
    }
    // aqsd may send a map right behind its reply (a resize already under way
    // when the job connects): the reader thread takes those frames first.
    early_ = std::move(pending);
    if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  } catch (...) {
    ::close(fd_);
    if (wake_[0] >= 0) ::close(wake_[0]), ::close(wake_[1]);
    throw;
  }
  reader_ = std::thread([this] { read_loop(); });
}

control_channel::~control_channel() {
  if (reader_.joinable()) {
    const char c = 0;
    [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
    reader_.join();
  }
  ::close(fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::optional<map_update> control_channel::newest_after(std::int64_t applied) const {
  std::lock_guard lock(map_mu_);
  if (!newest_ || newest_->epoch <= applied) return std::nullopt;
  return newest_;
}

void control_channel::send_frame(const std::string& frame) {
  std::lock_guard lock(send_mu_);
  std::size_t off = 0;
  while (off < frame.size()) {
    const ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      alive_ = false;
      throw std::runtime_error(std::string("lost the connection to aqsd: ") + std::strerror(errno));
    }
    off += static_cast<std::size_t>(n);
  }
}

void control_channel::acknowledge(std::int64_t epoch, const std::string& procs, const ack_times& t) {
  protocol::resize_ack a;
  {
    std::lock_guard lock(send_mu_);
    a.id = next_id_++;
  }
  a.job_id = job_id_;
  a.epoch = epoch;
  a.procs = procs;
  a.received_at_us = t.received_at_us;
  a.wait_us = t.wait_us;
  a.spawn_us = t.spawn_us;
  a.data_us = t.data_us;
  a.total_us = t.total_us;
  send_frame(protocol::encode(a));
}

void control_channel::refuse(std::int64_t epoch, const std::string& reason) {
  protocol::resize_refused r;
  {
    std::lock_guard lock(send_mu_);
    r.id = next_id_++;
  }
  r.job_id = job_id_;
  r.epoch = epoch;
  r.reason = reason.substr(0, protocol::k_max_text);
  for (char& c : r.reason) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  send_frame(protocol::encode(r));
}

void control_channel::take(std::vector<std::string>& frames) {
  for (auto& f : frames) {
    auto m = protocol::parse_message(f);
    if (auto* nm = std::get_if<protocol::new_map>(&m)) {
      if (nm->job_id != job_id_) continue;
      map_update u;
      u.epoch = nm->epoch;
      u.procs = std::move(nm->procs);
      u.hosts = std::move(nm->proc_hosts);
      u.cpus = std::move(nm->proc_cpus);
      u.received_at_us = wall_clock_us();
      std::lock_guard lock(map_mu_);
      if (!newest_ || u.epoch > newest_->epoch) {
        newest_epoch_.store(u.epoch, std::memory_order_release);
        newest_ = std::move(u);
      }
    } else if (auto* e = std::get_if<protocol::error>(&m)) {
      std::fprintf(stderr, "aqs: aqsd: %s\n", e->message.c_str());
    }
  }
  frames.clear();
}

void control_channel::read_loop() {
  std::vector<std::string> frames = std::move(early_);
  char buf[65536];
  for (;;) {
    try {
      take(frames);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: unreadable message from aqsd: %s\n", ex.what());
      break;
    }
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents != 0) return;  // the destructor: alive_ stays as it was
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    try {
      decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: unreadable message from aqsd: %s\n", ex.what());
      break;
    }
  }
  alive_ = false;
}

}  // namespace aqs::runtime
