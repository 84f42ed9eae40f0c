// bench_fairness: one user cannot starve the others (issue 28). Starts aqsd
// (private, durable PostgreSQL) and one agent of 4 virtual processors, runs
// a job that sleeps, and then submits a 100,000-task array behind it
// (afterok) in one request, as `fsub --array 0-99999` sends it. Meanwhile,
// as another user (nobody), it runs the real `fjobs -u nobody --json` and
// `fsub --wrap true` commands one after the other and times each, start of
// the process to its exit, and samples aqsd's resident memory (VmRSS).
// The same probes with nothing else going on are the baseline. aqsd also
// serves its HTTP API (--http 127.0.0.1:0): each probe adds that user's
// authenticated GET /api/v1/jobs (a token from ftoken run as nobody), on a
// fresh connection, timed from connect to the end of the answer.
// Prints a table and writes $AQS_BENCH_RESULTS/fairness.json.
//   bench_fairness [--quick]   (--quick: 20,000 tasks)
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"

#include "bench_probe.hpp"
#include "bench_system.hpp"
#include "raw_peer.hpp"

using clk = std::chrono::steady_clock;
using namespace aqs;
using namespace std::chrono_literals;

namespace {

constexpr uid_t k_other_uid = 65534;  // nobody: the other user
constexpr gid_t k_other_gid = 65534;

double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

// Runs argv as the other user, output discarded; its exit status and how
// long it took, in ms.
std::pair<int, double> timed_run(const std::vector<std::string>& argv) {
  const auto t0 = clk::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(k_other_gid) != 0 || ::setuid(k_other_uid) != 0) ::_exit(126);
    if (::chdir("/tmp") != 0) ::_exit(126);
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), ms_since(t0)};
}

// argv run as the other user; its stdout's last line, or throws.
std::string last_line(const std::vector<std::string>& argv) {
  return bench::last_line(bench::run_as(k_other_uid, k_other_gid, argv, "/tmp"));
}

struct probes {
  std::vector<double> fjobs, fsub, get;
  int failed = 0;
  int get_failed = 0;  // GETs not answered 200
};

int http_port = 0;          // aqsd's HTTP port
std::string other_token;    // the other user's bearer token

void probe_once(probes& p, const std::string& socket) {
  const auto [a, ta] = timed_run({AQS_FJOBS_BINARY, "--socket", socket, "--json", "-u", "nobody"});
  if (a == 0) p.fjobs.push_back(ta); else ++p.failed;
  const auto [b, tb] = timed_run({AQS_FSUB_BINARY, "--socket", socket, "-o", "/dev/null", "-D", "/tmp", "--wrap", "true"});
  if (b == 0) p.fsub.push_back(tb); else ++p.failed;
  const auto t0 = clk::now();
  const unsigned status = bench::http_get(http_port, other_token, "/api/v1/jobs");
  p.get.push_back(ms_since(t0));
  if (status != 200) ++p.get_failed;
}

nlohmann::json summary(const probes& p) {
  return {{"fjobs_median_ms", bench::median(p.fjobs)}, {"fjobs_p99_ms", bench::pct(p.fjobs, 0.99)},
          {"fsub_median_ms", bench::median(p.fsub)},   {"fsub_p99_ms", bench::pct(p.fsub, 0.99)},
          {"fjobs_runs", p.fjobs.size()},              {"fsub_runs", p.fsub.size()},
          {"failed", p.failed},
          {"get_jobs_median_ms", bench::median(p.get)}, {"get_jobs_p99_ms", bench::pct(p.get, 0.99)},
          {"get_jobs_runs", p.get.size()},              {"get_jobs_not_200", p.get_failed}};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int tasks = quick ? 20'000 : 100'000;
  bench::stop_on_signals();
  nlohmann::json results = nlohmann::json::object();
  try {
    const bench::system::options o{
        .aqsd = AQS_AQSD_BINARY, .aqs_node = AQS_NODE_BINARY, .nodes = 1, .procs_per_node = 4,
        .aqsd_args = {"--http", "127.0.0.1:0"}};
    bench::system sys(o);
    http_port = sys.http_port();
    other_token = last_line({AQS_FTOKEN_BINARY, "--socket", sys.socket()});
    const pid_t aqsd = bench::find_process("aqsd", sys.dir().string());
    if (aqsd < 0) throw std::runtime_error("cannot find aqsd's pid");
    client::connection w(sys.socket(), 900s);
    const std::string work = sys.work().string();
    std::int64_t rid = 1;
    // The job the array waits for: it sleeps through the benchmark.
    protocol::submit dep;
    dep.id = rid++;
    dep.job.name = "sleeper";
    dep.job.argv = {"sleep", "3600"};
    dep.job.workdir = work;
    dep.job.stdout_pattern = "/dev/null";
    const std::int64_t dep_id = w.call(dep)["job_id"].get<std::int64_t>();

    probes idle;
    for (int i = 0; i < 20; ++i) probe_once(idle, sys.socket());
    const double rss_before = bench::rss_mb(aqsd);

    protocol::submit big;
    big.id = rid++;
    big.job.name = "big-array";
    big.job.argv = {"true"};
    big.job.workdir = work;
    big.job.stdout_pattern = "/dev/null";
    big.job.afterok = {dep_id};
    big.job.submit_token = "bench-fairness-array";
    protocol::job_geometry g;
    g.array = "0-" + std::to_string(tasks - 1);
    big.job.geometry = g;
    std::atomic<bool> done{false};
    double reply_s = 0;
    std::string big_error;
    std::thread submitter([&] {
      const auto t0 = clk::now();
      try {
        client::connection c(sys.socket(), 900s);
        c.call(big);
      } catch (const std::exception& e) {
        big_error = e.what();
      }
      reply_s = ms_since(t0) / 1000.0;
      done = true;
    });
    probes during;
    double rss_peak = rss_before;
    while (!done) {
      probe_once(during, sys.socket());
      rss_peak = std::max(rss_peak, bench::rss_mb(aqsd));
    }
    submitter.join();
    if (!big_error.empty()) throw std::runtime_error("the array was refused: " + big_error);
    const double rss_after = bench::rss_mb(aqsd);
    probes after;
    for (int i = 0; i < 20; ++i) probe_once(after, sys.socket());

    std::printf("%d-task array behind a running job: answered in %.2f s\n\n", tasks, reply_s);
    std::printf("%-28s %10s %10s %10s %10s %10s %10s %8s %6s\n", "another user's commands", "fjobs p50", "fjobs p99",
                "fsub p50", "fsub p99", "GET p50", "GET p99", "GET !200", "runs");
    auto row = [](const char* what, const probes& p) {
      std::printf("%-28s %8.1fms %8.1fms %8.1fms %8.1fms %8.1fms %8.1fms %8d %6zu\n", what, bench::median(p.fjobs),
                  bench::pct(p.fjobs, 0.99), bench::median(p.fsub), bench::pct(p.fsub, 0.99), bench::median(p.get),
                  bench::pct(p.get, 0.99), p.get_failed, p.fjobs.size() + p.fsub.size() + p.get.size());
    };
    row("idle", idle);
    row("during the array", during);
    row("with the array pending", after);
    std::printf("\naqsd VmRSS: %.0f MB before, %.0f MB at most during, %.0f MB after (failed probes: %d)\n", rss_before,
                rss_peak, rss_after, idle.failed + during.failed + after.failed);
    results["array_tasks"] = tasks;
    results["array_reply_s"] = reply_s;
    results["idle"] = summary(idle);
    results["during"] = summary(during);
    results["after"] = summary(after);
    results["aqsd_rss_mb_before"] = rss_before;
    results["aqsd_rss_mb_peak"] = rss_peak;
    results["aqsd_rss_mb_after"] = rss_after;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fairness: %s\n", e.what());
    return 1;
  }
  bench::write_results("fairness", results);
  return 0;
}
