// unique_fd: an owned file descriptor, so that no error path of the agent leaks one into the next job it forks.
#pragma once

#include <unistd.h>

#include <utility>

namespace aqs::node {

// Move-only; closes what it holds when destroyed or reset. -1 holds nothing.
class unique_fd {
public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // Hands the descriptor over (to Asio, or to a child that owns it now); the caller closes it.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    const int old = std::exchange(fd_, fd);
    if (old >= 0 && old != fd) ::close(old);
  }

private:
  int fd_ = -1;
};

}  // namespace aqs::node
