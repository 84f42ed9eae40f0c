// bench_arrays: job arrays end to end. Starts aqsd (private, durable
// PostgreSQL) and four aqs-node agents of 16 virtual processors (64 in all),
// then for arrays of N trivial tasks (`true`), each submitted in ONE request
// as fsub --array=0-(N-1) sends it:
//   - the reply time (every task stored durably before the reply),
//   - the drain time (reply to the last task's end) and the tasks per second,
//   - the same with a throttle of 16 (%16): never more than 16 at once.
// Prints a table and writes $AQS_BENCH_RESULTS/arrays.json.
//   bench_arrays [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "protocol/messages.hpp"
#include "protocol/results.hpp"

#include "bench_system.hpp"

using clk = std::chrono::steady_clock;
using namespace aqs;
using namespace std::chrono_literals;

namespace {

double seconds_since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

protocol::submit array_of(std::int64_t id, const std::string& workdir, const std::string& spec) {
  protocol::submit s;
  s.id = id;
  s.job.name = "array";
  s.job.argv = {"true"};
  s.job.workdir = workdir;
  s.job.stdout_pattern = "/dev/null";
  protocol::job_geometry g;
  g.array = spec;
  s.job.geometry = g;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  aqs::bench::stop_on_signals();
  return aqs::bench::measure_and_write("arrays", nlohmann::json::object(), [&](nlohmann::json& results) {
    const aqs::bench::system::options o{
        .aqsd = AQS_AQSD_BINARY, .aqs_node = AQS_NODE_BINARY, .nodes = 4, .procs_per_node = 16};
    aqs::bench::system sys(o);
    client::connection w(sys.socket());
    const std::string work = sys.work().string();
    std::printf("%-44s %10s %10s %12s %10s\n", "array", "reply (s)", "drain (s)", "tasks/s", "completed");
    std::vector<std::pair<int, int>> cases = {{100, 0}, {1000, 0}, {1000, 16}};
    if (!quick) cases.emplace_back(10000, 0);
    std::int64_t rid = 1;
    for (const auto& [n, throttle] : cases) {
      const std::string spec = "0-" + std::to_string(n - 1) + (throttle ? "%" + std::to_string(throttle) : "");
      const auto t0 = clk::now();
      const auto reply = w.call(array_of(rid++, work, spec));
      const double reply_s = seconds_since(t0);
      const std::int64_t first = reply["job_id"].get<std::int64_t>();
      const auto t1 = clk::now();
      aqs::bench::wait_idle(w, 1800s);
      const double drain_s = seconds_since(t1);
      std::size_t completed = 0, tasks = 0;
      for (const auto& j : aqs::bench::jobs_after(w, first - 1)) {
        if (j.array_job_id != first) continue;
        ++tasks;
        completed += j.state == core::job_state::completed;
      }
      const std::string label = std::to_string(n) + " tasks" + (throttle ? ", at most " + std::to_string(throttle) + " at once" : "");
      std::printf("%-44s %10.3f %10.2f %12.1f %10zu\n", label.c_str(), reply_s, drain_s, n / drain_s, completed);
      std::fflush(stdout);
      results["arrays"].push_back({{"tasks", n}, {"throttle", throttle}, {"reply_s", reply_s}, {"drain_s", drain_s},
                                    {"tasks_per_s", n / drain_s}, {"completed", completed}, {"listed", tasks}});
      if (completed != static_cast<std::size_t>(n)) throw std::runtime_error("not every array task completed");
    }
  });
}
