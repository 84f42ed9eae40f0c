// bench_system: the running system for end-to-end benchmarks: aqsd with its
// private, durable PostgreSQL and aqs-node agents as processes in a temporary
// directory, stopped and removed again however the benchmark ends (kept,
// for a look at the logs, when AQS_BENCH_KEEP is set); optionally each agent
// on a namespace host of its own (testbed/netns_hosts).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "netns_hosts.hpp"
#include "protocol/results.hpp"

namespace aqs::bench {

// A child process in its own process group, its output appended to `log`;
// stopped (TERM, then KILL to the group) by stop() or on destruction.
class child {
public:
  child(const std::vector<std::string>& argv, const std::filesystem::path& log);
  ~child() { stop(); }
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  void stop();
  // Waits until it exits and returns its exit status (128 + signal when
  // killed). Throws std::runtime_error when interrupted (see
  // stop_on_signals) or already stopped.
  int wait();

private:
  pid_t pid_ = -1;
};

class system {
public:
  struct options {
    std::string aqsd;      // paths of the binaries
    std::string aqs_node;
    int nodes = 1;
    int procs_per_node = 8;
    std::vector<std::string> aqsd_args = {};  // extra aqsd options
    // Agent i on host i of testbed::netns_hosts (host name "host<i>"),
    // reaching aqsd over TCP on the hosts' bridge with the cluster key, as
    // agents on other machines do. Needs root.
    bool netns = false;
    // The agents' names: PREFIX0, PREFIX1, ... (a job sees its node's name
    // in $SLURMD_NODENAME: benchmarks tell clusters apart by it).
    std::string node_prefix = "node";
  };
  // Starts aqsd (initdb on first start takes a few seconds) and the agents
  // ("node0".."nodeN-1"), and waits until every node is registered.
  // Throws std::runtime_error when the namespace hosts cannot be made, aqsd
  // does not answer within 30 s or the nodes do not all register within
  // 10 s; what was started by then is stopped and removed.
  explicit system(const options& o);
  ~system();
  system(const system&) = delete;
  system& operator=(const system&) = delete;

  const std::filesystem::path& dir() const noexcept { return dir_; }
  std::string socket() const { return (dir_ / "state" / "aqsd.sock").string(); }
  std::filesystem::path work() const { return dir_ / "work"; }  // for jobs' files
  // aqsd's pid, and the port of its HTTP listener when started with
  // `--http HOST:0` (from the files it writes in its state directory).
  pid_t aqsd_pid() const;
  int http_port() const;
  // Stops the agents, then aqsd (both also happen on destruction).
  void stop();
  // The namespace hosts (options::netns), else null. They go after the
  // processes on them, on destruction.
  const testbed::netns_hosts* hosts() const noexcept { return hosts_.get(); }

private:
  void remove_dir();  // unless AQS_BENCH_KEEP is set
  std::filesystem::path dir_;
  std::unique_ptr<testbed::netns_hosts> hosts_;
  std::unique_ptr<child> aqsd_;
  std::vector<std::unique_ptr<child>> agents_;
};

// From now on SIGINT, SIGTERM and SIGHUP do not end this process at once:
// they make wait_idle and child::wait throw, so that the destructors stop
// what was started and remove the namespace hosts (which would outlive a
// killed process). Call it at the start of main.
void stop_on_signals();
// Throws std::runtime_error when one of those signals came.
void throw_if_interrupted();

// Seconds since the epoch of "2026-11-22T14:26:00.123Z" (aqsd's timestamps).
double iso_seconds(const std::string& t);

// Waits until no job is pending, running or resizing (polling, at most
// `limit`); throws std::runtime_error after that.
void wait_idle(client::connection& w, std::chrono::seconds limit);

// Every job with an id above `after`, finished ones included, in id order.
std::vector<protocol::job_info> jobs_after(client::connection& w, std::int64_t after);

// A whole file as a string ("" if it cannot be read): jobs' outputs.
std::string slurp(const std::filesystem::path& p);

// The mean, the median and the p-quantile (0..1) of `v`, 0 when empty.
double mean(const std::vector<double>& v);
double median(std::vector<double> v);
double pct(std::vector<double> v, double p);

// Where benchmark `name` keeps its results: $AQS_BENCH_RESULTS/<name>.json
// (default bench/results/<name>.json), the folder made if missing.
std::filesystem::path results_file(const std::string& name);
// Writes `results` there (indented) and says where on stdout
// ("results: PATH").
void write_results(const std::string& name, const nlohmann::json& results);

// The measuring part of benchmark `name`'s main(): measure(results) adds to
// `results`; a failure is said on stderr as "bench_NAME: ..." and gives exit
// status 1, else the results are written (write_results) and 0. after()
// runs either way first (removing what the benchmark made).
int measure_and_write(const std::string& name, nlohmann::json results,
                      const std::function<void(nlohmann::json&)>& measure, const std::function<void()>& after = {});

}  // namespace aqs::bench
