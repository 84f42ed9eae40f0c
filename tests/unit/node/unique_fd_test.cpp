// Unit tests of unique_fd: who owns a descriptor, and that it is closed exactly when its owner lets go.
#include <doctest/doctest.h>

#include <cerrno>
#include <fcntl.h>
#include <type_traits>
#include <unistd.h>
#include <utility>

#include "unique_fd.hpp"

using aqs::node::unique_fd;

namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

// A fresh descriptor (one end of a pipe; the other is closed at once).
int fresh_fd() {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ::close(p[1]);
  return p[0];
}

}  // namespace

static_assert(!std::is_copy_constructible_v<unique_fd> && !std::is_copy_assignable_v<unique_fd>);
static_assert(std::is_nothrow_move_constructible_v<unique_fd> && std::is_nothrow_move_assignable_v<unique_fd>);

TEST_CASE("a unique_fd closes its descriptor when it goes out of scope") {
  const int fd = fresh_fd();
  {
    const unique_fd owner(fd);
    CHECK(owner.get() == fd);
    CHECK(static_cast<bool>(owner));
    CHECK(is_open(fd));
  }
  CHECK_FALSE(is_open(fd));
}

TEST_CASE("an empty unique_fd holds -1 and closes nothing") {
  const unique_fd none;
  CHECK(none.get() == -1);
  CHECK_FALSE(static_cast<bool>(none));
  const unique_fd failed(-1);  // what a failed open() gives
  CHECK_FALSE(static_cast<bool>(failed));
}

TEST_CASE("moving a unique_fd hands the descriptor over and leaves the source empty") {
  const int fd = fresh_fd();
  unique_fd first(fd);
  unique_fd second(std::move(first));
  CHECK(first.get() == -1);
  CHECK(second.get() == fd);
  { const unique_fd gone = std::move(first); }  // destroying the moved-from one closes nothing
  CHECK(is_open(fd));

  const int other = fresh_fd();
  unique_fd third(other);
  third = std::move(second);  // the descriptor it held is closed, the new one kept
  CHECK_FALSE(is_open(other));
  CHECK(third.get() == fd);
  CHECK(is_open(fd));
}

TEST_CASE("release gives the descriptor up without closing it") {
  const int fd = fresh_fd();
  int released = -1;
  {
    unique_fd owner(fd);
    released = owner.release();
    CHECK(owner.get() == -1);
  }
  CHECK(released == fd);
  CHECK(is_open(fd));
  ::close(fd);
}

TEST_CASE("reset closes the descriptor held and takes the new one, and reset to the same one keeps it") {
  const int a = fresh_fd();
  const int b = fresh_fd();
  unique_fd owner(a);
  owner.reset(b);
  CHECK_FALSE(is_open(a));
  CHECK(owner.get() == b);
  owner.reset(b);
  CHECK(is_open(b));
  owner.reset();
  CHECK_FALSE(is_open(b));
  CHECK(owner.get() == -1);
}
