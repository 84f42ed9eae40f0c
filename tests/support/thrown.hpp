// thrown: the message of the exception a unit test expects a call to throw.
// Test code only.
#pragma once

#include <string>
#include <utility>

#include <doctest/doctest.h>

namespace aqs::test {

// What the E that f() throws says; the test fails (and "" is returned) when
// f() throws nothing.
template <class E, class F>
std::string thrown(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("nothing thrown");
  return "";
}

}  // namespace aqs::test
