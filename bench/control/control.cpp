// bench_control: fctl's actions end to end. Starts aqsd (private, durable
// PostgreSQL) and two aqs-node agents of 4 virtual processors, then, N times:
//   - hold + release of a pending job: the two replies (each written to the
//     store, with its event, before it comes back);
//   - suspend: from the request to the moment a job waiting for all 8
//     processors is RUNNING in the freed room;
//   - resume: once that job is cancelled, from the request to the suspended
//     (rigid) job RUNNING again on its own processors.
// Prints a table (median, p90, max) and writes $AQS_BENCH_RESULTS/control.json.
//   bench_control [--quick]
#include <chrono>
#include <cstdio>
#include <cstring>
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
using namespace std::chrono_literals;
using core::job_state;

namespace {

double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

std::int64_t submit(client::connection& c, const std::string& work, std::int64_t procs, const std::string& cmd) {
  protocol::submit s;
  s.id = c.next_id();
  s.job.name = "bench";
  s.job.argv = {"/bin/sh", "-c", cmd};
  s.job.workdir = work;
  s.job.stdout_pattern = "/dev/null";
  s.job.min_pe = procs;
  s.job.max_pe = procs;
  return c.call(s)["job_id"].get<std::int64_t>();
}

void control(client::connection& c, const std::string& action, std::int64_t id) {
  protocol::control m;
  m.id = c.next_id();
  m.action = action;
  m.job_ids = {id};
  c.call(m);
}

job_state state_of(client::connection& c, std::int64_t id) {
  protocol::list_jobs l;
  l.id = c.next_id();
  l.all = true;
  l.job_ids = {id};
  const auto jobs = c.ask(l).jobs;
  if (jobs.empty()) throw std::runtime_error("job " + std::to_string(id) + " is not listed");
  return jobs.front().state;
}

// Polls every millisecond until the job is in `want`; throws after 60 s.
void wait_for(client::connection& c, std::int64_t id, job_state want) {
  const auto until = clk::now() + 60s;
  while (state_of(c, id) != want) {
    if (clk::now() > until) throw std::runtime_error("job " + std::to_string(id) + " did not reach " +
                                                     std::string(core::to_string(want)));
    aqs::bench::throw_if_interrupted();
    std::this_thread::sleep_for(1ms);
  }
}

nlohmann::json summary(const std::vector<double>& v) {
  return {{"median_ms", aqs::bench::median(v)}, {"p90_ms", aqs::bench::pct(v, 0.9)},
          {"max_ms", aqs::bench::pct(v, 1.0)}, {"runs", v.size()}};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int runs = quick ? 5 : 20;
  aqs::bench::stop_on_signals();
  return aqs::bench::measure_and_write("control", nlohmann::json::object(), [&](nlohmann::json& results) {
    const aqs::bench::system::options o{
        .aqsd = AQS_AQSD_BINARY, .aqs_node = AQS_NODE_BINARY, .nodes = 2, .procs_per_node = 4};
    aqs::bench::system sys(o);
    client::connection c(sys.socket());
    const std::string work = sys.work().string();
    std::vector<double> hold_ms, release_ms, suspend_ms, resume_ms;
    for (int i = 0; i < runs; ++i) {
      // A rigid job of all 8 processors runs; another waits behind it.
      const std::int64_t a = submit(c, work, 8, "sleep 600");
      wait_for(c, a, job_state::running);
      const std::int64_t b = submit(c, work, 8, "sleep 600");
      auto t = clk::now();
      control(c, "hold", b);
      hold_ms.push_back(ms_since(t));
      t = clk::now();
      control(c, "release", b);
      release_ms.push_back(ms_since(t));
      t = clk::now();
      control(c, "suspend", a);
      wait_for(c, b, job_state::running);
      suspend_ms.push_back(ms_since(t));
      control(c, "resume", a);  // it waits: b holds its processors
      protocol::cancel k;
      k.id = c.next_id();
      k.job_ids = {b};
      t = clk::now();
      c.call(k);
      wait_for(c, a, job_state::running);
      resume_ms.push_back(ms_since(t));
      k.id = c.next_id();
      k.job_ids = {a};
      c.call(k);
      aqs::bench::wait_idle(c, 120s);
    }
    std::printf("%-58s %10s %10s %10s\n", "fctl, 2 nodes x 4 processors", "median ms", "p90 ms", "max ms");
    auto row = [&](const char* what, const char* key, const std::vector<double>& v) {
      const auto s = summary(v);
      std::printf("%-58s %10.1f %10.1f %10.1f\n", what, s["median_ms"].get<double>(), s["p90_ms"].get<double>(),
                  s["max_ms"].get<double>());
      results[key] = s;
    };
    row("hold of a pending job (reply, stored)", "hold", hold_ms);
    row("release (reply, stored)", "release", release_ms);
    row("suspend -> the waiting 8-processor job RUNNING", "suspend_to_other_running", suspend_ms);
    row("cancel of that job -> the suspended one RUNNING again", "cancel_to_resumed_running", resume_ms);
  });
}
