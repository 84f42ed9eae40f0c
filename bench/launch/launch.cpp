// bench_launch: how long an MPI job takes to start under AQS, against plain
// mpirun started by hand on the same machine. A real aqsd (private
// PostgreSQL) and one aqs-node advertising 32 processors on this machine's
// cores; a rigid job of N processors whose script is a plain `mpirun
// launch_app` (the agent's hostfile and rankfile place and bind the ranks).
// Measured: from just before the submission to the moment the last rank's
// MPI_Init returned (each rank prints its wall clock), for N = 8 and 32
// (oversubscribed), --reps times each; and the same from just before
// starting `mpirun -np N --oversubscribe launch_app` by hand.
// Prints a table and writes $AQS_BENCH_RESULTS/launch.json.
//   bench_launch [--reps N]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
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

// The latest "init RANK US" in `text`, in ms since the epoch; throws unless
// exactly `ranks` ranks reported.
double last_init_ms(const std::string& text, int ranks) {
  std::istringstream in(text);
  int seen = 0;
  long long latest = 0;
  for (std::string line; std::getline(in, line);) {
    int r = 0;
    long long us = 0;
    if (std::sscanf(line.c_str(), "init %d %lld", &r, &us) == 2) {
      ++seen;
      latest = std::max(latest, us);
    }
  }
  if (seen != ranks) throw std::runtime_error(std::to_string(seen) + " of " + std::to_string(ranks) + " ranks reported:\n" + text);
  return static_cast<double>(latest) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int reps = 10;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_launch [--reps N]\n");
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "bench_launch: --reps must be positive\n");
    return 2;
  }
  nlohmann::json results = {{"benchmark", "launch"}, {"reps", reps}};
  try {
    bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 1, 32, {}});
    const fs::path work = sys.work();
    client::connection w(sys.socket());
    std::vector<std::string> env{"OMPI_MCA_btl_vader_single_copy_mechanism=none"};
    for (const char* k : {"PATH", "HOME", "LANG"}) {
      if (const char* v = std::getenv(k)) env.push_back(std::string(k) + "=" + v);
    }
    std::printf("%-52s %10s %10s %10s\n", "submission (or mpirun) to the last MPI_Init, ms", "median", "min", "max");
    for (int ranks : {8, 32}) {
      std::vector<double> aqs, plain;
      for (int r = 0; r < reps; ++r) {
        // Under AQS.
        const fs::path out = work / ("aqs-" + std::to_string(ranks) + "-" + std::to_string(r) + ".out");
        protocol::submit s;
        s.id = w.next_id();
        s.job.name = "launch";
        s.job.argv = {MPIEXEC, LAUNCH_APP};
        s.job.workdir = work.string();
        s.job.environment = env;
        s.job.stdout_pattern = out.string();
        s.job.min_pe = s.job.max_pe = ranks;
        const double t0 = now_ms();
        const auto id = w.call(s)["job_id"].get<std::int64_t>();
        bench::wait_idle(w, 120s);
        const auto jobs = bench::jobs_after(w, id - 1);
        if (jobs.empty() || jobs.front().state != core::job_state::completed) {
          throw std::runtime_error("the job failed:\n" + slurp(out));
        }
        aqs.push_back(last_init_ms(slurp(out), ranks) - t0);
        // By hand.
        const fs::path hand = work / ("plain-" + std::to_string(ranks) + "-" + std::to_string(r) + ".out");
        const std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                "OMPI_MCA_btl_vader_single_copy_mechanism=none " MPIEXEC
                                " --oversubscribe --bind-to none -np " +
                                std::to_string(ranks) + " " LAUNCH_APP " > " + hand.string() + " 2>&1";
        const double t1 = now_ms();
        if (std::system(cmd.c_str()) != 0) throw std::runtime_error("plain mpirun failed:\n" + slurp(hand));
        plain.push_back(last_init_ms(slurp(hand), ranks) - t1);
      }
      auto row = [&](const std::string& what, const std::vector<double>& v, const char* key) {
        const double med = bench::median(v), lo = *std::min_element(v.begin(), v.end()),
                     hi = *std::max_element(v.begin(), v.end());
        std::printf("%-52s %10.1f %10.1f %10.1f\n", what.c_str(), med, lo, hi);
        results[key][std::to_string(ranks)] = {{"median", med}, {"min", lo}, {"max", hi}};
      };
      row(std::to_string(ranks) + " ranks, 1 host: AQS (submit to MPI_Init)", aqs, "aqs_ms");
      row(std::to_string(ranks) + " ranks, 1 host: plain mpirun", plain, "plain_mpirun_ms");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_launch: %s\n", e.what());
    return 1;
  }
  const char* out_dir = std::getenv("AQS_BENCH_RESULTS");
  const fs::path out = fs::path(out_dir ? out_dir : "bench/results") / "launch.json";
  fs::create_directories(out.parent_path());
  std::ofstream(out) << results.dump(2) << "\n";
  std::printf("results: %s\n", out.c_str());
  return 0;
}
