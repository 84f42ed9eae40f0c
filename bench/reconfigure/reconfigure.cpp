// bench_reconfigure: what a change of processor map costs an adaptive MPI job
// under the real system (aqsd with its private PostgreSQL, one aqs-node with
// 8 virtual processors on this machine's cores, mpirun, libaqs_runtime):
//   - a no-change MPI_Migrate() on 2, 4 and 8 ranks;
//   - shrink 8 -> 4 and expand 4 -> 8 of a job holding 10 MiB per rank (at 8
//     ranks), --reps times each: a rigid 4-processor job arrives (shrink),
//     then ends (expand); three ways: as the runtime does it (the expansion
//     calls back the ranks the shrink parked), with AQS_CALL_BACK_PARKED=0
//     (every expansion spawns new processes, prepared in the background
//     while the app runs), and with AQS_BACKGROUND_SPAWN=0 as well (spawned
//     inside MPI_Migrate(), the app stopped meanwhile). For every change:
//     aqsd's decision to the job holding the map (delivery), the wait for
//     the job's next MPI_Migrate() (with a background spawn: for the
//     MPI_Migrate() that switches), spawn, data movement, the change itself
//     (MPI_Migrate() taking the map up to the acknowledgement being sent),
//     decision to acknowledgement as aqsd recorded them, and the pause the
//     application saw (the longest MPI_Migrate() call of a running rank that
//     brought the map, measured by the app); median, minimum, 90th
//     percentile and maximum.
//   - how the cost grows (--scale 8,16,32,64,128): for each N, one node of N
//     virtual processors, an adaptive job of N/2..N ranks holding 1 MiB per
//     rank at N: launch (submission to every rank in its loop), then
//     --scale-reps times shrink N -> N/2 and expand N/2 -> N (new ranks
//     spawned in the background): map to ack and the app's pause.
// The times come from the job's history (the shim's acknowledgement carries
// its phases) and the app's output; the app checks every element after
// every change.
// Prints tables and writes $AQS_BENCH_RESULTS/reconfigure.json.
//   bench_reconfigure [--reps N] [--mb-per-rank M] [--nochange-calls N]
//                     [--scale N,N,...] [--scale-reps N] [--skip-series]
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
  std::vector<int> scale = {8, 16, 32, 64, 128};
  int scale_reps = 3;
  bool skip_series = false;  // only the scale table
};

std::vector<std::string> job_environment() {
  std::vector<std::string> env{"OMPI_MCA_btl_vader_single_copy_mechanism=none"};
  for (const char* k : {"PATH", "HOME", "LANG", "AQS_DEBUG"}) {
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
  double pause_ms = 0;  // as the app saw it
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

// The app's "map ... pause_ms=P" lines, in order, given to the changes in
// the same order (one line per acknowledged change).
void add_pauses(std::vector<change>& cs, const std::string& out) {
  const std::regex re("map epoch=[0-9]+ ranks=[0-9]+ ok=1 pause_ms=([0-9.]+)");
  std::size_t i = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator() && i < cs.size();
       ++it, ++i) {
    cs[i].pause_ms = std::stod((*it)[1]);
  }
}

// An adaptive job of low..high ranks on a node of `high` processors, driven
// `reps` times down to `low` by a rigid job of high - low processors that
// comes and goes. Returns its acknowledged changes and the launch time
// (submission to "ready" in the app's output).
struct series_result {
  std::vector<change> changes;
  double launch_ms = 0;
};
series_result run_series(client::connection& w, const fs::path& work, const std::string& name, int low, int high,
                         int reps, double mb_per_rank, const std::vector<std::string>& env) {
  const std::string stop = (work / (name + ".stop")).string();
  fs::remove(stop);
  const auto t0 = clk::now();
  const auto id = submit_app(w, work, name, low, high,
                             "--mb-per-rank " + std::to_string(mb_per_rank) +
                                 " --pace-ms 5 --nochange-calls 0 --stop-file " + stop,
                             env);
  // Connected to aqsd and in its loop before the first change.
  const auto until = clk::now() + 300s;
  while (slurp(work / (name + ".out")).find("ready ranks=" + std::to_string(high)) == std::string::npos) {
    if (clk::now() > until) throw std::runtime_error(name + ": the job never said it was ready on " + std::to_string(high));
    if (core::is_final(job(w, id).state)) throw std::runtime_error(name + ": the job ended before it was ready:\n" + slurp(work / (name + ".out")));
    std::this_thread::sleep_for(10ms);
  }
  series_result res;
  res.launch_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  for (int r = 0; r < reps; ++r) {
    const auto rigid = submit_rigid(w, work, high - low, "0.2");
    wait_job(w, rigid, [](const auto& j) { return j.state == job_state::completed; }, 300s, "completed");
    wait_job(w, id, [&](const auto& j) { return j.state == job_state::running && j.nprocs == high; }, 300s,
             "grew back");
  }
  std::ofstream(stop) << "";
  const auto done = wait_job(w, id, [](const auto& j) { return core::is_final(j.state); }, 300s, "ended");
  const std::string out = slurp(work / (name + ".out"));
  if (done.state != job_state::completed || out.find("ok=0") != std::string::npos ||
      out.find("done maps=") == std::string::npos) {
    throw std::runtime_error(name + ": the job failed or its data was wrong after a change:\n" + out);
  }
  res.changes = changes_of(w, id);
  add_pauses(res.changes, out);
  const auto n = static_cast<std::size_t>(
      std::count_if(res.changes.begin(), res.changes.end(), [&](const change& c) { return c.ranks == low; }));
  if (n != static_cast<std::size_t>(reps) || res.changes.size() != 2 * n) {
    throw std::runtime_error(name + ": " + std::to_string(res.changes.size()) + " acknowledged changes, expected " +
                             std::to_string(2 * reps));
  }
  return res;
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
    } else if (a == "--scale" && has) {
      o.scale.clear();
      std::stringstream in(argv[++i]);
      for (std::string n; std::getline(in, n, ',');) {
        const int v = std::atoi(n.c_str());
        if (v < 2 || v % 2 != 0 || v > 512) throw std::invalid_argument("bench_reconfigure: --scale takes even sizes 2..512");
        o.scale.push_back(v);
      }
    } else if (a == "--scale-reps" && has) {
      o.scale_reps = std::atoi(argv[++i]);
    } else if (a == "--skip-series") {
      o.skip_series = true;
    } else {
      throw std::invalid_argument(
          "usage: bench_reconfigure [--reps N] [--mb-per-rank M] [--nochange-calls N] [--scale N,N,...] "
          "[--scale-reps N] [--skip-series]");
    }
  }
  if (o.reps < 1 || !(o.mb_per_rank > 0) || o.nochange_calls < 1 || o.scale_reps < 1) {
    throw std::invalid_argument(
        "bench_reconfigure: --reps, --mb-per-rank, --nochange-calls and --scale-reps must be positive");
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
    if (!o.skip_series) {
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

    // 2. Shrink and expand, driven by a rigid job that comes and goes: as the
    // runtime does it (an expansion calls back the ranks the shrink parked),
    // with every expansion starting new processes in the background, and
    // with them started inside MPI_Migrate().
    const auto called_back = run_series(w, work, "adaptive", 4, 8, o.reps, o.mb_per_rank, {}).changes;
    const auto spawned = run_series(w, work, "spawning", 4, 8, o.reps, o.mb_per_rank, {"AQS_CALL_BACK_PARKED=0"}).changes;
    const auto blocking = run_series(w, work, "spawning-blocking", 4, 8, o.reps, o.mb_per_rank,
                                     {"AQS_CALL_BACK_PARKED=0", "AQS_BACKGROUND_SPAWN=0"})
                              .changes;

    std::printf("\n%-50s %9s %9s %9s %9s\n", "change of map (ms)", "median", "min", "p90", "max");
    struct kind {
      const char* label;
      const char* key;
      const std::vector<change>* from;
      int ranks;
    };
    for (const kind& k : {kind{"shrink 8 -> 4", "shrink_ms", &called_back, 4},
                          kind{"expand 4 -> 8, parked ranks called back", "expand_called_back_ms", &called_back, 8},
                          kind{"expand 4 -> 8, new ranks spawned in the background", "expand_spawned_ms", &spawned, 8},
                          kind{"expand 4 -> 8, new ranks spawned in MPI_Migrate", "expand_spawned_blocking_ms",
                               &blocking, 8}}) {
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
      phase("pause the app saw", [](const change& c) { return c.pause_ms; });
      results[k.key] = j;
    }
    }

    // 3. How the cost grows with the job's size: one system per size (a
    // node of N virtual processors on this machine's cores). Spawning 64
    // processes on 2 loaded cores takes longer than the default 20 s bound
    // of an expand: this measures the cost, so the bound is raised.
    const std::string k_scale_timeout = "AQS_EXPAND_TIMEOUT=300";
    if (!o.scale.empty()) {
      std::printf("\n%-6s %9s %11s %11s %11s %11s %11s %11s %11s\n", "ranks", "launch", "shrink", "shrink",
                  "expand", "expand", "expand", "expand*", "expand*");
      std::printf("%-6s %9s %11s %11s %11s %11s %11s %11s %11s\n", "N", "ms", "map-to-ack", "pause", "map-to-ack",
                  "decis-ack", "pause", "map-to-ack", "pause");
    }
    for (const int n : o.scale) {
      bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 1, n, {}});
      client::connection w(sys.socket());
      const auto r = run_series(w, sys.work(), "scale" + std::to_string(n), n / 2, n, o.scale_reps,
                                static_cast<double>(n) / 8.0, {"AQS_CALL_BACK_PARKED=0", k_scale_timeout});
      std::vector<double> s_ack, s_pause, e_ack, e_dec, e_pause;
      for (const auto& c : r.changes) {
        if (c.ranks == n / 2) {
          s_ack.push_back(c.apply_ms());
          s_pause.push_back(c.pause_ms);
        } else {
          e_ack.push_back(c.total_ms);
          e_dec.push_back(c.decision_to_ack_ms);
          e_pause.push_back(c.pause_ms);
        }
      }
      // The same expansions spawned inside MPI_Migrate() (expand*), the
      // application stopped meanwhile: the cost the background spawn hides.
      const auto b = run_series(w, sys.work(), "scaleblk" + std::to_string(n), n / 2, n, o.scale_reps,
                                static_cast<double>(n) / 8.0, {"AQS_CALL_BACK_PARKED=0", "AQS_BACKGROUND_SPAWN=0", k_scale_timeout});
      std::vector<double> b_ack, b_pause;
      for (const auto& c : b.changes) {
        if (c.ranks == n) {
          b_ack.push_back(c.total_ms);
          b_pause.push_back(c.pause_ms);
        }
      }
      const double sa = bench::median(s_ack), sp = bench::median(s_pause), ea = bench::median(e_ack),
                   ed = bench::median(e_dec), ep = bench::median(e_pause), ba = bench::median(b_ack),
                   bp = bench::median(b_pause);
      std::printf("%-6d %9.0f %11.1f %11.1f %11.1f %11.1f %11.1f %11.1f %11.1f\n", n, r.launch_ms, sa, sp, ea, ed,
                  ep, ba, bp);
      results["scale"][std::to_string(n)] = {{"launch_ms", r.launch_ms},          {"shrink_map_to_ack_ms", sa},
                                             {"shrink_pause_ms", sp},             {"expand_map_to_ack_ms", ea},
                                             {"expand_decision_to_ack_ms", ed},   {"expand_pause_ms", ep},
                                             {"expand_pause_max_ms", e_pause.empty() ? 0.0 : *std::max_element(e_pause.begin(), e_pause.end())},
                                             {"expand_blocking_map_to_ack_ms", ba},
                                             {"expand_blocking_pause_ms", bp},
                                             {"reps", o.scale_reps}};
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reconfigure: %s\n", e.what());
    return 1;
  }
  bench::write_results("reconfigure", results);
  return 0;
}
