// parking: the leader's pool of parked ranks, one blocked connection each.
#include "parking.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace aqs::runtime {

namespace {

constexpr std::size_t k_max_line = 4096;

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

int connect_to(const std::string& address) noexcept {
  const auto space = address.find(' ');
  if (space == std::string::npos) return -1;
  std::string host = address.substr(0, space);
  const std::string port = address.substr(space + 1);
  if (host == local_host_name()) host = "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  return fd;
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
  return address_;
}

void park_pool::collect() noexcept {
  if (fd_ < 0) return;
  for (;;) {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: nobody else is waiting
    }
    auto line = read_line(c, 1000);
    if (!line || line->rfind("host ", 0) != 0) {
      ::close(c);
      continue;
    }
    parked_.push_back({c, line->substr(5)});
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
    const bool ok = send_line(fd, "join " + port) && read_line(fd, 2000) == std::optional<std::string>("ok");
    ::close(fd);
    if (ok) return true;
  }
  return false;
}

void park_pool::move_all(const std::string& address) noexcept {
  collect();
  for (const auto& e : parked_) {
    send_line(e.fd, "move " + address);
    ::close(e.fd);
  }
  parked_.clear();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void park_pool::close() noexcept {
  for (const auto& e : parked_) ::close(e.fd);
  parked_.clear();
  if (fd_ >= 0) ::close(fd_);  // ranks still in the accept queue are reset
  fd_ = -1;
}

std::optional<std::string> wait_parked(std::string address) noexcept {
  for (;;) {
    const int fd = connect_to(address);
    if (fd < 0) return std::nullopt;
    if (!send_line(fd, "host " + local_host_name())) {
      ::close(fd);
      return std::nullopt;
    }
    auto line = read_line(fd, -1);
    if (line && line->rfind("join ", 0) == 0) {
      const bool ok = send_line(fd, "ok");
      ::close(fd);
      if (!ok) return std::nullopt;
      return line->substr(5);
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
