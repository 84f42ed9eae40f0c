// Unit tests of the declared speedup models: linear, Amdahl, tables, and their text form.
#include <doctest/doctest.h>

#include <stdexcept>

#include "core/speedup.hpp"

using aqs::core::speedup_model;

TEST_CASE("a job that declares no model scales linearly") {
  speedup_model m;
  CHECK(m.speedup(8) == 8);
  CHECK(m.rescale(100, 4, 8) == doctest::Approx(50));
  CHECK(m.to_string() == "linear");
}

TEST_CASE("amdahl's model: S(p) = 1 / ((1 - F) + F / p)") {
  auto m = speedup_model::parse("amdahl:0.95");
  CHECK(m.speedup(1) == doctest::Approx(1));
  CHECK(m.speedup(20) == doctest::Approx(1 / (0.05 + 0.95 / 20)));
  CHECK(m.rescale(100, 10, 20) == doctest::Approx(100 * m.speedup(10) / m.speedup(20)));
  CHECK(m.to_string() == "amdahl:0.95");
}

TEST_CASE("a table model interpolates between its points and is flat beyond the last") {
  auto m = speedup_model::parse("table:2=2,4=3,8=4");
  CHECK(m.speedup(1) == doctest::Approx(1));  // linear up to the first point
  CHECK(m.speedup(3) == doctest::Approx(2.5));
  CHECK(m.speedup(6) == doctest::Approx(3.5));
  CHECK(m.speedup(64) == doctest::Approx(4));
  CHECK(m.to_string() == "table:2=2,4=3,8=4");
}

TEST_CASE("a bad speedup model is a one-line error") {
  CHECK_THROWS_WITH_AS(speedup_model::parse("magic"), "unknown speedup model 'magic' (known: linear, amdahl:F, table:P=S,...)",
                       std::invalid_argument);
  CHECK_THROWS_AS(speedup_model::parse("amdahl:1.5"), std::invalid_argument);
  CHECK_THROWS_AS(speedup_model::parse("amdahl:x"), std::invalid_argument);
  CHECK_THROWS_AS(speedup_model::parse("table:4=2,2=1"), std::invalid_argument);
  CHECK_THROWS_AS(speedup_model::parse("table:"), std::invalid_argument);
  CHECK_THROWS_AS(speedup_model::parse("table:0=1"), std::invalid_argument);
}
