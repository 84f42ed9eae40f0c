// array_spec: array index expressions, their compact listing, and the
// pending indices an array's compact record holds (task_ranges).
#include <doctest/doctest.h>

#include "core/array_spec.hpp"

using namespace aqs::core;

TEST_CASE("array tasks are listed in index order, each once, whatever order they come in") {
  CHECK(format_array_tasks({0, 2, 3, 4, 5, 1}) == "0-5");
  CHECK(format_array_tasks({7, 1, 3, 2}) == "1-3,7");
  CHECK(format_array_tasks({4, 4, 5}) == "4-5");
  CHECK(format_array_tasks({}) == "");
}

TEST_CASE("a hundred thousand pending indices are one run and read back as parsed") {
  const auto spec = parse_array_spec("0-99999%10");
  auto r = task_ranges::of(spec.tasks);
  CHECK(r.size() == 100'000);
  CHECK(r.to_string() == "0-99999");
  CHECK(r.contains(99'999));
  CHECK_FALSE(r.contains(100'000));
  CHECK(r.take_front(5) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(r.to_string() == "5-99999");
  CHECK(r.size() == 99'995);
  CHECK(task_ranges::of(parse_array_spec(r.to_string()).tasks) == r);
}

TEST_CASE("indices with steps and gaps keep their order through takes and erasures") {
  auto r = task_ranges::of(parse_array_spec("1,3,5-9:2,20-22").tasks);
  CHECK(r.size() == 8);
  CHECK(task_ranges::of(parse_array_spec(r.to_string()).tasks) == r);
  CHECK(r.erase(7));
  CHECK_FALSE(r.erase(7));
  CHECK_FALSE(r.erase(4));
  CHECK(r.size() == 7);
  CHECK(r.take_front(4) == std::vector<std::int64_t>{1, 3, 5, 9});
  CHECK(r.to_string() == "20-22");
  CHECK(r.erase(21));
  CHECK(r.to_string() == "20,22");
  CHECK(r.take_front(10) == std::vector<std::int64_t>{20, 22});
  CHECK(r.empty());
  CHECK(r.to_string() == "");
}
