// bench_faucets_server: the Faucets server's broker policies end to end.
// For each policy (random, fastest-cpu, fastest-queue, data, earliest-start)
// a fresh faucetsd (private PostgreSQL, TLS for clusters and users) and three
// fresh AQS clusters joined to it: aqsd + agents of 4, 8 and 16 processors
// (one agent each, speed 1.0 everywhere: the jobs sleep, they do not compute).
// A throwaway system user gets a token from faucetsd's socket (ftoken) and
// submits the same seeded stream of rigid jobs through POST /api/v1/jobs
// with "cluster": "auto": 1..8 processors, `sleep` of 2..10 s, a time limit
// of the run time rounded up plus 2 s, Poisson arrivals over ~30 s, more work
// than the 28 processors do in that time, so queues build up. Polls
// GET /api/v1/jobs?all=1 until every job has ended, then per policy:
// mean response (end - submit), mean wait (start - submit), makespan (last
// end - first submit) and jobs per cluster. Prints a table and writes
// $AQS_BENCH_RESULTS/faucets_server.json.
//   bench_faucets_server [--quick] [--policy NAME]...
// --quick: 12 jobs over ~8 s (a smoke test). Needs root.
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "faucets_client/faucets_api.hpp"

#include "bench_probe.hpp"
#include "bench_system.hpp"

namespace fs = std::filesystem;
namespace fc = aqs::client::faucets;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr const char* k_user = "aqsfbench";

struct cluster_spec {
  std::string name;
  int procs;
};
const std::vector<cluster_spec> k_clusters{{"small", 4}, {"medium", 8}, {"large", 16}};

struct job_spec {
  double arrive_s;  // after the first submission
  int procs;
  double run_s;
  int walltime_s;
};

// The fixed workload: seed 42, the same for every policy.
std::vector<job_spec> workload(int n, double mean_gap_s) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> procs(1, 8);
  std::uniform_int_distribution<int> tenths(20, 100);  // 2.0 .. 10.0 s
  std::exponential_distribution<double> gap(1.0 / mean_gap_s);
  std::vector<job_spec> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    job_spec j;
    j.arrive_s = t;
    j.procs = procs(rng);
    j.run_s = tenths(rng) / 10.0;
    j.walltime_s = static_cast<int>(std::ceil(j.run_s)) + 2;
    out.push_back(j);
    t += gap(rng);
  }
  return out;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hex_key() {
  std::random_device rd;
  static const char* digits = "0123456789abcdef";
  std::string k;
  for (int i = 0; i < 64; ++i) k += digits[rd() % 16];
  return k;
}

struct setup {
  fs::path top;  // cert, keys, tables, work dir
  uid_t uid = 0;
  gid_t gid = 0;
};

struct policy_result {
  std::string policy;
  int jobs = 0, completed = 0, other_end = 0;
  double mean_response_s = 0, mean_wait_s = 0, p90_response_s = 0, makespan_s = 0, setup_s = 0;
  double placement_median_ms = 0, placement_max_ms = 0;  // the server's "submitted" -> "placed" events
  std::map<std::string, int> per_cluster;
  std::map<std::string, int> states;
};

policy_result run_policy(const setup& s, const std::string& policy, const std::vector<job_spec>& jobs) {
  policy_result r;
  r.policy = policy;
  const auto t_setup = std::chrono::steady_clock::now();
  const fs::path state = s.top / ("faucetsd-" + policy);
  fs::create_directories(state);
  fs::permissions(state, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const fs::path flog = s.top / ("faucetsd-" + policy + ".log");
  aqs::bench::child faucetsd({AQS_FAUCETSD_BINARY, "--state-dir", state.string(), "--listen", "127.0.0.1:0", "--http",
                              "127.0.0.1:0", "--cert", (s.top / "server.crt").string(), "--key",
                              (s.top / "server.key").string(), "--clusters", (s.top / "clusters").string(), "--users",
                              (s.top / "users").string(), "--policy", policy, "--cluster-timeout", "60", "--seed", "7"},
                             flog);
  const std::string addr = aqs::bench::wait_file(state / "faucetsd.addr", 120s, flog);
  const std::string url = aqs::bench::wait_file(state / "faucetsd.http", 10s, flog);

  std::vector<std::unique_ptr<aqs::bench::system>> clusters;
  for (const auto& c : k_clusters) {
    aqs::bench::system::options o;
    o.aqsd = AQS_AQSD_BINARY;
    o.aqs_node = AQS_NODE_BINARY;
    o.nodes = 1;
    o.procs_per_node = c.procs;
    o.aqsd_args = {"--faucets-server", addr, "--faucets-name", c.name, "--faucets-ca", (s.top / "server.crt").string(),
                   "--faucets-key", (s.top / (c.name + ".key")).string(), "--faucets-users",
                   (s.top / "cluster-users").string()};
    clusters.push_back(std::make_unique<aqs::bench::system>(o));
  }

  // The user's token: ftoken's last line.
  const std::string out = aqs::bench::run_as(s.uid, s.gid, {AQS_FTOKEN_BINARY, "--socket", (state / "faucetsd.sock").string()});
  std::string token = aqs::bench::trim(out);
  if (const auto nl = token.rfind('\n'); nl != std::string::npos) token = token.substr(nl + 1);

  fc::client_options co;
  co.url = fc::parse_base_url(url);
  co.ca_file = (s.top / "server.crt").string();
  co.token = token;
  fc::client api(co);

  // Every cluster UP at the server.
  {
    const auto until = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      aqs::bench::throw_if_interrupted();
      int up = 0;
      for (const auto& c : api.clusters()) up += c.value("state", "") == "UP";
      if (up == static_cast<int>(k_clusters.size())) break;
      if (std::chrono::steady_clock::now() > until) {
        throw std::runtime_error("clusters not all UP at faucetsd within 60 s: " + api.clusters().dump());
      }
      std::this_thread::sleep_for(200ms);
    }
  }
  r.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();

  // Submit on schedule.
  const std::string work = (s.top / "work").string();
  std::map<std::int64_t, double> submitted;  // server id -> our submit time
  const double t0 = now_s();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    const double due = t0 + j.arrive_s;
    while (now_s() < due) {
      aqs::bench::throw_if_interrupted();
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.05, due - now_s())));
    }
    char run[32];
    std::snprintf(run, sizeof run, "%.1f", j.run_s);
    const json job{{"name", "fb" + std::to_string(i)},
                   {"argv", {"/bin/sleep", run}},
                   {"workdir", work},
                   {"stdout", "/dev/null"},
                   {"min_pe", j.procs},
                   {"max_pe", j.procs},
                   {"walltime_s", j.walltime_s}};
    const double at = now_s();
    const auto sub = api.submit("auto", job);
    submitted[sub.id] = at;
  }
  const double submit_end = now_s();

  // Until every job has ended.
  json final_jobs;
  const auto until = std::chrono::steady_clock::now() + 600s;
  for (;;) {
    aqs::bench::throw_if_interrupted();
    const json all = api.list_jobs(true);
    int ended = 0;
    for (const auto& j : all) {
      if (!submitted.count(j.value("id", std::int64_t{0}))) continue;
      const std::string st = j.value("state", "");
      ended += (st == "COMPLETED" || st == "FAILED" || st == "CANCELLED" || st == "TIMEOUT" || st == "NODE_FAIL") &&
               j.contains("end_time") && j["end_time"].is_string();
    }
    if (ended == static_cast<int>(submitted.size())) {
      final_jobs = all;
      break;
    }
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error("jobs not all ended within 600 s (" + std::to_string(ended) + " of " +
                               std::to_string(submitted.size()) + ")");
    }
    std::this_thread::sleep_for(500ms);
  }

  std::vector<double> response, wait;
  double last_end = 0;
  for (const auto& j : final_jobs) {
    const auto it = submitted.find(j.value("id", std::int64_t{0}));
    if (it == submitted.end()) continue;
    ++r.jobs;
    const std::string st = j.value("state", "");
    ++r.states[st];
    (st == "COMPLETED" ? r.completed : r.other_end) += 1;
    r.per_cluster[j["cluster"].is_string() ? j["cluster"].get<std::string>() : "-"] += 1;
    const double end = aqs::bench::iso_seconds(j["end_time"].get<std::string>());
    last_end = std::max(last_end, end);
    response.push_back(end - it->second);
    if (j["start_time"].is_string()) wait.push_back(aqs::bench::iso_seconds(j["start_time"].get<std::string>()) - it->second);
  }
  // How long the server took to place each job (its own events, ms apart):
  // the broker's questions (earliest-start: one estimate per cluster) and
  // the cluster's answer to the forward, one job at a time.
  std::vector<double> placement;
  for (const auto& [id, at] : submitted) {
    double sub = -1, placed = -1;
    for (const auto& e : api.history(id)) {
      const std::string ev = e.value("event", "");
      if (ev == "submitted" && sub < 0) sub = aqs::bench::iso_seconds(e.value("time", ""));
      if (ev == "placed" && placed < 0) placed = aqs::bench::iso_seconds(e.value("time", ""));
    }
    if (sub >= 0 && placed >= 0) placement.push_back((placed - sub) * 1000.0);
  }
  r.placement_median_ms = aqs::bench::median(placement);
  r.placement_max_ms = aqs::bench::pct(placement, 1.0);
  double sum = 0;
  for (double v : response) sum += v;
  r.mean_response_s = response.empty() ? 0 : sum / static_cast<double>(response.size());
  sum = 0;
  for (double v : wait) sum += v;
  r.mean_wait_s = wait.empty() ? 0 : sum / static_cast<double>(wait.size());
  r.p90_response_s = aqs::bench::pct(response, 0.9);
  r.makespan_s = last_end - t0;
  std::fprintf(stderr, "  %s: submitted over %.1f s, setup %.1f s\n", policy.c_str(), submit_end - t0, r.setup_s);

  for (auto& c : clusters) c->stop();
  faucetsd.stop();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<std::string> policies;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
      policies.emplace_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_faucets_server [--quick] [--policy NAME]...\n");
      return 2;
    }
  }
  if (policies.empty()) policies = {"random", "fastest-cpu", "fastest-queue", "data", "earliest-start"};
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_faucets_server: needs root (a throwaway user submits through faucetsd)\n");
    return 2;
  }
  aqs::bench::stop_on_signals();
  const int n = quick ? 12 : 48;
  const double gap = quick ? 0.7 : 0.65;
  const auto jobs = workload(n, gap);
  double work = 0;
  for (const auto& j : jobs) work += j.procs * j.run_s;

  setup s;
  std::string tmpl = (fs::temp_directory_path() / "aqs-fbench.XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  s.top = tmpl;
  int rc = 0;
  nlohmann::json results = nlohmann::json::array();
  try {
    fs::permissions(s.top, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    if (::getpwnam(k_user) == nullptr) {
      const int st = std::system(
          (std::string("/usr/sbin/useradd --system --no-create-home --shell /usr/sbin/nologin ") + k_user).c_str());
      if (st != 0 && WEXITSTATUS(st) != 9) throw std::runtime_error("useradd failed");
    }
    const passwd* pw = ::getpwnam(k_user);
    if (!pw) throw std::runtime_error(std::string("no user ") + k_user);
    s.uid = pw->pw_uid;
    s.gid = pw->pw_gid;
    fs::create_directories(s.top / "work");
    if (::chown((s.top / "work").c_str(), s.uid, s.gid) != 0) throw std::runtime_error("chown work failed");

    const std::string openssl = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
                                "-addext subjectAltName=IP:127.0.0.1 -keyout " +
                                (s.top / "server.key").string() + " -out " + (s.top / "server.crt").string() +
                                " >/dev/null 2>&1";
    if (std::system(openssl.c_str()) != 0) throw std::runtime_error("openssl req failed");
    fs::permissions(s.top / "server.crt", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                              fs::perms::others_read);
    std::string table;
    for (const auto& c : k_clusters) {
      aqs::bench::write_text(s.top / (c.name + ".key"), hex_key() + "\n");
      table += c.name + " " + (s.top / (c.name + ".key")).string() + "\n";
    }
    aqs::bench::write_text(s.top / "clusters", table);
    aqs::bench::write_text(s.top / "users", "* * *\n");
    aqs::bench::write_text(s.top / "cluster-users", "* *\n");

    std::printf("Faucets server: %zu rigid sleep jobs (seed 42, 1..8 processors, 2..10 s, limit +2 s), %.0f "
                "processor-seconds, arriving over %.1f s; clusters small 4, medium 8, large 16 processors\n\n",
                jobs.size(), work, jobs.back().arrive_s);
    std::printf("%-15s %5s %5s %12s %10s %12s %10s %12s  %s\n", "policy", "jobs", "done", "response s", "wait s",
                "p90 resp s", "makespan s", "place ms p50", "jobs on small/medium/large");
    for (const auto& p : policies) {
      const auto r = run_policy(s, p, jobs);
      std::printf("%-15s %5d %5d %12.1f %10.1f %12.1f %10.1f %12.0f  %d/%d/%d\n", r.policy.c_str(), r.jobs,
                  r.completed, r.mean_response_s, r.mean_wait_s, r.p90_response_s, r.makespan_s, r.placement_median_ms,
                  r.per_cluster.count("small") ? r.per_cluster.at("small") : 0,
                  r.per_cluster.count("medium") ? r.per_cluster.at("medium") : 0,
                  r.per_cluster.count("large") ? r.per_cluster.at("large") : 0);
      std::fflush(stdout);
      results.push_back({{"policy", r.policy},
                         {"jobs", r.jobs},
                         {"completed", r.completed},
                         {"states", r.states},
                         {"mean_response_s", r.mean_response_s},
                         {"mean_wait_s", r.mean_wait_s},
                         {"p90_response_s", r.p90_response_s},
                         {"makespan_s", r.makespan_s},
                         {"jobs_per_cluster", r.per_cluster},
                         {"setup_s", r.setup_s},
                         {"placement_median_ms", r.placement_median_ms},
                         {"placement_max_ms", r.placement_max_ms},
                         {"workload", {{"jobs", jobs.size()}, {"processor_seconds", work}, {"seed", 42}}}});
    }
    aqs::bench::write_results("faucets_server", results);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_faucets_server: %s\n", e.what());
    rc = 1;
  }
  if (std::getenv("AQS_BENCH_KEEP") != nullptr) {
    std::fprintf(stderr, "AQS_BENCH_KEEP: kept %s\n", s.top.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(s.top, ec);
  }
  return rc;
}
