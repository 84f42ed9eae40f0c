// Unit tests of advance reservations in the core: EASY backfilling around a
// future one, only its jobs inside an active one, adaptive jobs shrunk off
// its processors at its start, and how a new one's processors are chosen.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/partition.hpp"
#include "core/reservation.hpp"
#include "core/scheduler.hpp"
#include "core_jobs.hpp"

using namespace aqs::core;
using kind = decision::kind;

namespace {

// node0 (processors 0-3) and node1 (4-7).
scheduler two_nodes(std::string_view policy) { return scheduler(cluster::uniform(2, 4), make_strategy(policy)); }

advance_reservation on_node1(double start, double end, std::string name = "maint") {
  advance_reservation r;
  r.name = std::move(name);
  r.start = start;
  r.end = end;
  r.procs = processor_set::range(8, 4, 8);
  return r;
}

job_request in_resv(job_request r, std::string name = "maint") {
  r.reservation = std::move(name);
  return r;
}

const decision* find_job(const std::vector<decision>& d, job_id id) {
  for (const decision& x : d) {
    if (x.job == id) return &x;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("EASY backfills around a future reservation: only jobs that end by its start use its processors") {
  scheduler s = two_nodes("easy");
  s.set_reservations({on_node1(60, 160)});
  // 4 processors for 100 s: node1 would still be busy at 60, so node0.
  auto d = s.handle(event::arrival(test::rigid(1, 4, 100, 0)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to == processor_set::range(8, 0, 4));
  // Another like it waits: node1 is free now but reserved from 60.
  CHECK(s.handle(event::arrival(test::rigid(2, 4, 100, 1)), 1).empty());
  // One that ends by 60 is backfilled onto node1.
  d = s.handle(event::arrival(test::rigid(3, 4, 30, 2)), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 3);
  CHECK(d[0].to == processor_set::range(8, 4, 8));
  // A job with no time limit never goes there.
  job_request open = test::rigid(4, 1, 0, 3);
  CHECK(s.handle(event::arrival(open), 3).empty());
}

TEST_CASE("an active reservation runs only its jobs, which get no other processors") {
  scheduler s = two_nodes("easy");
  s.set_reservations({on_node1(10, 110)});
  // Its job waits until the start, even with node0 idle.
  CHECK(s.handle(event::arrival(in_resv(test::rigid(1, 2, 50, 0))), 0).empty());
  // From the start it runs on node1.
  auto d = s.decide(10);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 1);
  CHECK(d[0].to.is_subset_of(processor_set::range(8, 4, 8)));
  // Others use node0 only; a job of it larger than it waits, never spills.
  d = s.handle(event::arrival(test::rigid(2, 4, 50, 11)), 11);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to == processor_set::range(8, 0, 4));
  CHECK(s.handle(event::arrival(test::rigid(3, 2, 50, 12)), 12).empty());
  CHECK(s.handle(event::arrival(in_resv(test::rigid(4, 5, 50, 13))), 13).empty());
  // After its end node1 is everyone's: job 3 starts there.
  d = s.decide(110);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 3);
  CHECK(d[0].to.is_subset_of(processor_set::range(8, 4, 8)));
}

TEST_CASE("a job naming a reservation that does not exist waits, with or without partitions") {
  scheduler s = two_nodes("fcfs");
  CHECK(s.handle(event::arrival(in_resv(test::rigid(1, 1, 10, 0), "nosuch")), 0).empty());
  auto d = s.handle(event::arrival(test::rigid(2, 1, 10, 1)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  s.set_partitions(parse_config("PartitionName=p Nodes=node[0-1] Default=YES\n", "t").partitions);
  CHECK(s.decide(2).empty());
}

TEST_CASE("at its start an adaptive job on its processors is shrunk off them, not killed") {
  scheduler s = two_nodes("equipartition");
  auto d = s.handle(event::arrival(test::adaptive(1, 2, 8, 1000, 0)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 8);
  s.set_reservations({on_node1(60, 160)});
  // Before the start nothing happens to it.
  CHECK(s.decide(30).empty());
  d = s.decide(60);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::resize);
  CHECK(d[0].to == processor_set::range(8, 0, 4));
  CHECK(d[0].ranks_moved == 4);
  // The reservation's job waits for the acknowledgement, then starts there.
  CHECK(s.handle(event::arrival(in_resv(test::rigid(2, 4, 50, 61))), 61).empty());
  d = s.handle(event::on_job(event::kind::resize_ack, 1), 62);
  const decision* start = find_job(d, 2);
  REQUIRE(start != nullptr);
  CHECK(start->to == processor_set::range(8, 4, 8));
  // The adaptive job does not grow back onto node1 while it is reserved.
  CHECK(find_job(d, 1) == nullptr);
  s.apply(event::completion(2));
  CHECK(find_job(s.decide(100), 1) == nullptr);
  // After the end it does.
  d = s.decide(160);
  const decision* grow = find_job(d, 1);
  REQUIRE(grow != nullptr);
  CHECK(grow->to.count() == 8);
}

TEST_CASE("an adaptive job shrunk off a reservation keeps its size on free processors elsewhere") {
  scheduler s = two_nodes("fcfs");
  advance_reservation r = on_node1(60, 160);
  // A rigid 2 on node0 first, then the adaptive job placed on node1 by hand.
  s.restore(test::adaptive(1, 2, 4, 1000, 0), job_state::running, processor_set::range(8, 4, 8), 0);
  s.set_reservations({r});
  auto d = s.decide(60);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::resize);
  CHECK(d[0].to == processor_set::range(8, 0, 4));
  CHECK(d[0].ranks_moved == 4);
}

TEST_CASE("a rigid job in the way keeps its processors; the reservation runs on the rest") {
  scheduler s = two_nodes("easy");
  s.restore(test::rigid(1, 2, 1000, 0), job_state::running, processor_set::range(8, 4, 6), 0);
  s.set_reservations({on_node1(10, 110)});
  CHECK(s.decide(10).empty());
  auto d = s.handle(event::arrival(in_resv(test::rigid(2, 2, 50, 11))), 11);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to == processor_set::range(8, 6, 8));
}

TEST_CASE("a new reservation's processors: free first, then adaptive jobs', never a rigid job's running past its start") {
  scheduler s = two_nodes("fcfs");
  s.restore(test::rigid(1, 2, 1000, 0), job_state::running, processor_set::range(8, 0, 2), 0);
  s.restore(test::adaptive(2, 1, 4, 1000, 0), job_state::running, processor_set::range(8, 4, 8), 0);
  reservation_ask ask;
  ask.start = 60;
  ask.end = 120;
  ask.count = 4;
  auto c = choose_reservation_procs(s, ask, {});
  REQUIRE(c.error.empty());
  // Free 2-3 first, then the adaptive job's lowest.
  CHECK(c.procs == (processor_set::range(8, 2, 4) | processor_set::range(8, 4, 6)));
  ask.count = 7;
  c = choose_reservation_procs(s, ask, {});
  CHECK(c.error == "only 6 processors can be set aside from its start, 7 processors asked");
  ask.ignore_jobs = true;
  c = choose_reservation_procs(s, ask, {});
  CHECK(c.error.empty());
  CHECK(c.procs.count() == 7);
  // Given nodes: node0 holds the rigid job past the start.
  ask.ignore_jobs = false;
  ask.count = 0;
  ask.procs = processor_set::range(8, 0, 4);
  c = choose_reservation_procs(s, ask, {});
  CHECK(c.error == "job 1 runs on its nodes past its start (IGNORE_JOBS would overlap them)");
  // Another reservation overlapping in time has node1.
  ask.procs = processor_set::range(8, 4, 8);
  c = choose_reservation_procs(s, ask, {on_node1(100, 200, "other")});
  CHECK(c.error == "its processors overlap another reservation at that time");
  // Not overlapping in time: fine.
  c = choose_reservation_procs(s, ask, {on_node1(120, 200, "other")});
  CHECK(c.error.empty());
  ask.end = ask.start;
  CHECK(choose_reservation_procs(s, ask, {}).error == "the reservation ends before it starts");
}

TEST_CASE("reservations are checked when set") {
  scheduler s = two_nodes("fcfs");
  advance_reservation r = on_node1(10, 5);
  CHECK_THROWS_AS(s.set_reservations({r}), std::invalid_argument);
  CHECK_THROWS_AS(s.set_reservations({on_node1(1, 2), on_node1(3, 4)}), std::invalid_argument);
  advance_reservation empty = on_node1(1, 2);
  empty.procs = processor_set(8);
  CHECK_THROWS_AS(s.set_reservations({empty}), std::invalid_argument);
  CHECK(s.reservations().empty());
}

TEST_CASE("with partitions, a reservation's jobs run in its processors of their partition") {
  scheduler s(cluster::uniform(4, 4), make_strategy("easy"));
  s.set_partitions(parse_config("PartitionName=a Nodes=node[0-1] Default=YES\nPartitionName=b Nodes=node[2-3]\n", "t")
                       .partitions);
  advance_reservation r;
  r.name = "maint";
  r.start = 0;
  r.end = 100;
  r.procs = processor_set::range(16, 4, 12);  // node1 (in a) and node2 (in b)
  s.set_reservations({r});
  job_request ja = in_resv(test::rigid(1, 4, 10, 0));
  auto d = s.handle(event::arrival(ja), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to == processor_set::range(16, 4, 8));
  job_request jb = in_resv(test::rigid(2, 4, 10, 1));
  jb.partition = "b";
  d = s.handle(event::arrival(jb), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to == processor_set::range(16, 8, 12));
  // Partition a's other jobs get node0 only.
  d = s.handle(event::arrival(test::rigid(3, 8, 10, 2)), 3);
  CHECK(d.empty());
}

TEST_CASE("with a lead, adaptive jobs are shrunk off a reservation that long before its start") {
  scheduler s = two_nodes("equipartition");
  s.set_reservation_lead(15);
  auto d = s.handle(event::arrival(test::adaptive(1, 2, 8, 1000, 0)), 0);
  REQUIRE(d.size() == 1);
  s.set_reservations({on_node1(60, 160)});
  CHECK(s.decide(44).empty());
  d = s.decide(45);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::resize);
  CHECK(d[0].to == processor_set::range(8, 0, 4));
  // Acknowledged before the start: node1 waits idle for the reservation's
  // jobs (only jobs that end by the start may use it meanwhile).
  s.apply(event::on_job(event::kind::resize_ack, 1));
  CHECK(s.handle(event::arrival(test::rigid(2, 4, 100, 50)), 50).empty());
  d = s.handle(event::arrival(test::rigid(3, 4, 5, 51)), 51);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 3);
  s.apply(event::completion(3));
  d = s.handle(event::arrival(in_resv(test::rigid(4, 4, 50, 52))), 60);
  const decision* start = find_job(d, 4);
  REQUIRE(start != nullptr);
  CHECK(start->to == processor_set::range(8, 4, 8));
}
