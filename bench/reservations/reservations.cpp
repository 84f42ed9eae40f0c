// bench_reservations: a reservation starting LEAD seconds from now on a
// full cluster of 2 nodes x 4 processors (real aqsd, private PostgreSQL,
// two agents). One node runs a rigid job; the other is held either
//   - by a rigid job whose time limit ends 5 s before the start (it is
//     killed at its limit), or
//   - by an adaptive jacobi2d MPI job (1-6 processors, MPI_Migrate() every
//     40 ms) that also holds half of the first node: at the start it is shrunk off
//     that node.
// The reservation (Nodes= that node) has one job of 4 processors waiting for it.
// Measured: from the reservation's start to that job RUNNING (its start
// time as aqsd stored it), and for the adaptive case to the shrink being
// acknowledged. Prints a table and writes bench/results/reservations.json.
//   bench_reservations [--quick] [--lead S]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "core/processor_set.hpp"
#include "protocol/messages.hpp"
#include "protocol/results.hpp"

#include "bench_system.hpp"

using clk = std::chrono::steady_clock;
using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;

namespace {

// "-14.21" (before the start) or "0.062".
std::string fmt_seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", s);
  return b;
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::int64_t submit(client::connection& c, const std::string& work, std::int64_t procs, std::vector<std::string> argv,
                    std::optional<std::int64_t> limit_s = std::nullopt, const std::string& reservation = "",
                    std::int64_t max = 0) {
  protocol::submit s;
  s.id = c.next_id();
  s.job.name = "bench";
  s.job.argv = std::move(argv);
  s.job.workdir = work;
  s.job.stdout_pattern = work + "/out-%j";
  s.job.min_pe = procs;
  s.job.max_pe = max > 0 ? max : procs;
  s.job.adaptive = max > procs;
  s.job.walltime_s = limit_s;
  if (!reservation.empty()) {
    protocol::job_geometry g;
    g.recorded = {"reservation=" + reservation};
    if (max <= procs) g.ntasks = procs;  // a rigid job's geometry counts its tasks
    s.job.geometry = g;
  }
  return c.call(s)["job_id"].get<std::int64_t>();
}

protocol::job_info info(client::connection& c, std::int64_t id) {
  protocol::list_jobs l;
  l.id = c.next_id();
  l.all = true;
  l.job_ids = {id};
  const auto jobs = c.ask(l).jobs;
  if (jobs.empty()) throw std::runtime_error("job " + std::to_string(id) + " is not listed");
  return jobs.front();
}

void cancel(client::connection& c, std::vector<std::int64_t> ids) {
  protocol::cancel k;
  k.id = c.next_id();
  k.job_ids = std::move(ids);
  c.call(k);
}

struct round_result {
  double start_delay_s = 0;   // reservation start -> its job RUNNING (stored start time)
  double shrink_acked_s = 0;  // reservation start -> the adaptive job off the node (adaptive case; negative: before it)
};

// The node the job does not hold processors on (nodes register in any
// order: node0 is not always processors 0-3). A node's processors come as a
// range list of global numbers ("4-7"), the job's map as 0/1 text.
std::string other_node(client::connection& c, const std::string& map) {
  constexpr std::size_t k_universe = 4096;  // more processors than any bench cluster has
  auto job = core::processor_set::from_string(map);
  job.resize(k_universe);
  for (const auto& nd : c.ask(protocol::list_nodes{c.next_id()}).nodes) {
    if (!core::processor_set::from_ranges(k_universe, nd.procs).intersects(job)) return nd.name;
  }
  throw std::runtime_error("no node is free of the first job");
}

round_result one_round(client::connection& c, const std::string& work, double lead_s, bool adaptive, int n) {
  const std::int64_t base = submit(c, work, 2, {"/bin/sleep", "3600"});
  for (auto until = clk::now() + 60s; info(c, base).state != job_state::running;) {
    if (clk::now() > until) throw std::runtime_error("the first job did not start");
    std::this_thread::sleep_for(20ms);
  }
  const std::string spare = other_node(c, info(c, base).procs);
  std::int64_t holder = 0;
  if (adaptive) {
    const std::string script = work + "/jacobi.sh";
    std::ofstream(script) << "#!/bin/bash\nexport OMPI_MCA_btl_vader_single_copy_mechanism=none\n"
                          << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                          << " --rows 64 --cols 48 --iters 1000000 --pace-ms 40 --out " << work << "/j.grid\n";
    holder = submit(c, work, 1, {"/bin/bash", script}, std::nullopt, "", 6);
    const auto until = clk::now() + 120s;
    while (info(c, holder).nprocs < 6) {
      if (clk::now() > until) throw std::runtime_error("jacobi2d did not grow to 6 processors");
      aqs::bench::throw_if_interrupted();
      std::this_thread::sleep_for(50ms);
    }
  } else {
    // Ends by its limit 5 s before the start (the agent kills it then).
    holder = submit(c, work, 4, {"/bin/sleep", "3600"}, static_cast<std::int64_t>(lead_s) - 5);
    const auto until = clk::now() + 60s;
    while (info(c, holder).state != job_state::running) {
      if (clk::now() > until) throw std::runtime_error("the rigid holder did not start");
      std::this_thread::sleep_for(20ms);
    }
  }
  const std::string name = "bench" + std::to_string(n);
  const double start_s = std::ceil(wall_now() + lead_s);
  nlohmann::json rec = {{"name", name},   {"start_s", start_s},          {"duration_s", 600},
                        {"nodes", spare}, {"users", {"root"}},         {"flags", {"MAINT"}}};
  c.call(protocol::reservations{c.next_id(), "create", name, rec.dump()});
  const std::int64_t inside = submit(c, work, 4, {"/bin/sleep", "5"}, 60, name);
  round_result r;
  bool shrunk = !adaptive;
  const auto until = clk::now() + std::chrono::seconds(static_cast<int>(lead_s) + 120);
  while (true) {
    if (clk::now() > until) throw std::runtime_error("the reservation's job did not start");
    aqs::bench::throw_if_interrupted();
    if (!shrunk) {
      const auto h = info(c, holder);
      if (h.state == job_state::running && h.nprocs == 2) {
        shrunk = true;
        r.shrink_acked_s = wall_now() - start_s;
      }
    }
    const auto j = info(c, inside);
    if (j.state == job_state::running || core::is_final(j.state)) {
      if (!j.start_time) throw std::runtime_error("the reservation's job has no start time");
      r.start_delay_s = aqs::bench::iso_seconds(*j.start_time) - start_s;
      if (!shrunk) r.shrink_acked_s = wall_now() - start_s;
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  cancel(c, {base, holder, inside});
  c.call(protocol::reservations{c.next_id(), "delete", name, {}});
  aqs::bench::wait_idle(c, 120s);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  double lead_s = 60;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--lead") == 0 && i + 1 < argc) lead_s = std::atof(argv[++i]);
  }
  if (quick && lead_s == 60) lead_s = 15;
  const int runs = quick ? 1 : 2;
  aqs::bench::stop_on_signals();
  return aqs::bench::measure_and_write("reservations", nlohmann::json::object(), [&](nlohmann::json& results) {
    const aqs::bench::system::options o{
        .aqsd = AQS_AQSD_BINARY, .aqs_node = AQS_NODE_BINARY, .nodes = 2, .procs_per_node = 4};
    aqs::bench::system sys(o);
    client::connection c(sys.socket());
    const std::string work = sys.work().string();
    std::printf("%-62s %9s %9s %9s\n", "reservation in LEAD s on a whole node, 2 nodes x 4", "lead s", "start s", "shrink s");
    results["lead_s"] = lead_s;
    int n = 0;
    for (const bool adaptive : {false, true}) {
      nlohmann::json rows = nlohmann::json::array();
      for (int i = 0; i < runs; ++i) {
        const auto r = one_round(c, work, lead_s, adaptive, n++);
        std::printf("%-62s %9.0f %9.3f %9s\n",
                    adaptive ? "node held by jacobi2d (1-6 procs), shrunk off at the start"
                             : "node held by a rigid job whose limit ends 5 s before",
                    lead_s, r.start_delay_s,
                    adaptive ? fmt_seconds(r.shrink_acked_s).c_str() : "-");
        rows.push_back({{"start_delay_s", r.start_delay_s}, {"shrink_acked_s", r.shrink_acked_s}});
      }
      results[adaptive ? "adaptive_holder" : "rigid_holder"] = rows;
    }
  });
}
