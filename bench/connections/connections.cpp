// bench_connections: what one local user holding thousands of idle
// connections costs everyone else: another user's `fjobs --json` latency
// (median of 30 runs) and aqsd's resident memory before the flood, during it
// and once the flood's connections are closed.
//   bench_connections [--connections N] [--runs N]
// Needs root (it makes two throwaway users, removed at the end). Prints a
// table and writes $AQS_BENCH_RESULTS/connections.json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <grp.h>
#include <pwd.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_probe.hpp"
#include "bench_system.hpp"
#include "raw_peer.hpp"

using namespace aqs;
using namespace std::chrono_literals;

namespace {

// fjobs --json as `u`, its output dropped; wall milliseconds.
double time_fjobs(const bench::bench_user& u, const std::string& socket) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDOUT_FILENO);
    if (::setgroups(0, nullptr) != 0 || ::setgid(u.gid) != 0 || ::setuid(u.uid) != 0) ::_exit(3);
    ::execl(AQS_FJOBS_BINARY, "fjobs", "--json", "--socket", socket.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("fjobs failed during the benchmark");
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median_fjobs(const bench::bench_user& u, const std::string& socket, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(time_fjobs(u, socket));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int connections = 4000, runs = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--connections") connections = std::atoi(argv[i + 1]);
    else if (a == "--runs") runs = std::atoi(argv[i + 1]);
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_connections: needs root (it makes two throwaway users)\n");
    return 1;
  }
  bench::stop_on_signals();
  bench::bench_user flood = bench::make_user("aqsbench-flood"), other = bench::make_user("aqsbench-other");
  return bench::measure_and_write("connections", {{"benchmark", "connections"}, {"connections", connections}, {"runs", runs}}, [&](nlohmann::json& results) {
    const bench::system::options o{
        .aqsd = AQS_AQSD_BINARY, .aqs_node = AQS_NODE_BINARY, .nodes = 1, .procs_per_node = 4};
    bench::system sys(o);
    const pid_t aqsd = sys.aqsd_pid();
    const std::string socket = sys.socket();
    (void)median_fjobs(other, socket, 5);  // warm up
    const double rss0 = bench::rss_mb(aqsd);
    const double quiet = median_fjobs(other, socket, runs);

    std::vector<test::raw_peer> held;
    int accepted = 0, refused = 0;
    for (int done = 0; done < connections;) {
      const int batch = std::min(500, connections - done);
      for (int fd : test::connect_unix_as(socket, flood.uid, flood.gid, batch)) held.emplace_back(fd);
      done += batch;
    }
    for (auto& p : held) {
      if (test::is_ok(p.hello())) ++accepted; else ++refused;
    }
    const double rss_flood = bench::rss_mb(aqsd);
    const double flooded = median_fjobs(other, socket, runs);
    held.clear();
    std::this_thread::sleep_for(2s);
    const double rss_after = bench::rss_mb(aqsd);

    std::printf("%-44s %12s\n", "", "value");
    std::printf("%-44s %12d\n", "flood connections attempted", connections);
    std::printf("%-44s %12d\n", "  accepted (per-user limit)", accepted);
    std::printf("%-44s %12d\n", "  refused at once", refused);
    std::printf("%-44s %12.1f\n", "other user's fjobs --json, quiet (ms)", quiet);
    std::printf("%-44s %12.1f\n", "other user's fjobs --json, flooded (ms)", flooded);
    std::printf("%-44s %12.1f\n", "aqsd RSS before (MB)", rss0);
    std::printf("%-44s %12.1f\n", "aqsd RSS during the flood (MB)", rss_flood);
    std::printf("%-44s %12.1f\n", "aqsd RSS after it closed (MB)", rss_after);
    results["accepted"] = accepted;
    results["refused"] = refused;
    results["fjobs_quiet_ms"] = quiet;
    results["fjobs_flooded_ms"] = flooded;
    results["rss_before_mb"] = rss0;
    results["rss_flood_mb"] = rss_flood;
    results["rss_after_mb"] = rss_after;
  }, [&] {
    bench::remove_user(flood);
    bench::remove_user(other);
  });
}
