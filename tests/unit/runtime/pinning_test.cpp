// Unit tests of pinning a process to its rank's set of cpus (this test
// process itself, put back where it was at the end).
#include <doctest/doctest.h>

#include <sched.h>

#include <vector>

#include "pinning.hpp"

using namespace aqs::runtime;

namespace {
std::vector<int> affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}
}  // namespace

TEST_CASE("a rank is pinned to all its cpus, repeats counting once, and a bad set changes nothing") {
  const std::vector<int> before = affinity();
  REQUIRE_FALSE(before.empty());
  // Two cpus this process may run on (one when it has only one).
  std::vector<int> two(before.begin(), before.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(before.size())));
  std::vector<int> with_repeat = two;
  with_repeat.push_back(two.front());
  CHECK(pin_process_to(with_repeat));
  CHECK(affinity() == two);
  CHECK(pin_process_to({two.back()}));
  CHECK(affinity() == std::vector<int>{two.back()});
  // Refused: the set stays.
  CHECK_FALSE(pin_process_to({}));
  CHECK_FALSE(pin_process_to({two.front(), -1}));
  CHECK_FALSE(pin_process_to({CPU_SETSIZE}));
  CHECK(affinity() == std::vector<int>{two.back()});
  CHECK(pin_process_to(before));
  CHECK(affinity() == before);
}
