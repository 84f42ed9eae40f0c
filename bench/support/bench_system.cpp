// bench_system: a private aqsd and agents for end-to-end benchmarks.
#include "bench_system.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "protocol/messages.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace aqs::bench {

child::child(const std::vector<std::string>& argv, const fs::path& log) {
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

int child::wait() {
  if (pid_ <= 0) throw std::runtime_error("waiting for a process already stopped");
  int status = 0;
  // Signals are caught without SA_RESTART (stop_on_signals): one breaks the
  // wait with EINTR.
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    throw_if_interrupted();
  }
  pid_ = -1;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void child::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 300; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(20ms);
  }
  ::kill(-pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

system::system(const options& o) {
  std::string tmpl = (fs::temp_directory_path() / "aqs-bench.XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  dir_ = tmpl;
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_directories(work());
  try {
    std::vector<std::string> argv{o.aqsd, "--state-dir", (dir_ / "state").string(), "--foreground"};
    argv.insert(argv.end(), o.aqsd_args.begin(), o.aqsd_args.end());
    // Never this machine's /etc/aqs/aqs.conf: an empty file of its own
    // unless the benchmark names one.
    if (std::find(o.aqsd_args.begin(), o.aqsd_args.end(), "--config") == o.aqsd_args.end()) {
      std::ofstream(dir_ / "aqs.conf") << "# the benchmark's own: one partition of all nodes\n";
      argv.push_back("--config");
      argv.push_back((dir_ / "aqs.conf").string());
    }
    std::string server;  // aqsd's address on the hosts' bridge
    if (o.netns) {
      hosts_ = std::make_unique<testbed::netns_hosts>(o.nodes);
      server = hosts_->root_ip() + ":" + std::to_string(testbed::free_tcp_port(hosts_->root_ip()));
      argv.push_back("--listen");
      argv.push_back(server);
    }
    aqsd_ = std::make_unique<child>(argv, dir_ / "aqsd.log");
    bool up = false;
    for (int i = 0; i < 600 && !up; ++i) {
      if (fs::exists(socket())) {
        try {
          client::connection probe(socket());
          up = true;
          break;
        } catch (const client::client_error&) {
        }
      }
      std::this_thread::sleep_for(50ms);
    }
    if (!up) throw std::runtime_error("aqsd did not answer within 30 s");
    for (int n = 0; n < o.nodes; ++n) {
      const std::string name = o.node_prefix + std::to_string(n);
      std::vector<std::string> agent{o.aqs_node, "--name", name, "--procs", std::to_string(o.procs_per_node),
                                     "--spool", (dir_ / ("spool-" + name)).string()};
      if (hosts_) {
        // aqsd wrote the key at its start, which it has finished by now.
        const std::vector<std::string> tcp{"--server", server, "--key", (dir_ / "state" / "cluster.key").string()};
        agent.insert(agent.end(), tcp.begin(), tcp.end());
        agent = hosts_->on_host(n, agent);
      } else {
        agent.push_back("--socket");
        agent.push_back(socket());
      }
      agents_.push_back(std::make_unique<child>(agent, dir_ / (name + ".log")));
    }
    client::connection w(socket());
    for (int i = 0;; ++i) {
      if (w.call(protocol::list_nodes{1})["nodes"].size() == static_cast<std::size_t>(o.nodes)) break;
      if (i == 200) {
        // Their logs are the only clue: it struck twice under heavy load
        // from other work and could not be made to happen again.
        std::string logs;
        for (int n = 0; n < o.nodes; ++n) {
          const std::string log = o.node_prefix + std::to_string(n) + ".log";
          logs += "\n" + log + ": " + slurp(dir_ / log);
        }
        throw std::runtime_error("the agents did not all register within 10 s" + logs);
      }
      std::this_thread::sleep_for(50ms);
    }
  } catch (...) {
    stop();
    hosts_.reset();
    remove_dir();
    throw;
  }
}

void system::stop() {
  for (auto& a : agents_) a->stop();
  if (aqsd_) aqsd_->stop();
}

namespace {

volatile std::sig_atomic_t interrupted = 0;

void note_signal(int) { interrupted = 1; }

}  // namespace

void stop_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = note_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: blocking waits return EINTR and look at the flag
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

void throw_if_interrupted() {
  if (interrupted != 0) throw std::runtime_error("interrupted by a signal");
}

system::~system() {
  stop();
  remove_dir();
}

void system::remove_dir() {
  // Also when the start failed: its logs say why.
  if (std::getenv("AQS_BENCH_KEEP") != nullptr) {
    std::fprintf(stderr, "AQS_BENCH_KEEP: logs and job files kept in %s\n", dir_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

double iso_seconds(const std::string& t) {
  std::tm tm{};
  int ms = 0;
  std::sscanf(t.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
              &tm.tm_sec, &ms);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(::timegm(&tm)) + ms / 1000.0;
}

void wait_idle(client::connection& w, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    throw_if_interrupted();
    protocol::list_jobs l;
    l.id = w.next_id();
    l.limit = 1;
    if (w.call(l)["jobs"].empty()) return;
    std::this_thread::sleep_for(20ms);
  }
  throw std::runtime_error("jobs still running after " + std::to_string(limit.count()) + " s");
}

std::vector<protocol::job_info> jobs_after(client::connection& w, std::int64_t after) {
  std::vector<protocol::job_info> out;
  while (true) {
    protocol::list_jobs l;
    l.id = w.next_id();
    l.all = true;
    l.after_id = after;
    const auto r = w.call(l);
    auto page = protocol::parse_job_list(r);
    if (page.empty()) break;
    after = page.back().id;
    out.insert(out.end(), page.begin(), page.end());
    if (!r.value("more", false)) break;
  }
  return out;
}

pid_t system::aqsd_pid() const { return std::stoi(slurp(dir_ / "state" / "aqsd.pid")); }

int system::http_port() const {
  const std::string addr = slurp(dir_ / "state" / "aqsd.http");
  return std::stoi(addr.substr(addr.rfind(':') + 1));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double median(std::vector<double> v) { return pct(std::move(v), 0.5); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

fs::path results_file(const std::string& name) {
  const char* out_dir = std::getenv("AQS_BENCH_RESULTS");
  const fs::path out = fs::path(out_dir ? out_dir : "bench/results") / (name + ".json");
  fs::create_directories(out.parent_path());
  return out;
}

void write_results(const std::string& name, const nlohmann::json& results) {
  const fs::path out = results_file(name);
  std::ofstream(out) << results.dump(2) << "\n";
  std::printf("results: %s\n", out.c_str());
}

int measure_and_write(const std::string& name, nlohmann::json results,
                      const std::function<void(nlohmann::json&)>& measure, const std::function<void()>& after) {
  int rc = 0;
  try {
    measure(results);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_%s: %s\n", name.c_str(), e.what());
    rc = 1;
  }
  if (after) after();
  if (rc == 0) write_results(name, results);
  return rc;
}

}  // namespace aqs::bench
