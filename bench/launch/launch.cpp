// bench_launch: how long an MPI job takes to start under AQS, against plain
// mpirun started by hand on the same hosts. A real aqsd (private PostgreSQL)
// and its agents; a rigid job of N processors whose script is a plain
// `mpirun launch_app` (the agent's hostfile and rankfile place and bind the
// ranks). Measured: from just before the submission to the moment the last
// rank's MPI_Init returned (each rank prints its wall clock and host), for
// N = 8 and 32 (oversubscribed on this machine's cores), --reps times each;
// and the same from just before starting `mpirun -np N --oversubscribe
// launch_app` by hand. Two layouts:
//   1 host: one agent on this machine advertising 32 processors; mpirun by
//     hand on this machine.
//   4 hosts (testbed/netns_hosts, needs root): one agent per namespace host
//     advertising N/4 processors (a cluster per N), so the job has N/4 ranks
//     on each host, its mpirun on the first and daemons on the others
//     through aqs-rsh; by hand: mpirun on host0 with a hostfile of N/4 slots
//     per host and a launch agent script that enters the host's namespaces
//     (no ssh here).
// Every run must have all N ranks report, N/hosts on each host.
// --plain-bind POLICY gives mpirun by hand `--bind-to POLICY` instead of
// none (hwthread:overload-allowed binds like the agent's rankfile: the
// difference that binding makes, apart from AQS's own cost).
// Prints a table and writes $AQS_BENCH_RESULTS/launch.json.
//   bench_launch [--reps N] [--hosts 1|4] [--plain-bind POLICY]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_system.hpp"
#include "protocol/messages.hpp"
#include "protocol/results.hpp"

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;
using aqs::bench::slurp;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The latest "init RANK US HOST" in `text`, in ms since the epoch; throws
// unless exactly `ranks` ranks reported, `ranks / hosts` on each of `hosts`
// hosts.
double last_init_ms(const std::string& text, int ranks, int hosts) {
  std::istringstream in(text);
  int seen = 0;
  long long latest = 0;
  std::map<std::string, int> per_host;
  for (std::string line; std::getline(in, line);) {
    int r = 0;
    long long us = 0;
    char host[256] = {};
    if (std::sscanf(line.c_str(), "init %d %lld %255s", &r, &us, host) == 3) {
      ++seen;
      ++per_host[host];
      latest = std::max(latest, us);
    }
  }
  if (seen != ranks) {
    throw std::runtime_error(std::to_string(seen) + " of " + std::to_string(ranks) + " ranks reported:\n" + text);
  }
  const bool spread = static_cast<int>(per_host.size()) == hosts &&
                      std::all_of(per_host.begin(), per_host.end(),
                                  [&](const auto& h) { return h.second == ranks / hosts; });
  if (!spread) {
    throw std::runtime_error("the ranks did not run " + std::to_string(ranks / hosts) + " on each of " +
                             std::to_string(hosts) + " hosts:\n" + text);
  }
  return static_cast<double>(latest) / 1000.0;
}

struct samples {
  std::vector<double> aqs, plain;
};

// `reps` times: an N-rank rigid job under AQS on `sys`, then plain mpirun by
// hand on the same hosts (this machine, or host0 of sys.hosts() starting its
// daemons on the others through a launch agent script), binding its ranks
// with --bind-to `plain_bind`.
samples measure(bench::system& sys, int ranks, int reps, const std::string& plain_bind) {
  const fs::path work = sys.work();
  const testbed::netns_hosts* hosts = sys.hosts();
  const int n_hosts = hosts ? hosts->size() : 1;
  const std::string tag = std::to_string(n_hosts) + "h-" + std::to_string(ranks);
  client::connection w(sys.socket());
  std::vector<std::string> env{"OMPI_MCA_btl_vader_single_copy_mechanism=none"};
  for (const char* k : {"PATH", "HOME", "LANG"}) {
    if (const char* v = std::getenv(k)) env.push_back(std::string(k) + "=" + v);
  }
  std::string plain_env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                          "OMPI_MCA_btl_vader_single_copy_mechanism=none ";
  std::string plain_args = " --oversubscribe --bind-to " + plain_bind;
  if (hosts) {
    const fs::path agent = sys.dir() / "netns-rsh";
    const fs::path hostfile = work / ("hosts-" + tag);
    hosts->write_rsh_agent(agent);
    std::string slots;
    for (int i = 0; i < n_hosts; ++i) slots += hosts->name(i) + " slots=" + std::to_string(ranks / n_hosts) + "\n";
    std::ofstream(hostfile) << slots;
    // What the agent's environment gives a job on several hosts, with our
    // launch agent instead of aqs-rsh; and OpenMPI's traffic on the bridge.
    plain_env += "OMPI_MCA_plm_rsh_agent=" + agent.string() + " OMPI_MCA_plm_rsh_no_tree_spawn=1 " +
                 "OMPI_MCA_btl_tcp_if_include=" + hosts->subnet() + " OMPI_MCA_oob_tcp_if_include=" +
                 hosts->subnet() + " ";
    plain_args += " --hostfile " + hostfile.string();
  }
  samples s;
  for (int r = 0; r < reps; ++r) {
    // Under AQS.
    const fs::path out = work / ("aqs-" + tag + "-" + std::to_string(r) + ".out");
    protocol::submit sub;
    sub.id = w.next_id();
    sub.job.name = "launch";
    sub.job.argv = {MPIEXEC, LAUNCH_APP};
    sub.job.workdir = work.string();
    sub.job.environment = env;
    sub.job.stdout_pattern = out.string();
    sub.job.min_pe = sub.job.max_pe = ranks;
    const double t0 = now_ms();
    const auto id = w.call(sub)["job_id"].get<std::int64_t>();
    bench::wait_idle(w, 120s);
    const auto jobs = bench::jobs_after(w, id - 1);
    if (jobs.empty() || jobs.front().state != core::job_state::completed) {
      throw std::runtime_error("the job failed:\n" + slurp(out));
    }
    s.aqs.push_back(last_init_ms(slurp(out), ranks, n_hosts) - t0);
    // By hand.
    const fs::path hand = work / ("plain-" + tag + "-" + std::to_string(r) + ".out");
    std::vector<std::string> argv{"/bin/sh", "-c",
                                  plain_env + MPIEXEC + plain_args + " -np " + std::to_string(ranks) + " " LAUNCH_APP};
    if (hosts) argv = hosts->on_host(0, argv);
    const double t1 = now_ms();
    bench::child plain(argv, hand);
    if (plain.wait() != 0) throw std::runtime_error("plain mpirun failed:\n" + slurp(hand));
    s.plain.push_back(last_init_ms(slurp(hand), ranks, n_hosts) - t1);
  }
  return s;
}

// Prints the rows of one layout and rank count and records them under
// results["aqs<suffix>_ms"][ranks] and results["plain_mpirun<suffix>_ms"][ranks].
void report(nlohmann::json& results, const std::string& layout, const std::string& suffix, int ranks,
            const samples& s) {
  auto row = [&](const std::string& what, const std::vector<double>& v, const std::string& key) {
    const double med = bench::median(v), lo = *std::min_element(v.begin(), v.end()),
                 hi = *std::max_element(v.begin(), v.end());
    std::printf("%-52s %10.1f %10.1f %10.1f\n", what.c_str(), med, lo, hi);
    results[key + suffix + "_ms"][std::to_string(ranks)] = {{"median", med}, {"min", lo}, {"max", hi}};
  };
  const std::string head = std::to_string(ranks) + " ranks, " + layout + ": ";
  row(head + "AQS (submit to MPI_Init)", s.aqs, "aqs");
  row(head + "plain mpirun", s.plain, "plain_mpirun");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int reps = 10;
  std::vector<int> layouts{1, 4};
  std::string plain_bind = "none";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--hosts" && i + 1 < argc && (std::string(argv[i + 1]) == "1" || std::string(argv[i + 1]) == "4")) {
      layouts = {std::atoi(argv[++i])};
    } else if (a == "--plain-bind" && i + 1 < argc) {
      plain_bind = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_launch [--reps N] [--hosts 1|4] [--plain-bind POLICY]\n");
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "bench_launch: --reps must be positive\n");
    return 2;
  }
  // Ctrl-C must still stop aqsd and the agents and remove the namespaces.
  bench::stop_on_signals();
  nlohmann::json results = {{"benchmark", "launch"}, {"reps", reps}, {"plain_bind_to", plain_bind}};
  try {
    std::printf("%-52s %10s %10s %10s\n", "submission (or mpirun) to the last MPI_Init, ms", "median", "min", "max");
    if (std::find(layouts.begin(), layouts.end(), 1) != layouts.end()) {
      bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 1, 32, {}});
      for (int ranks : {8, 32}) report(results, "1 host", "", ranks, measure(sys, ranks, reps, plain_bind));
    }
    if (std::find(layouts.begin(), layouts.end(), 4) != layouts.end()) {
      if (!testbed::netns_hosts::available()) {
        std::printf("4 hosts: skipped (the namespace hosts need root and ip netns)\n");
      } else {
        for (int ranks : {8, 32}) {
          bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 4, ranks / 4, {}, true});
          const samples s = measure(sys, ranks, reps, plain_bind);
          report(results, "4 hosts x " + std::to_string(ranks / 4), "_4_hosts", ranks, s);
          results["ranks_per_host_4_hosts"][std::to_string(ranks)] = ranks / 4;
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_launch: %s\n", e.what());
    return 1;
  }
  bench::write_results("launch", results);
  return 0;
}
