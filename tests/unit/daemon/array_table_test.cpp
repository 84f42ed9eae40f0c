// The array table alone: a throttled array's tasks admitted up to its
// throttle, the rest waiting in index order for a place, cancels of waiting
// and admitted tasks, and the compact records of unsplit tasks.
#include <doctest/doctest.h>

#include "daemon/array_table.hpp"

using namespace aqs;

TEST_CASE("array_table: a throttle admits K tasks; an ended one lets the lowest waiting task in") {
  daemon::array_table t;
  // --array=0-4%2, tasks are jobs 10..14 of array 10.
  CHECK(t.arrive(10, 10, 2));
  CHECK(t.arrive(10, 11, 2));
  CHECK_FALSE(t.arrive(10, 14, 2));  // out of order on purpose: waiting is by id
  CHECK_FALSE(t.arrive(10, 12, 2));
  CHECK_FALSE(t.arrive(10, 13, 2));
  CHECK(t.waiting_count() == 3);
  CHECK(t.is_waiting(12));
  CHECK_FALSE(t.is_waiting(10));
  CHECK(t.live_tasks(10) == 5);
  CHECK(t.tasks_of(10) == std::vector<std::int64_t>{10, 11, 12, 13, 14});
  CHECK(t.array_of(13) == 10);

  CHECK(t.ended(10) == 12);  // index order, not arrival order
  CHECK_FALSE(t.is_waiting(12));
  CHECK(t.ended(12) == 13);
  CHECK(t.ended(11) == 14);
  CHECK(t.waiting_count() == 0);
  CHECK(t.ended(13) == std::nullopt);
  CHECK(t.ended(14) == std::nullopt);
  CHECK(t.live_tasks(10) == 0);
  CHECK(t.tasks_of(10).empty());
  CHECK(t.array_of(13) == std::nullopt);
}

TEST_CASE("array_table: a waiting task cancelled frees no place; an unthrottled array admits all") {
  daemon::array_table t;
  CHECK(t.arrive(1, 1, 1));
  CHECK_FALSE(t.arrive(1, 2, 1));
  CHECK_FALSE(t.arrive(1, 3, 1));
  // Task 2 is cancelled while it waits: nobody is let in for it.
  CHECK(t.ended(2) == std::nullopt);
  CHECK(t.waiting_count() == 1);
  // Ending it again (or an unknown job) is nothing.
  CHECK(t.ended(2) == std::nullopt);
  CHECK(t.ended(999) == std::nullopt);
  CHECK(t.ended(1) == 3);
  CHECK(t.live_tasks(1) == 1);

  for (std::int64_t id = 100; id < 150; ++id) CHECK(t.arrive(100, id, 0));
  CHECK(t.waiting_count() == 0);
  CHECK(t.live_tasks(100) == 50);
  CHECK(t.ended(120) == std::nullopt);
  CHECK(t.live_tasks(100) == 49);
}

TEST_CASE("array_table: two throttled arrays keep separate places") {
  daemon::array_table t;
  CHECK(t.arrive(1, 1, 1));
  CHECK(t.arrive(5, 5, 1));
  CHECK_FALSE(t.arrive(1, 2, 1));
  CHECK_FALSE(t.arrive(5, 6, 1));
  CHECK(t.ended(5) == 6);  // array 5's place goes to array 5's task
  CHECK(t.is_waiting(2));
  CHECK(t.ended(1) == 2);
}

TEST_CASE("array_table: a compact record is found, changed in place and dropped") {
  daemon::array_table t;
  daemon::array_table::compact c;
  c.record = 7;
  c.rest = core::task_ranges::of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  c.max_running = 3;
  t.add_compact(7, c);
  CHECK(t.compact_count() == 1);
  CHECK(t.find_compact(8) == nullptr);
  auto* found = t.find_compact(7);
  REQUIRE(found != nullptr);
  CHECK(found->rest.size() == 10);
  CHECK(found->rest.take_front(3) == std::vector<std::int64_t>{0, 1, 2});
  found->record = 20;
  found->eligible = true;
  CHECK(t.find_compact(7)->record == 20);
  CHECK(t.find_compact(7)->rest.to_string() == "3-9");
  t.drop_compact(7);
  CHECK(t.find_compact(7) == nullptr);
  CHECK(t.compact_count() == 0);
}
