// bench_values: does a job flooding published values (AQS_Publish,
// aqs-publish) slow aqsd's other work? Starts aqsd (private, durable
// PostgreSQL) and one agent of 8 processors; a blocker job holds 7 of them.
// Then, three times: the latency of 300 synchronous submissions (jobs that
// queue, so that only the submission path is timed) while
//   - no one publishes;
//   - a job publishes 10,000 values a second (batches of 100 on its own
//     channel, as the shim sends them);
//   - a job publishes as fast as one connection can (16 batches in flight);
// with aqsd's CPU time over each phase and what the flooding job's values
// became (taken, dropped at aqsd's per-job cap).
// Prints a table and writes $AQS_BENCH_RESULTS/values.json.
//   bench_values [--quick]
// The flooding job is this program again: bench_values --flood RATE SECONDS
// (RATE 0: as fast as it can), run inside the job; it prints one JSON line.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
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
#include "client/client_connection.hpp"
#include "job_link.hpp"
#include "protocol/messages.hpp"

using clk = std::chrono::steady_clock;
using namespace aqs;
using namespace std::chrono_literals;

namespace {

double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

// Inside the job: publishes for `seconds` at `rate` values a second (0: as
// fast as the connection takes them), 100 a batch, at most 16 batches
// unanswered; prints {"sent", "accepted", "dropped", "seconds"}.
int flood(double rate, double seconds) {
  const auto where = runtime::control_address_from_env();
  if (!where) throw std::runtime_error("--flood runs inside an AQS job");
  runtime::job_link link = runtime::connect_job(*where, true, 1);
  std::atomic<std::int64_t> answered{0}, accepted{0}, dropped{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::vector<std::string> frames = std::move(link.early);
    char buf[65536];
    while (!done) {
      for (auto& f : frames) {
        const auto m = protocol::parse_message(f);
        if (const auto* ok = std::get_if<protocol::ok>(&m)) {
          accepted += ok->result.value("accepted", std::int64_t{0});
          dropped += ok->result.value("dropped", std::int64_t{0});
          ++answered;
        } else if (std::holds_alternative<protocol::error>(m)) {
          ++answered;
        }
      }
      frames.clear();
      const ssize_t n = ::recv(link.fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      link.decoder.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
    }
  });
  constexpr int k_batch = 100;
  constexpr std::int64_t k_window = 16;
  const auto t0 = clk::now();
  auto next = t0;
  const auto interval = rate > 0 ? std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(k_batch / rate))
                                 : clk::duration::zero();
  std::int64_t sent = 0, id = 2, batches = 0;
  while (since(t0) < seconds) {
    while (batches - answered.load() >= k_window) std::this_thread::sleep_for(100us);
    protocol::publish p;
    p.id = id++;
    p.job_id = where->job_id;
    for (int i = 0; i < k_batch; ++i) p.values.push_back({"flood", static_cast<double>(sent + i), std::nullopt});
    runtime::send_all(link.fd, protocol::encode(p));
    sent += k_batch;
    ++batches;
    if (rate > 0) {
      next += interval;
      std::this_thread::sleep_until(next);
    }
  }
  const double took = since(t0);
  const auto until = clk::now() + 10s;
  while (answered.load() < batches && clk::now() < until) std::this_thread::sleep_for(1ms);
  done = true;
  ::shutdown(link.fd, SHUT_RDWR);
  reader.join();
  std::printf("%s\n", nlohmann::json{{"sent", sent},
                                     {"accepted", accepted.load()},
                                     {"dropped", dropped.load()},
                                     {"seconds", took}}
                          .dump()
                          .c_str());
  return 0;
}

// aqsd's user + system CPU seconds so far.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; fields >> f; ++i) {
    if (i == 14) utime = std::stod(f);
    if (i == 15) {
      stime = std::stod(f);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

protocol::submit job(std::int64_t id, const std::string& work, std::vector<std::string> argv, std::int64_t procs,
                     const std::string& out = "/dev/null") {
  protocol::submit s;
  s.id = id;
  s.job.name = "bench-values";
  s.job.argv = std::move(argv);
  s.job.workdir = work;
  s.job.stdout_pattern = out;
  s.job.min_pe = s.job.max_pe = procs;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::signal(SIGPIPE, SIG_IGN);
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--flood" && i + 2 < argc) {
      try {
        return flood(std::stod(argv[i + 1]), std::stod(argv[i + 2]));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_values --flood: %s\n", e.what());
        return 1;
      }
    }
    if (a == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: bench_values [--quick]\n");
      return 2;
    }
  }
  aqs::bench::stop_on_signals();
  const int submissions = quick ? 100 : 300;
  const double flood_s = quick ? 8 : 20;
  nlohmann::json results = {{"benchmark", "values"}, {"submissions_per_phase", submissions}};
  return aqs::bench::measure_and_write("values", results, [&](nlohmann::json& r) {
    aqs::bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 1, 8, {}});
    const std::string work = sys.work().string();
    client::connection w(sys.socket());
    std::int64_t id = 1;
    w.call(job(id++, work, {"sleep", "3600"}, 7));  // the blocker: one processor left for the flooder
    std::printf("%-34s %12s %12s %12s %12s %12s\n", "publisher", "values/s", "taken/s", "submit p50", "submit p99",
                "aqsd CPU");
    struct phase {
      const char* name;
      double rate;  // -1: no publisher
    };
    for (const phase ph : {phase{"none", -1}, phase{"10,000 values/s", 10000}, phase{"as fast as it can", 0}}) {
      aqs::bench::throw_if_interrupted();
      std::int64_t flooder = 0;
      const auto out = sys.work() / ("flood-" + std::to_string(id) + ".out");
      if (ph.rate >= 0) {
        // This very program, by its absolute path (the job runs in `work`).
        const std::string self = std::filesystem::canonical("/proc/self/exe").string();
        flooder = w.call(job(id++, work, {self, "--flood", std::to_string(ph.rate), std::to_string(flood_s)}, 1,
                             out.string()))["job_id"];
        // Until it runs and publishes.
        const auto until = clk::now() + 30s;
        while (clk::now() < until) {
          protocol::list_jobs l;
          l.id = id++;
          l.job_ids = {flooder};
          l.all = true;
          const auto jobs = w.ask(l).jobs;
          if (!jobs.empty() && jobs[0].state == core::job_state::running) break;
          if (clk::now() + 50ms >= until) throw std::runtime_error("the flooding job did not start within 30 s");
          std::this_thread::sleep_for(50ms);
        }
        std::this_thread::sleep_for(1s);
      }
      const double cpu0 = cpu_seconds(sys.aqsd_pid());
      const auto t0 = clk::now();
      std::vector<double> lat;
      std::vector<std::int64_t> queued;
      for (int i = 0; i < submissions; ++i) {
        const auto s0 = clk::now();
        queued.push_back(w.call(job(id++, work, {"true"}, 8))["job_id"]);  // queues: the blocker holds 7 of 8
        lat.push_back(since(s0) * 1000.0);
      }
      {
        // Out of the way of the next phase's flooder (they would queue ahead of it).
        protocol::cancel c;
        c.id = id++;
        c.job_ids = queued;
        w.call(c);
      }
      const double wall = since(t0);
      const double cpu = (cpu_seconds(sys.aqsd_pid()) - cpu0) / wall;
      nlohmann::json flood = nullptr;
      if (flooder > 0) {
        // The flooder's own report once it is done.
        const auto until = clk::now() + std::chrono::duration<double>(flood_s + 30);
        while (clk::now() < until && aqs::bench::slurp(out).find("accepted") == std::string::npos) {
          std::this_thread::sleep_for(100ms);
        }
        const std::string said = aqs::bench::slurp(out);
        if (said.find("accepted") == std::string::npos) throw std::runtime_error("the flooding job said: " + said);
        flood = nlohmann::json::parse(said.substr(said.find('{')));
      }
      const double sent_s = flood.is_null() ? 0 : flood["sent"].get<double>() / flood["seconds"].get<double>();
      const double taken_s = flood.is_null() ? 0 : flood["accepted"].get<double>() / flood["seconds"].get<double>();
      const double p50 = aqs::bench::median(lat), p99 = aqs::bench::pct(lat, 0.99);
      std::printf("%-34s %12.0f %12.0f %9.2f ms %9.2f ms %10.0f %%\n", ph.name, sent_s, taken_s, p50, p99, cpu * 100);
      r["phases"].push_back({{"publisher", ph.name},
                             {"values_per_s_sent", sent_s},
                             {"values_per_s_taken", taken_s},
                             {"flood", flood},
                             {"submit_ms_p50", p50},
                             {"submit_ms_p99", p99},
                             {"submit_ms_max", *std::max_element(lat.begin(), lat.end())},
                             {"aqsd_cpu_fraction", cpu}});
      if (flooder > 0) {
        protocol::cancel c;
        c.id = id++;
        c.job_ids = {flooder};
        try {
          w.call(c);
        } catch (const std::exception&) {
          // It ended by itself after its flood: nothing to cancel.
        }
      }
    }
  });
}
