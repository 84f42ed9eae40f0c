// bench_policy_mix: the daemon benchmark's 200-job mix (bench/daemon: 200
// jobs of 1..32 processors and 0.5..3 s, seed 1) run on a real aqsd with its
// private PostgreSQL and four aqs-node agents of 16 virtual processors, once
// per scheduling policy (aqsd --policy), issue 34. Every fifth job of the mix
// is an adaptive MPI job instead of `sleep`: jacobi2d under mpirun on
// $AQS_NPROCS ranks, min ceil(p/2), max min(2p, 32) for the mix's size p,
// doing the same work p x d processor-seconds (--work-ms: the ranks sleep
// the largest block's share of it, so the job speeds up with its size).
// By default no job declares a preferred size (as in the first runs of this
// benchmark, so that the runs compare), so the preferred-size policies take
// each adaptive job's minimum (core::preferred_size); --pref declares the
// mix's size p as every adaptive job's preferred size (fsub --pref p).
// Measures, per policy: makespan (first submission to last end) against the
// ideal (total work / 64 processors), mean wait and mean response (all jobs,
// rigid, adaptive), the adaptive jobs' resizes, and whether every adaptive
// job's final grid is byte-identical to one jacobi2d run never resized
// (plain mpirun, 2 ranks), as tests/integration/e2e/adaptive_test.cpp checks.
// The machine's load is sampled every 2 s during each policy's run (the
// 1-minute load average, the runnable processes and the share of CPU time
// busy, from /proc as uptime and vmstat show them): the benchmark shares
// its 2 cores with whatever else runs.
// --rounds N runs the policy list N times, every other round in reverse
// order, so that a load that rises or falls through the session does not
// always favour the same policy.
// Prints a table and writes $AQS_BENCH_RESULTS/policy_mix.json.
//   bench_policy_mix [--quick] [--policies easy,equipartition,...] [--adaptive-every K] [--rounds N] [--pref]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
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

namespace {

constexpr int k_nodes = 4, k_procs_per_node = 16, k_procs = k_nodes * k_procs_per_node;
constexpr int k_iters = 100;  // jacobi2d iterations of every adaptive job
const char* const k_grid_args = " --rows 64 --cols 48 --iters 100";
// Resizes are taken at every 5th iteration (a few hundredths of a second):
// fewer synchronisations for ranks that would spin in MPI meanwhile.
const char* const k_migrate_args = " --migrate-every 5";

struct options {
  bool quick = false;
  std::vector<std::string> policies = {"easy", "equipartition", "pref_common_pool", "payoff", "payoff_lxf"};
  int adaptive_every = 5;
  int rounds = 1;
  bool pref = false;  // adaptive jobs declare the mix's size as their preferred size
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--policies" && i + 1 < argc) {
      o.policies = split(argv[++i]);
    } else if (a == "--adaptive-every" && i + 1 < argc) {
      o.adaptive_every = std::atoi(argv[++i]);
      if (o.adaptive_every < 1) throw std::runtime_error("--adaptive-every: an integer >= 1");
    } else if (a == "--pref") {
      o.pref = true;
    } else if (a == "--rounds" && i + 1 < argc) {
      o.rounds = std::atoi(argv[++i]);
      if (o.rounds < 1) throw std::runtime_error("--rounds: an integer >= 1");
    } else {
      throw std::runtime_error(
          "usage: bench_policy_mix [--quick] [--policies a,b,...] [--adaptive-every K] [--rounds N] [--pref]");
    }
  }
  if (o.policies.empty()) throw std::runtime_error("--policies: at least one policy");
  return o;
}

std::vector<std::string> mpi_environment() {
  std::vector<std::string> env{"OMPI_MCA_btl_vader_single_copy_mechanism=none", "OMPI_MCA_mpi_yield_when_idle=1",
                               "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  for (const char* k : {"PATH", "HOME", "LANG"}) {
    if (const char* v = std::getenv(k)) env.push_back(std::string(k) + "=" + v);
  }
  return env;
}

// One job of the mix: size p, d seconds at that size.
struct mix_job {
  int p = 1;
  double d = 0;
  bool adaptive = false;
};

std::vector<mix_job> make_mix(int n, int adaptive_every) {
  // The same draws as bench/daemon's mix, so the ideal is the same.
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> size(1, 32);
  std::uniform_real_distribution<double> secs(0.5, 3.0);
  std::vector<mix_job> out;
  for (int i = 0; i < n; ++i) {
    mix_job j;
    j.p = size(rng);
    j.d = std::round(secs(rng) * 100) / 100;
    j.adaptive = i % adaptive_every == adaptive_every - 1;
    out.push_back(j);
  }
  return out;
}

protocol::submit to_submit(client::connection& w, const mix_job& j, int index, const fs::path& work, bool pref) {
  protocol::submit s;
  s.id = w.next_id();
  s.job.workdir = work.string();
  if (!j.adaptive) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", j.d);
    s.job.name = "rigid";
    s.job.argv = {"sleep", text};
    s.job.stdout_pattern = "/dev/null";
    s.job.min_pe = s.job.max_pe = j.p;
    s.job.walltime_s = static_cast<std::int64_t>(std::ceil(j.d)) + 1;
    return s;
  }
  // p x d processor-seconds over k_iters iterations.
  const long work_ms = std::lround(j.p * j.d * 1000 / k_iters);
  const std::string name = "jacobi" + std::to_string(index);
  s.job.name = name;
  s.job.argv = {"/bin/bash", "-c",
                std::string("exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY) +
                    k_grid_args + k_migrate_args + " --work-ms " + std::to_string(work_ms) + " --out " + (work / (name + ".grid")).string()};
  s.job.environment = mpi_environment();
  s.job.stdout_pattern = (work / (name + ".out")).string();
  s.job.adaptive = true;
  s.job.min_pe = (j.p + 1) / 2;
  s.job.max_pe = std::min(2 * j.p, 32);
  if (pref) {
    // As fsub --min m --max M --pref p gives it (one processor per rank).
    protocol::job_geometry g;
    g.ntasks = s.job.min_pe;
    g.pref_pe = j.p;
    s.job.geometry = g;
  }
  // At its minimum it runs up to twice as long, plus mpirun's start and its
  // resizes (seconds each on a loaded machine, whose time limit kills it).
  s.job.walltime_s = static_cast<std::int64_t>(std::ceil(2 * j.d)) + 30;
  return s;
}

// The reference grid: the same computation on 2 ranks of plain mpirun, never resized.
std::string reference_grid(const fs::path& dir) {
  const fs::path grid = dir / "reference.grid";
  std::vector<std::string> argv = {MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", "2", JACOBI2D_BINARY};
  std::stringstream args(k_grid_args);
  for (std::string a; args >> a;) argv.push_back(a);
  argv.push_back("--out");
  argv.push_back(grid.string());
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  bench::child mpirun(argv, dir / "reference.log");
  if (mpirun.wait() != 0) throw std::runtime_error("the reference jacobi2d run failed: see " + (dir / "reference.log").string());
  std::string bytes = bench::slurp(grid);
  if (bytes.size() != 64 * 48 * sizeof(double)) throw std::runtime_error("the reference grid has the wrong size");
  return bytes;
}

double load_average() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : -1;
}

// The machine's load while it lives: every 2 s the 1-minute load average,
// the runnable processes (/proc/loadavg's 4th field, vmstat's r less itself)
// and the CPU time busy since the last sample (/proc/stat: all but idle and
// iowait), as a summary in JSON.
class load_sampler {
public:
  load_sampler() : thread_([this] { run(); }) {}
  load_sampler(const load_sampler&) = delete;
  load_sampler& operator=(const load_sampler&) = delete;
  ~load_sampler() { stop(); }

  nlohmann::json summary() {
    stop();
    auto stats = [](std::vector<double> v) {
      if (v.empty()) return nlohmann::json{};
      double sum = 0;
      for (double x : v) sum += x;
      std::sort(v.begin(), v.end());
      return nlohmann::json{{"min", v.front()}, {"mean", sum / v.size()}, {"max", v.back()}};
    };
    return {{"samples", load_.size()}, {"interval_s", 2}, {"load_average_1m", stats(load_)},
            {"runnable", stats(runnable_)}, {"cpu_busy_pct", stats(busy_)}};
  }

private:
  struct cpu_times {
    double busy = 0, total = 0;
  };
  static cpu_times read_cpu() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    cpu_times t;
    double v = 0;
    for (int i = 0; i < 8 && in >> v; ++i) {
      t.total += v;
      if (i != 3 && i != 4) t.busy += v;  // idle, iowait
    }
    return t;
  }
  void sample(cpu_times& last) {
    std::ifstream in("/proc/loadavg");
    double l1 = 0, l5 = 0, l15 = 0;
    std::string procs;
    if (in >> l1 >> l5 >> l15 >> procs) {
      load_.push_back(l1);
      runnable_.push_back(std::atof(procs.substr(0, procs.find('/')).c_str()));
    }
    const cpu_times now = read_cpu();
    if (now.total > last.total) busy_.push_back(100 * (now.busy - last.busy) / (now.total - last.total));
    last = now;
  }
  void run() {
    cpu_times last = read_cpu();
    while (!stop_) {
      for (int i = 0; i < 20 && !stop_; ++i) std::this_thread::sleep_for(100ms);
      if (!stop_) sample(last);
    }
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  std::atomic<bool> stop_{false};
  std::vector<double> load_, runnable_, busy_;
  std::thread thread_;
};

nlohmann::json run_policy(const std::string& policy, const std::vector<mix_job>& mix, const std::string& reference,
                          bool pref) {
  const double load_before = load_average();
  load_sampler load;
  bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, k_nodes, k_procs_per_node, {"--policy", policy}});
  const fs::path work = sys.work();
  client::connection w(sys.socket());
  std::vector<protocol::submit> batch;
  for (std::size_t i = 0; i < mix.size(); ++i) batch.push_back(to_submit(w, mix[i], static_cast<int>(i), work, pref));
  std::int64_t first = 0;
  for (const auto& s : batch) {
    const auto id = w.call(s)["job_id"].get<std::int64_t>();
    if (first == 0) first = id;
  }
  bench::wait_idle(w, 1200s);
  const auto jobs = bench::jobs_after(w, first - 1);
  if (jobs.size() != mix.size()) throw std::runtime_error(policy + ": not every job is listed");

  double lo = 1e300, hi = 0;
  struct sums {
    double wait = 0, response = 0;
    int n = 0;
  } all, rigid, adaptive;
  int failed = 0, resized_jobs = 0, resizes = 0, identical = 0, different = 0;
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    const double sub = bench::iso_seconds(*j.submit_time);
    lo = std::min(lo, sub);
    if (j.state != core::job_state::completed || !j.start_time || !j.end_time) {
      ++failed;
      // Why, as aqsd recorded it, and the end of the job's output.
      const nlohmann::json hist = w.call(protocol::job_history{w.next_id(), j.id});
      const auto& events = hist.at("events");
      const std::string reason = events.empty() ? "" : events.back().value("reason", std::string());
      std::string out = mix[i].adaptive ? bench::slurp(work / (j.name + ".out")) : "";
      if (out.size() > 400) out = "..." + out.substr(out.size() - 400);
      problems.push_back("job " + std::to_string(j.id) + " (" + j.name + ") " + std::string(core::to_string(j.state)) +
                         ": " + reason + (out.empty() ? "" : "; output: " + out));
      continue;
    }
    const double start = bench::iso_seconds(*j.start_time), end = bench::iso_seconds(*j.end_time);
    hi = std::max(hi, end);
    for (sums* s : {&all, mix[i].adaptive ? &adaptive : &rigid}) {
      s->wait += start - sub;
      s->response += end - sub;
      ++s->n;
    }
    if (!mix[i].adaptive) continue;
    int n = 0;
    const nlohmann::json hist = w.call(protocol::job_history{w.next_id(), j.id});
    for (const auto& e : hist.at("events")) {
      const auto state = e.find("new_state"), before = e.find("old_state");
      // A resize: RUNNING -> RESIZING (the claim is RESIZING -> RESIZING).
      if (state != e.end() && before != e.end() && *state == "RESIZING" && *before == "RUNNING") ++n;
    }
    resizes += n;
    resized_jobs += n > 0 ? 1 : 0;
    if (bench::slurp(work / (j.name + ".grid")) == reference) {
      ++identical;
    } else {
      ++different;
      problems.push_back(j.name + ": grid differs from the unresized run");
    }
  }
  double ideal_work = 0;
  for (const auto& m : mix) ideal_work += m.p * m.d;
  const double ideal = ideal_work / k_procs, makespan = hi - lo;
  auto mean = [](double v, int n) { return n > 0 ? v / n : 0.0; };
  nlohmann::json r = {{"policy", policy},
                      {"jobs", mix.size()},
                      {"adaptive_jobs", adaptive.n},
                      {"failed", failed},
                      {"makespan_s", makespan},
                      {"ideal_s", ideal},
                      {"over_ideal_pct", (makespan / ideal - 1) * 100},
                      {"mean_wait_s", mean(all.wait, all.n)},
                      {"mean_response_s", mean(all.response, all.n)},
                      {"rigid_mean_response_s", mean(rigid.response, rigid.n)},
                      {"adaptive_mean_response_s", mean(adaptive.response, adaptive.n)},
                      {"adaptive_resized", resized_jobs},
                      {"resizes", resizes},
                      {"grids_identical", identical},
                      {"grids_different", different},
                      {"problems", problems},
                      {"load_average_before", load_before},
                      {"load_average_after", load_average()},
                      {"load", load.summary()}};
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  bench::stop_on_signals();
  options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_policy_mix: %s\n", e.what());
    return 2;
  }
  nlohmann::json results = {{"benchmark", "policy_mix"}, {"nodes", k_nodes}, {"procs", k_procs},
                            {"adaptive_every", o.adaptive_every}, {"rounds", o.rounds},
                            {"preferred_size", o.pref ? "declared: the mix's size p" : "none declared: the minimum"}};
  return bench::measure_and_write("policy_mix", results, [&](nlohmann::json& out) {
    const auto mix = make_mix(o.quick ? 40 : 200, o.adaptive_every);
    const fs::path tmp = fs::temp_directory_path() / ("aqs-policy-mix-" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    const std::string reference = reference_grid(tmp);
    fs::remove_all(tmp);
    std::printf("%5s %-17s %9s %8s %7s %9s %9s %9s %9s %8s %9s %17s\n", "round", "policy", "makespan", "ideal", "over",
                "mean wait", "mean resp", "rigid", "adaptive", "resizes", "identical", "load (max) busy");
    for (int round = 1; round <= o.rounds; ++round) {
      auto order = o.policies;
      if (round % 2 == 0) std::reverse(order.begin(), order.end());
      for (const auto& policy : order) {
        nlohmann::json r;
        try {
          r = run_policy(policy, mix, reference, o.pref);
        } catch (const std::exception& e) {
          // One run that could not be made (aqsd not up in time on a loaded
          // machine) is said and kept as such; the other runs go on.
          bench::throw_if_interrupted();
          std::printf("%5d %-17s failed: %s\n", round, policy.c_str(), e.what());
          out["failed_runs"].push_back({{"round", round}, {"policy", policy}, {"error", e.what()}});
          bench::write_results("policy_mix", out);
          continue;
        }
        r["round"] = round;
        const auto& load = r["load"];
        auto stat = [&](const char* what, const char* which) {
          return load[what].is_null() ? -1.0 : load[what][which].get<double>();
        };
        std::printf("%5d %-17s %8.1fs %7.1fs %6.1f%% %8.1fs %8.1fs %8.1fs %8.1fs %8d %5d/%-3d %5.1f (%5.1f) %3.0f%%\n",
                    round, policy.c_str(), r["makespan_s"].get<double>(), r["ideal_s"].get<double>(),
                    r["over_ideal_pct"].get<double>(), r["mean_wait_s"].get<double>(),
                    r["mean_response_s"].get<double>(),
                    r["rigid_mean_response_s"].get<double>(), r["adaptive_mean_response_s"].get<double>(),
                    r["resizes"].get<int>(), r["grids_identical"].get<int>(), r["adaptive_jobs"].get<int>(),
                    stat("load_average_1m", "mean"), stat("load_average_1m", "max"), stat("cpu_busy_pct", "mean"));
        for (const auto& p : r["problems"]) std::printf("  %s\n", p.get<std::string>().c_str());
        out["runs"].push_back(r);
        // Kept after every run, so that an interrupted session keeps what it measured.
        bench::write_results("policy_mix", out);
      }
    }
  });
}
