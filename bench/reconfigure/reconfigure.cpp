// bench_reconfigure: what a change of processor map costs an adaptive MPI job
// under the real system (aqsd with its private PostgreSQL, one aqs-node with
// 8 virtual processors on this machine's cores, mpirun, libaqs_runtime):
//   - a no-change MPI_Migrate() on 2, 4 and 8 ranks;
//   - shrink 8 -> 4 and expand 4 -> 8 of a job holding 10 MiB per rank (at 8
//     ranks), --reps times each: a rigid 4-processor job arrives (shrink),
//     then ends (expand); once as the runtime does it (the expansion calls
//     back the ranks the shrink parked), once with AQS_CALL_BACK_PARKED=0 (every
//     expansion spawns new processes). For every change: aqsd's decision to the job
//     holding the map (delivery), the wait for the job's next MPI_Migrate(),
//     spawn, data movement, the change itself (MPI_Migrate() taking the map
//     up to the acknowledgement being sent), and decision to acknowledgement
//     as aqsd recorded them; median, minimum, 90th percentile and maximum.
// The times come from the job's history (the shim's acknowledgement carries
// its phases); the app checks every element after every change.
// Prints a table and writes $AQS_BENCH_RESULTS/reconfigure.json.
//   bench_reconfigure [--reps N] [--mb-per-rank M] [--nochange-calls N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_system.hpp"
#include "client/client_connection.hpp"
#include "protocol/messages.hpp"
#include "protocol/results.hpp"

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;
using aqs::bench::slurp;
using clk = std::chrono::steady_clock;
using core::job_state;

namespace {

struct options {
  int reps = 20;
  double mb_per_rank = 10;
  long nochange_calls = 20000;
};

std::vector<std::string> job_environment() {
  std::vector<std::string> env{"OMPI_MCA_btl_vader_single_copy_mechanism=none"};
  for (const char* k : {"PATH", "HOME", "LANG"}) {
    if (const char* v = std::getenv(k)) env.push_back(std::string(k) + "=" + v);
  }
  return env;
}

// An adaptive job running the app under mpirun on $AQS_NPROCS ranks.
std::int64_t submit_app(client::connection& w, const fs::path& work, const std::string& name, int min, int max,
                        const std::string& app_args, const std::vector<std::string>& extra_env = {}) {
  protocol::submit s;
  s.id = w.next_id();
  s.job.name = name;
  s.job.argv = {"/bin/bash", "-c",
                std::string("exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " RECONFIGURE_APP " ") +
                    app_args};
  s.job.workdir = work.string();
  s.job.environment = job_environment();
  s.job.environment.insert(s.job.environment.end(), extra_env.begin(), extra_env.end());
  s.job.stdout_pattern = (work / (name + ".out")).string();
  s.job.min_pe = min;
  s.job.max_pe = max;
  s.job.adaptive = true;
  s.job.walltime_s = 3600;
  return w.call(s)["job_id"].get<std::int64_t>();
}

std::int64_t submit_rigid(client::connection& w, const fs::path& work, int procs, const std::string& seconds) {
  protocol::submit s;
  s.id = w.next_id();
  s.job.name = "rigid";
  s.job.argv = {"sleep", seconds};
  s.job.workdir = work.string();
  s.job.stdout_pattern = "/dev/null";
  s.job.min_pe = s.job.max_pe = procs;
  return w.call(s)["job_id"].get<std::int64_t>();
}

protocol::job_info job(client::connection& w, std::int64_t id) {
  protocol::list_jobs l;
  l.id = w.next_id();
  l.all = true;
  l.after_id = id - 1;
  l.limit = 1;
  auto page = protocol::parse_job_list(w.call(l));
  if (page.empty() || page.front().id != id) throw std::runtime_error("job " + std::to_string(id) + " not found");
  return page.front();
}

// Polls until `pred` holds for the job; throws after `limit`.
template <class Pred>
protocol::job_info wait_job(client::connection& w, std::int64_t id, Pred pred, std::chrono::seconds limit,
                            const char* what) {
  const auto until = clk::now() + limit;
  while (true) {
    auto j = job(w, id);
    if (pred(j)) return j;
    if (core::is_final(j.state) || clk::now() > until) {
      throw std::runtime_error("job " + std::to_string(id) + " (" + std::string(core::to_string(j.state)) +
                               ") never " + what);
    }
    std::this_thread::sleep_for(5ms);
  }
}

// One acknowledged change, as the history has it.
struct change {
  int ranks = 0;  // after the change
  double delivered_ms = 0, wait_ms = 0, spawn_ms = 0, data_ms = 0, total_ms = 0, decision_to_ack_ms = 0;
  double apply_ms() const { return total_ms - wait_ms; }
};

double field(const std::string& note, const char* label) {
  std::smatch m;
  const std::regex re(std::string(label) + " ([0-9.]+) ms");
  return std::regex_search(note, m, re) ? std::stod(m[1]) : 0.0;
}

std::vector<change> changes_of(client::connection& w, std::int64_t id) {
  const auto events = w.call(protocol::job_history{w.next_id(), id})["events"];
  std::vector<change> out;
  double resizing_at = 0;
  for (const auto& e : events) {
    const std::string state = e.value("new_state", "");
    const std::string reason = e.value("reason", "");
    if (state == "RESIZING") resizing_at = bench::iso_seconds(e.value("time", ""));
    if (state != "RUNNING" || reason.find("resize acknowledged") == std::string::npos) continue;
    change c;
    const std::string procs = e.value("new_procs", "");
    c.ranks = static_cast<int>(std::count(procs.begin(), procs.end(), '1'));
    c.delivered_ms = field(reason, "delivered in");
    c.wait_ms = field(reason, "waited");
    c.spawn_ms = field(reason, "spawn");
    c.data_ms = field(reason, "data");
    c.total_ms = field(reason, "total");
    c.decision_to_ack_ms = (bench::iso_seconds(e.value("time", "")) - resizing_at) * 1000;
    out.push_back(c);
  }
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--reps" && has) {
      o.reps = std::atoi(argv[++i]);
    } else if (a == "--mb-per-rank" && has) {
      o.mb_per_rank = std::atof(argv[++i]);
    } else if (a == "--nochange-calls" && has) {
      o.nochange_calls = std::atol(argv[++i]);
    } else {
      throw std::invalid_argument("usage: bench_reconfigure [--reps N] [--mb-per-rank M] [--nochange-calls N]");
    }
  }
  if (o.reps < 1 || !(o.mb_per_rank > 0) || o.nochange_calls < 1) {
    throw std::invalid_argument("bench_reconfigure: --reps, --mb-per-rank and --nochange-calls must be positive");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  nlohmann::json results = {{"benchmark", "reconfigure"}};
  try {
    const options o = parse(argc, argv);
    results["reps"] = o.reps;
    results["mb_per_rank_at_8"] = o.mb_per_rank;
    bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 1, 8, {}});
    const fs::path work = sys.work();
    client::connection w(sys.socket());
    const std::string stop = (work / "stop").string();

    // 1. No-change MPI_Migrate(): alone at a fixed size (min = max), so no
    // map arrives while it is timed.
    std::printf("%-44s %10s %10s %10s\n", "no-change MPI_Migrate()", "mean us", "median us", "p90 us");
    for (int ranks : {2, 4, 8}) {
      std::ofstream(stop) << "";
      const std::string name = "nochange" + std::to_string(ranks);
      const auto id = submit_app(w, work, name, ranks, ranks,
                                 "--mb-per-rank 1 --pace-ms 0 --nochange-calls " + std::to_string(o.nochange_calls) +
                                     " --stop-file " + stop);
      const auto j = wait_job(w, id, [](const auto& j) { return core::is_final(j.state); }, 300s, "ended");
      const std::string out = slurp(work / (name + ".out"));
      std::smatch m;
      if (j.state != job_state::completed ||
          !std::regex_search(out, m, std::regex("mean_us=([0-9.]+) median_us=([0-9.]+) p90_us=([0-9.]+)"))) {
        throw std::runtime_error("the no-change job on " + std::to_string(ranks) + " ranks failed:\n" + out);
      }
      const double mean = std::stod(m[1]), med = std::stod(m[2]), p90 = std::stod(m[3]);
      std::printf("%-44s %10.2f %10.2f %10.2f\n", (std::to_string(ranks) + " ranks on 2 cores").c_str(), mean, med,
                  p90);
      results["nochange_us"][std::to_string(ranks)] = {{"mean", mean}, {"median", med}, {"p90", p90}};
    }
    fs::remove(stop);

    // 2. Shrink and expand, driven by a rigid job that comes and goes: once
    // as the runtime does it (an expansion calls back the ranks the shrink
    // parked), once with every expansion starting new processes.
    auto series = [&](const std::string& name, const std::vector<std::string>& env) {
      fs::remove(stop);
      const auto id = submit_app(w, work, name, 4, 8,
                                 "--mb-per-rank " + std::to_string(o.mb_per_rank) +
                                     " --pace-ms 5 --nochange-calls 0 --stop-file " + stop,
                                 env);
      wait_job(w, id, [](const auto& j) { return j.state == job_state::running && j.nprocs == 8; }, 60s,
               "ran on 8 processors");
      // Connected to aqsd and in its loop before the first change.
      const auto until = clk::now() + 60s;
      while (slurp(work / (name + ".out")).find("ready ranks=8") == std::string::npos) {
        if (clk::now() > until) throw std::runtime_error(name + ": the job never said it was ready");
        std::this_thread::sleep_for(10ms);
      }
      for (int r = 0; r < o.reps; ++r) {
        const auto rigid = submit_rigid(w, work, 4, "0.2");
        wait_job(w, rigid, [](const auto& j) { return j.state == job_state::completed; }, 120s, "completed");
        wait_job(w, id, [](const auto& j) { return j.state == job_state::running && j.nprocs == 8; }, 120s,
                 "grew back to 8");
      }
      std::ofstream(stop) << "";
      const auto done = wait_job(w, id, [](const auto& j) { return core::is_final(j.state); }, 120s, "ended");
      const std::string out = slurp(work / (name + ".out"));
      if (done.state != job_state::completed || out.find("ok=0") != std::string::npos ||
          out.find("done maps=") == std::string::npos) {
        throw std::runtime_error(name + ": the job failed or its data was wrong after a change:\n" + out);
      }
      auto all = changes_of(w, id);
      const auto n = static_cast<std::size_t>(std::count_if(all.begin(), all.end(), [](const change& c) { return c.ranks == 4; }));
      if (n != static_cast<std::size_t>(o.reps) || all.size() != 2 * n) {
        throw std::runtime_error(name + ": " + std::to_string(all.size()) + " acknowledged changes, expected " +
                                 std::to_string(2 * o.reps));
      }
      return all;
    };
    const auto called_back = series("adaptive", {});
    const auto spawned = series("spawning", {"AQS_CALL_BACK_PARKED=0"});

    std::printf("\n%-50s %9s %9s %9s %9s\n", "change of map (ms)", "median", "min", "p90", "max");
    struct kind {
      const char* label;
      const char* key;
      const std::vector<change>* from;
      int ranks;
    };
    for (const kind& k : {kind{"shrink 8 -> 4", "shrink_ms", &called_back, 4},
                          kind{"expand 4 -> 8, parked ranks called back", "expand_called_back_ms", &called_back, 8},
                          kind{"expand 4 -> 8, new ranks spawned", "expand_spawned_ms", &spawned, 8}}) {
      std::vector<change> cs;
      for (const auto& c : *k.from) {
        if (c.ranks == k.ranks) cs.push_back(c);
      }
      nlohmann::json j;
      std::printf("%s\n", k.label);
      auto phase = [&](const char* name, auto get) {
        std::vector<double> v;
        for (const auto& c : cs) v.push_back(get(c));
        const double med = bench::median(v), lo = *std::min_element(v.begin(), v.end()),
                     hi = *std::max_element(v.begin(), v.end()), p90 = bench::pct(v, 0.9);
        std::printf("  %-48s %9.1f %9.1f %9.1f %9.1f\n", name, med, lo, p90, hi);
        j[name] = {{"median", med}, {"min", lo}, {"p90", p90}, {"max", hi}};
      };
      phase("decision to job has map", [](const change& c) { return c.delivered_ms; });
      phase("wait for MPI_Migrate", [](const change& c) { return c.wait_ms; });
      phase("ranks join (call-back or spawn)", [](const change& c) { return c.spawn_ms; });
      phase("data", [](const change& c) { return c.data_ms; });
      phase("MPI_Migrate: map to ack", [](const change& c) { return c.apply_ms(); });
      phase("decision to ack at aqsd", [](const change& c) { return c.decision_to_ack_ms; });
      results[k.key] = j;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reconfigure: %s\n", e.what());
    return 1;
  }
  bench::write_results("reconfigure", results);
  return 0;
}
