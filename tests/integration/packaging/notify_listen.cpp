// aqs-test-notify-listen SOCKET: plays systemd's side of the notification
// protocol for the packaging test. Binds a Unix datagram socket at SOCKET
// and prints each datagram as one line, "PID MESSAGE", the sender's pid
// from the kernel (SCM_CREDENTIALS) and the message's newlines as '|', until
// killed.
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: aqs-test-notify-listen SOCKET\n");
    return 2;
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || std::strlen(argv[1]) >= sizeof(addr.sun_path)) {
    std::fprintf(stderr, "aqs-test-notify-listen: cannot make a socket at %s\n", argv[1]);
    return 1;
  }
  std::strcpy(addr.sun_path, argv[1]);
  ::unlink(argv[1]);
  const int on = 1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    std::fprintf(stderr, "aqs-test-notify-listen: %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  for (;;) {
    char buf[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    iovec iov{buf, sizeof buf - 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd, &msg, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    long pid = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred{};
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        pid = cred.pid;
      }
    }
    std::string text(buf, static_cast<std::size_t>(n));
    for (char& ch : text) {
      if (ch == '\n') ch = '|';
    }
    std::printf("%ld %s\n", pid, text.c_str());
    std::fflush(stdout);
  }
}
