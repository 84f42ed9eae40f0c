// parking: a listening socket per leader, one blocked connection per parked
// rank.
#include "parking.hpp"

#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace aqs::runtime {

std::string local_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string park_listener::address() {
  if (fd_ >= 0) return address_;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

void park_listener::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void wait_parked(const std::string& address) noexcept {
  const auto space = address.find(' ');
  if (space == std::string::npos) return;
  std::string host = address.substr(0, space);
  const std::string port = address.substr(space + 1);
  if (host == local_host_name()) host = "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return;
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) return;
  char c;
  while (::read(fd, &c, 1) < 0 && errno == EINTR) {
  }
  ::close(fd);
}

}  // namespace aqs::runtime
