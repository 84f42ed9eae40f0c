// Validation of aqs-sim against the reference results (CQSim) on the whole shipped KTH-SP2 trace.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "sim/simulator.hpp"
#include "sim/swf.hpp"

using namespace aqs::sim;

namespace {

const workload& kth() {
  static const workload w = [] {
    auto t = read_swf(std::string(AQS_TRACES_DIR) + "/KTH-SP2-1996-2.1-cln.swf.gz");
    REQUIRE(t.max_procs.has_value());
    return filter_trace(t, static_cast<std::size_t>(*t.max_procs));
  }();
  return w;
}

double rel(double got, double want) { return std::fabs(got - want) / want; }

// What CQSim reports for a policy on the whole trace, and how close we must be.
struct reference {
  const char* policy;
  double mean_wait, mean_bsld, utilization;
  double tolerance;  // relative, for the mean wait and AVEbsld
};

void check_against(const reference& want) {
  sim_options o;
  o.policy = want.policy;
  auto r = simulate(kth(), o);
  CHECK(rel(r.mean_wait, want.mean_wait) < want.tolerance);
  CHECK(rel(r.mean_bsld, want.mean_bsld) < want.tolerance);
  CHECK(std::fabs(r.utilization - want.utilization) < 0.002);
}

}  // namespace

TEST_CASE("KTH-SP2 after the filter has the reference's 28,481 jobs on 100 processors") {
  CHECK(kth().procs == 100);
  CHECK(kth().jobs.size() == 28481);
  CHECK(kth().skipped == 8);
}

TEST_CASE("fcfs on the whole KTH trace is within 0.5 % of the reference mean wait and AVEbsld") {
  check_against(
      {.policy = "fcfs", .mean_wait = 353776.4, .mean_bsld = 6814.97, .utilization = 0.6852, .tolerance = 0.005});
}

TEST_CASE("easy on the whole KTH trace is within 2 % of the reference mean wait and AVEbsld") {
  check_against({.policy = "easy", .mean_wait = 6836.8, .mean_bsld = 92.57, .utilization = 0.6856, .tolerance = 0.02});
}
