// bench_daemon: the running system end to end. Starts aqsd (private, durable
// PostgreSQL) and four aqs-node agents advertising 16 virtual processors each
// (64 in all), then measures, through the wire protocol as clients see it:
//   - durable submissions/s with 1, 4 and 16 synchronous clients (API), of
//     jobs that queue and of trivial jobs that run at once;
//   - submissions/s of `fsub --wrap true` in a shell loop;
//   - submit-to-running and submit-to-done latency of a single trivial job;
//   - the time to run 1,000 trivial jobs on the 64 processors;
//   - a mix of 200 jobs of 1..32 processors sleeping 0.5..3 s: makespan
//     against the ideal (total work / 64) and the mean wait.
// Prints a table and writes $AQS_BENCH_RESULTS/daemon.json.
//   bench_daemon [--quick] [--only api|fsub|latency|trivial|mix]
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "protocol/messages.hpp"
#include "protocol/results.hpp"

#include "bench_system.hpp"

using clk = std::chrono::steady_clock;
using namespace aqs;
using aqs::bench::iso_seconds;
using aqs::bench::jobs_after;
using aqs::bench::median;
using aqs::bench::pct;
using aqs::bench::wait_idle;
using namespace std::chrono_literals;

namespace {

double seconds_since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

using wire = client::connection;

protocol::submit trivial(std::int64_t id, const std::string& workdir, std::vector<std::string> argv = {"true"},
                         std::int64_t procs = 1, std::optional<std::int64_t> walltime = std::nullopt) {
  protocol::submit s;
  s.id = id;
  s.job.name = "bench";
  s.job.argv = std::move(argv);
  s.job.workdir = workdir;
  s.job.stdout_pattern = "/dev/null";
  s.job.min_pe = s.job.max_pe = procs;
  s.job.walltime_s = walltime;
  return s;
}

std::int64_t submit(wire& w, const protocol::submit& s) { return w.call(s)["job_id"].get<std::int64_t>(); }

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_daemon [--quick] [--only api|fsub|latency|trivial|mix]\n");
      return 2;
    }
  }
  auto wanted = [&](const char* name) { return only.empty() || only == name; };
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::signal(SIGPIPE, SIG_IGN);
  nlohmann::json results = {{"benchmark", "daemon"}, {"nodes", 4}, {"procs", 64}};
  try {
    aqs::bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 4, 16, {}});
    const std::string sock = sys.socket();
    const std::string work = sys.work().string();
    wire w(sock);
    const passwd* pw = ::getpwuid(::geteuid());
    const std::string me = pw != nullptr ? pw->pw_name : std::to_string(::geteuid());
    std::printf("%-52s %12s %s\n", "measurement", "value", "unit");
    auto row = [](const char* what, double v, const char* unit) { std::printf("%-52s %12.1f %s\n", what, v, unit); };

    // 1. API submission rate, synchronous clients: into the queue (jobs
    // wider than the cluster, so only the submission path is measured, then
    // cancelled), and of trivial jobs that run at once on the same 2 cores.
    for (const bool run : {false, true}) {
      if (!wanted("api")) break;
      for (int clients : {1, 4, 16}) {
        const int per = quick ? 200 : (clients == 1 ? 1000 : 8000 / clients);
        const auto t0 = clk::now();
        std::vector<std::thread> ts;
        std::atomic<int> failures{0};
        for (int c = 0; c < clients; ++c) {
          ts.emplace_back([&, per] {
            try {
              wire cw(sock);
              for (int i = 0; i < per; ++i) submit(cw, trivial(i + 1, work, {"true"}, run ? 1 : 65));
            } catch (const std::exception& e) {
              std::fprintf(stderr, "client: %s\n", e.what());
              ++failures;
            }
          });
        }
        for (auto& t : ts) t.join();
        const double rate = clients * per / seconds_since(t0);
        const std::string label = std::string("API submissions ") + (run ? "(jobs run at once), " : "(queued), ") +
                                  std::to_string(clients) + " client(s)";
        row(label.c_str(), rate, "jobs/s");
        results[run ? "api_submit_running_per_s" : "api_submit_queued_per_s"][std::to_string(clients)] = rate;
        if (failures) throw std::runtime_error("submission clients failed");
        if (!run) {
          protocol::cancel all;
          all.id = 77;
          all.user = me;
          w.call(all);
        }
        wait_idle(w, 120s);
      }
    }

    // 2. fsub in a shell loop.
#ifdef AQS_FSUB_BINARY
    if (wanted("fsub")) {
      const int n = quick ? 100 : 500;
      const std::string cmd = "export AQS_SOCKET=" + sock + "; cd " + work + "; for i in $(seq " + std::to_string(n) +
                              "); do " AQS_FSUB_BINARY " -o /dev/null --wrap true >/dev/null || exit 1; done";
      const auto t0 = clk::now();
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("the fsub loop failed");
      const double rate = n / seconds_since(t0);
      row("fsub --wrap true in a shell loop", rate, "jobs/s");
      results["fsub_loop_per_s"] = rate;
      wait_idle(w, 120s);
    }
#endif

    // 3. Latency of one job at a time.
    if (wanted("latency")) {
      std::vector<double> to_running, to_done;
      const int n = quick ? 30 : 200;
      for (int i = 0; i < n; ++i) {
        const auto t0 = clk::now();
        const auto id = submit(w, trivial(10 + i, work));
        w.send(protocol::watch_job{5, id});
        bool done = false;
        while (!done) {
          const auto next = w.next(std::nullopt);
          if (!next) continue;
          const protocol::message& m = *next;
          if (const auto* e = std::get_if<protocol::job_event>(&m)) {
            if (e->state == core::job_state::running && to_running.size() < static_cast<std::size_t>(i + 1)) {
              to_running.push_back(seconds_since(t0) * 1e3);
            }
            if (core::is_final(e->state)) {
              to_done.push_back(seconds_since(t0) * 1e3);
              done = true;
            }
          }
        }
      }
      row("submit to running, median", median(to_running), "ms");
      row("submit to done, median", median(to_done), "ms");
      row("submit to done, 90th percentile", pct(to_done, 0.9), "ms");
      results["latency_ms"] = {{"to_running_median", median(to_running)},
                               {"to_done_median", median(to_done)},
                               {"to_done_p90", pct(to_done, 0.9)}};
    }

    // 4. 1,000 trivial jobs on 64 processors.
    if (wanted("trivial")) {
      const int n = quick ? 200 : 1000;
      const auto first = submit(w, trivial(1, work));
      const auto t0 = clk::now();
      std::vector<std::thread> ts;
      for (int c = 0; c < 8; ++c) {
        ts.emplace_back([&, c] {
          wire cw(sock);
          for (int i = c; i < n - 1; i += 8) submit(cw, trivial(i + 1, work));
        });
      }
      for (auto& t : ts) t.join();
      wait_idle(w, 300s);
      const double wall = seconds_since(t0);
      const auto jobs = jobs_after(w, first - 1);
      double lo = 1e300, hi = 0;
      std::size_t completed = 0;
      for (const auto& j : jobs) {
        lo = std::min(lo, iso_seconds(*j.submit_time));
        if (j.end_time) hi = std::max(hi, iso_seconds(*j.end_time));
        completed += j.state == core::job_state::completed;
      }
      const std::string label = std::to_string(n) + " trivial jobs on 64 processors, first submit to last end";
      row(label.c_str(), hi - lo, "s");
      results["trivial_jobs"] = {{"jobs", n}, {"makespan_s", hi - lo}, {"wall_s", wall}, {"completed", completed}};
      if (completed != static_cast<std::size_t>(n)) throw std::runtime_error("not every trivial job completed");
    }

    // 5. 200 jobs of 1..32 processors sleeping 0.5..3 s.
    if (wanted("mix")) {
      const int n = quick ? 40 : 200;
      std::mt19937_64 rng(1);
      std::uniform_int_distribution<int> size(1, 32);
      std::uniform_real_distribution<double> secs(0.5, 3.0);
      std::vector<protocol::submit> batch;
      double work_total = 0;
      for (int i = 0; i < n; ++i) {
        const int p = size(rng);
        const double d = std::round(secs(rng) * 100) / 100;
        work_total += p * d;
        char text[32];
        std::snprintf(text, sizeof text, "%.2f", d);
        batch.push_back(trivial(i + 1, work, {"sleep", text}, p, static_cast<std::int64_t>(std::ceil(d)) + 1));
      }
      std::int64_t first = 0;
      for (const auto& s : batch) {
        const auto id = submit(w, s);
        if (first == 0) first = id;
      }
      wait_idle(w, 600s);
      const auto jobs = jobs_after(w, first - 1);
      double lo = 1e300, hi = 0, wait = 0;
      for (const auto& j : jobs) {
        const double sub = iso_seconds(*j.submit_time);
        lo = std::min(lo, sub);
        if (j.end_time) hi = std::max(hi, iso_seconds(*j.end_time));
        if (j.start_time) wait += iso_seconds(*j.start_time) - sub;
      }
      const double ideal = work_total / 64;
      const double makespan = hi - lo;
      row("200-job mix: makespan", makespan, "s");
      row("200-job mix: ideal (total work / 64)", ideal, "s");
      row("200-job mix: over the ideal", (makespan / ideal - 1) * 100, "%");
      row("200-job mix: mean wait", wait / static_cast<double>(jobs.size()), "s");
      results["mix"] = {{"jobs", n},
                        {"makespan_s", makespan},
                        {"ideal_s", ideal},
                        {"over_ideal_pct", (makespan / ideal - 1) * 100},
                        {"mean_wait_s", wait / static_cast<double>(jobs.size())}};
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_daemon: %s\n", e.what());
    return 1;
  }
  aqs::bench::write_results("daemon", results);
  return 0;
}
