// parking: the leader's pool of parked ranks, one blocked connection each.
#include "parking.hpp"

#include "debug_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace aqs::runtime {

namespace {

constexpr std::size_t k_max_line = 4096;
// A parked rank says its host in one write right after it connects; once
// its first byte is there, the rest of the line follows at once.
constexpr int k_rest_of_line_ms = 1'000;
// A rank called back answers "ok" as soon as it is scheduled, which on a
// loaded machine can take seconds (seen: over 2 s, 16 ranks on 2 cores).
// Giving up is safe (the rank only connects after "go"; a late one parks
// again), but then the leader starts a process instead: wait generously.
constexpr int k_join_answer_ms = 60'000;

bool send_line(int fd, const std::string& line) noexcept {
  const std::string text = line + "\n";
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// One line (without "\n"), waiting at most `timeout_ms` for it (-1: forever).
// nullopt on end of file, error, timeout or an overlong line.
std::optional<std::string> read_line(int fd, int timeout_ms) noexcept {
  std::string line;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char c;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    if (line.size() == k_max_line) return std::nullopt;
    line += c;
  }
}

// A TCP connection to ip:port within `timeout_ms`, or -1: an address of the
// leader's that this host cannot route to must not hold the rank up.
int connect_within(const sockaddr_in& to, int timeout_ms) noexcept {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    pollfd p{fd, POLLOUT, 0};
    int err = errno == EINPROGRESS ? 0 : errno;
    if (err == 0) {
      int r = 0;
      while ((r = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof err;
      if (r <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = ETIMEDOUT;
    }
    if (err != 0) {
      ::close(fd);
      return -1;
    }
  }
  // Blocking again: the parked rank sleeps in read().
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// "HOST PORT IP,IP..." (park_pool::address): loopback on the leader's own
// host, else its addresses in turn, else HOST as the resolver knows it.
int connect_to(const std::string& address) noexcept {
  const auto space = address.find(' ');
  if (space == std::string::npos) return -1;
  const std::string host = address.substr(0, space);
  const auto space2 = address.find(' ', space + 1);
  const std::string port = address.substr(space + 1, space2 == std::string::npos ? std::string::npos : space2 - space - 1);
  std::vector<std::string> ips;
  if (host == local_host_name()) {
    ips.push_back("127.0.0.1");
  } else if (space2 != std::string::npos) {
    std::string list = address.substr(space2 + 1);
    for (std::size_t at = 0; at <= list.size();) {
      const auto comma = std::min(list.find(',', at), list.size());
      if (comma > at) ips.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  }
  char* end = nullptr;
  const unsigned long port_no = std::strtoul(port.c_str(), &end, 10);
  if (end == port.c_str() || *end != '\0' || port_no == 0 || port_no > 65535) return -1;
  for (const auto& ip : ips) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port_no));
    if (::inet_pton(AF_INET, ip.c_str(), &to.sin_addr) != 1) continue;
    const int fd = connect_within(to, 2000);
    if (fd >= 0) return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = connect_within(*reinterpret_cast<const sockaddr_in*>(a->ai_addr), 2000);
  }
  ::freeaddrinfo(res);
  return fd;
}

// This host's IPv4 addresses other than loopback, "a,b": where ranks parked
// on other hosts reach the leader even when its host name does not resolve
// there.
std::string local_addresses() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return {};
  std::string out;
  for (ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) != 0 ||
        (i->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    char buf[INET_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf) == nullptr) {
      continue;
    }
    if (!out.empty()) out += ',';
    out += buf;
  }
  ::freeifaddrs(all);
  return out;
}

}  // namespace

std::string local_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string park_pool::address() {
  if (fd_ >= 0) return address_;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw std::runtime_error(std::string("cannot create a socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("cannot listen for parked ranks: ") + std::strerror(err));
  }
  fd_ = fd;
  address_ = local_host_name() + " " + std::to_string(ntohs(a.sin_port));
  if (const std::string ips = local_addresses(); !ips.empty()) address_ += " " + ips;
  return address_;
}

void park_pool::collect() noexcept {
  // Everyone in the accept queue joins the unnamed; then each unnamed one
  // whose host line has arrived is parked. Nobody is waited for: a rank
  // that has connected but not yet written its line (descheduled on a
  // loaded machine) stays unnamed until a later call. Dropping it instead,
  // as a 10 s limit here did, closed its connection, and it took that for
  // the job's end and finalized: one parked rank fewer to call back.
  while (fd_ >= 0) {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // EAGAIN: nobody else is waiting
    }
    unnamed_.push_back(c);
  }
  for (std::size_t i = 0; i < unnamed_.size();) {
    const int c = unnamed_[i];
    pollfd p{c, POLLIN, 0};
    int r = 0;
    while ((r = ::poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    if (r == 0) {
      ++i;  // not said yet
      continue;
    }
    unnamed_.erase(unnamed_.begin() + static_cast<std::ptrdiff_t>(i));
    auto line = read_line(c, k_rest_of_line_ms);
    if (!line || line->rfind("host ", 0) != 0) {
      AQS_DEBUG_LOG("pool: a connection closed or said something else than its host; dropped");
      ::close(c);
      continue;
    }
    parked_.push_back({c, line->substr(5)});
    AQS_DEBUG_LOG("pool: rank parked on %s (%zu parked)", parked_.back().host.c_str(), parked_.size());
  }
}

bool park_pool::call_back(const std::string& host, const std::string& port) noexcept {
  for (std::size_t i = 0; i < parked_.size();) {
    if (parked_[i].host != host) {
      ++i;
      continue;
    }
    const int fd = parked_[i].fd;
    parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
    AQS_DEBUG_LOG("pool: calling back a rank on %s to %s", host.c_str(), port.c_str());
    // join, ok, go: only after "go" is the rank committed to connecting. A
    // rank that answers after we gave up reads the end of this connection
    // instead of "go" and parks again.
    const bool ok = send_line(fd, "join " + port) &&
                    read_line(fd, k_join_answer_ms) == std::optional<std::string>("ok") && send_line(fd, "go");
    ::close(fd);
    AQS_DEBUG_LOG("pool: the rank on %s %s", host.c_str(), ok ? "answered ok" : "did not answer; dropped");
    if (ok) return true;
  }
  return false;
}

void park_pool::move_all(const std::string& address) noexcept {
  collect();
  AQS_DEBUG_LOG("pool: moving %zu parked rank(s) to %s", parked_.size(), address.c_str());
  for (const auto& e : parked_) {
    send_line(e.fd, "move " + address);
    ::close(e.fd);
  }
  for (const int c : unnamed_) {  // it reads "move" once it has said its host
    send_line(c, "move " + address);
    ::close(c);
  }
  parked_.clear();
  unnamed_.clear();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void park_pool::close() noexcept {
  for (const auto& e : parked_) ::close(e.fd);
  for (const int c : unnamed_) ::close(c);
  parked_.clear();
  unnamed_.clear();
  if (fd_ >= 0) ::close(fd_);  // ranks still in the accept queue are reset
  fd_ = -1;
}

std::optional<std::string> wait_parked(std::string address) noexcept {
  for (;;) {
    const int fd = connect_to(address);
    if (fd < 0) {
      AQS_DEBUG_LOG("cannot reach the pool at %s", address.c_str());
      return std::nullopt;
    }
    if (!send_line(fd, "host " + local_host_name())) {
      ::close(fd);
      return std::nullopt;
    }
    AQS_DEBUG_LOG("parked at %s", address.c_str());
    auto line = read_line(fd, -1);
    AQS_DEBUG_LOG("parked rank got %s", line ? line->c_str() : "end of file");
    if (line && line->rfind("join ", 0) == 0) {
      // Connect only once the leader says "go": if it gave up waiting for
      // our "ok", nobody will accept on that port; park again instead.
      const auto go = send_line(fd, "ok") ? read_line(fd, -1) : std::nullopt;
      ::close(fd);
      if (go == std::optional<std::string>("go")) return line->substr(5);
      AQS_DEBUG_LOG("the leader gave up on this call-back; parking again");
      continue;
    }
    ::close(fd);
    if (line && line->rfind("move ", 0) == 0) {
      address = line->substr(5);
      continue;
    }
    return std::nullopt;
  }
}

}  // namespace aqs::runtime
