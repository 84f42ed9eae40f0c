// bench_scale: how aqsd's costs grow as the work grows. For 16, 256 and 1,024
// registered nodes of 16 processors, and 1,000, 10,000 and 100,000 queued
// jobs, measures:
//   - durable submissions/s (16 synchronous API clients) filling the queue
//     up to that size;
//   - decision time per event (apply + decide of the scheduling core aqsd
//     runs, equipartition, in this process): on a full cluster with that
//     many jobs queued, a job ending (the head of the queue starts) and a
//     job arriving, alternately;
//   - `fjobs` (queue and running) and `fjobs --all --json` wall time, the
//     real command as a process (median);
//   - aqsd's resident memory (VmRSS).
// Then, with 100,000 jobs in the history (the queue cancelled) and 10
// queued, the same fjobs times: the listing targets (plain < 50 ms, --all
// --json < 0.5 s).
// The nodes are registered over aqsd's real Unix socket by a fake agent in
// this process (one connection per node, as aqs-node makes, heartbeating):
// 1,024 real aqs-node processes would cost more than the 2 cores have. The
// queued jobs ask for more processors than the cluster has, so nothing is
// launched and the agent never has to run anything.
// Prints a table and writes $AQS_BENCH_RESULTS/scale.json.
//   bench_scale [--quick]   (--quick: 16 and 256 nodes, up to 10,000 jobs)
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <fcntl.h>
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
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "core/scheduler.hpp"
#include "core/strategy.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"

#include "bench_requests.hpp"
#include "bench_system.hpp"
#include "raw_peer.hpp"

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;
using namespace aqs;
using namespace std::chrono_literals;

extern char** environ;

namespace {

constexpr int k_procs_per_node = 16;
constexpr int k_clients = 16;

double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

// ---- the fake agent -------------------------------------------------------

int connect_unix(const std::string& path) {
  const int fd = test::connect_unix(path);
  if (fd < 0) throw std::runtime_error("fake agent: cannot connect to " + path + ": " + std::strerror(errno));
  return fd;
}

void write_all(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("fake agent: aqsd closed a node's connection");
    off += static_cast<std::size_t>(n);
  }
}

// Reads until one whole reply; throws on an error reply.
void read_reply(int fd, protocol::frame_decoder& dec) {
  std::vector<std::string> frames;
  while (frames.empty()) {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("fake agent: aqsd closed a node's connection");
    dec.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
  }
  const auto m = protocol::parse_message(frames.front());
  if (const auto* e = std::get_if<protocol::error>(&m)) throw std::runtime_error("fake agent: aqsd said " + e->message);
}

// `n` nodes named fake0.. of k_procs_per_node processors, each on its own
// connection, registered in order and heartbeating every 2 s until destroyed.
class fake_agents {
public:
  fake_agents(const std::string& socket, int n) {
    for (int i = 0; i < n; ++i) {
      const int fd = connect_unix(socket);
      fds_.push_back(fd);
      protocol::frame_decoder dec;
      protocol::hello h;
      h.id = 1;
      h.role = protocol::peer_role::node;
      write_all(fd, protocol::encode(h));
      read_reply(fd, dec);
      protocol::register_node r;
      r.id = 2;
      r.name = "fake" + std::to_string(i);
      r.procs = k_procs_per_node;
      for (int c = 0; c < k_procs_per_node; ++c) r.cpus.push_back(c % 2);
      r.memory_mb = 65536;
      write_all(fd, protocol::encode(r));
      read_reply(fd, dec);
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    beat_ = std::thread([this] {
      std::int64_t id = 3;
      while (!stop_) {
        for (const int fd : fds_) {
          protocol::heartbeat hb;
          hb.id = id;
          try {
            write_all(fd, protocol::encode(hb));
          } catch (const std::exception&) {
          }
          char buf[4096];
          while (::read(fd, buf, sizeof buf) > 0) {
          }  // replies (and anything else) are dropped
        }
        ++id;
        for (int i = 0; i < 20 && !stop_; ++i) std::this_thread::sleep_for(100ms);
      }
    });
  }
  ~fake_agents() {
    stop_ = true;
    beat_.join();
    for (const int fd : fds_) ::close(fd);
  }

private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread beat_;
};

// ---- measurements ---------------------------------------------------------

protocol::submit queued_job(const std::string& workdir, std::int64_t procs) {
  protocol::submit s;
  s.job.name = "queued";
  s.job.argv = {"true"};
  s.job.workdir = workdir;
  s.job.stdout_pattern = "/dev/null";
  s.job.min_pe = s.job.max_pe = procs;  // more than the cluster: it stays queued
  return s;
}

// Submits `count` jobs from k_clients synchronous clients; jobs/s.
double submit_many(const std::string& sock, const std::string& work, std::int64_t procs, long count) {
  std::atomic<long> next{0};
  std::mutex mu;
  std::string failure;
  const auto t0 = clk::now();
  std::vector<std::thread> ts;
  for (int c = 0; c < k_clients; ++c) {
    ts.emplace_back([&] {
      try {
        client::connection w(sock);
        protocol::submit s = queued_job(work, procs);
        while (next.fetch_add(1) < count) {
          s.id = w.next_id();
          w.call(s);
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failure = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  if (!failure.empty()) throw std::runtime_error("submitting: " + failure);
  return static_cast<double>(count) / (ms_since(t0) / 1000.0);
}

// The real fjobs with `args`, output thrown away: median wall ms of `runs`.
double fjobs_ms(const std::string& sock, std::vector<std::string> args, int runs) {
  std::vector<double> times;
  const std::string env_sock = "AQS_SOCKET=" + sock;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "AQS_SOCKET=", 11) != 0) envp.push_back(*e);
  }
  envp.push_back(const_cast<char*>(env_sock.c_str()));
  envp.push_back(nullptr);
  args.insert(args.begin(), AQS_FJOBS_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (int r = 0; r < runs; ++r) {
    aqs::bench::throw_if_interrupted();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const auto t0 = clk::now();
    if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) {
      throw std::runtime_error("cannot start fjobs");
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    times.push_back(ms_since(t0));
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("fjobs failed");
  }
  return aqs::bench::median(times);
}

double rss_mb(const fs::path& pid_file) {
  std::ifstream p(pid_file);
  long pid = 0;
  p >> pid;
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(st, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

struct decision_cost {
  double mean_us = 0;
  double p99_us = 0;
};

// The core aqsd runs, on a full cluster of `nodes` x 16 processors (one
// 16-processor job per node) with `queued` 16-processor jobs waiting:
// alternately a running job ends (the head of the queue starts in its
// place) and a new job arrives. Time of apply + decide per event.
decision_cost decision_time(int nodes, long queued, int events) {
  core::scheduler s(core::cluster::uniform(static_cast<std::size_t>(nodes), k_procs_per_node),
                    core::make_strategy("equipartition"));
  core::job_id next = 1;
  double now = 0;
  auto request = [&] { return bench::rigid_request(next++, k_procs_per_node, now); };
  for (int n = 0; n < nodes; ++n) s.apply(core::event::arrival(request()));
  s.decide(now);
  for (long q = 0; q < queued; ++q) s.apply(core::event::arrival(request()));
  s.decide(now);
  core::job_id oldest_running = 1;
  std::vector<double> us;
  for (int e = 0; e < events; ++e) {
    now += 1;
    const core::event ev = e % 2 == 0 ? core::event::completion(oldest_running++) : core::event::arrival(request());
    const auto t0 = clk::now();
    s.apply(ev);
    s.decide(now);
    us.push_back(ms_since(t0) * 1000.0);
  }
  decision_cost out;
  for (double v : us) out.mean_us += v;
  out.mean_us /= static_cast<double>(us.size());
  out.p99_us = aqs::bench::pct(us, 0.99);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: bench_scale [--quick]\n");
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::signal(SIGPIPE, SIG_IGN);
  aqs::bench::stop_on_signals();
  // 1,024 node connections, for us and for aqsd (which inherits the limit).
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);

  const std::vector<int> node_counts = quick ? std::vector<int>{16, 256} : std::vector<int>{16, 256, 1024};
  const std::vector<long> queue_sizes = quick ? std::vector<long>{1000, 10000} : std::vector<long>{1000, 10000, 100000};
  nlohmann::json results = {{"benchmark", "scale"}, {"procs_per_node", k_procs_per_node}, {"clients", k_clients},
                            {"rows", nlohmann::json::array()}};
  const fs::path out = aqs::bench::results_file("scale");
  // Written after every row: a run stopped half way keeps what it measured.
  auto save = [&] { std::ofstream(out) << results.dump(2) << "\n"; };
  try {
    std::printf("%6s %8s %10s %14s %12s %10s %16s %9s\n", "nodes", "queued", "submit/s", "decide us mean",
                "decide p99", "fjobs ms", "--all --json ms", "aqsd MB");
    for (const int nodes : node_counts) {
      aqs::bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 0, 1, {"--heartbeat-timeout", "600"}});
      const std::string sock = sys.socket();
      const std::string work = sys.work().string();
      const fs::path pid_file = sys.dir() / "state" / "aqsd.pid";
      const auto t_reg = clk::now();
      fake_agents agents(sock, nodes);
      const double register_ms = ms_since(t_reg);
      const std::int64_t too_big = static_cast<std::int64_t>(nodes) * k_procs_per_node + 1;
      long queued = 0;
      for (const long target : queue_sizes) {
        const double rate = submit_many(sock, work, too_big, target - queued);
        queued = target;
        const decision_cost d = decision_time(nodes, target, 200);
        const int runs = target >= 100000 ? 3 : 5;
        const double plain = fjobs_ms(sock, {}, runs);
        const double all_json = fjobs_ms(sock, {"--all", "--json"}, runs);
        const double mem = rss_mb(pid_file);
        std::printf("%6d %8ld %10.0f %14.1f %12.1f %10.1f %16.1f %9.1f\n", nodes, target, rate, d.mean_us, d.p99_us,
                    plain, all_json, mem);
        results["rows"].push_back({{"nodes", nodes},
                                   {"queued", target},
                                   {"submit_per_s", rate},
                                   {"decision_us_mean", d.mean_us},
                                   {"decision_us_p99", d.p99_us},
                                   {"fjobs_ms", plain},
                                   {"fjobs_all_json_ms", all_json},
                                   {"aqsd_rss_mb", mem},
                                   {"register_all_nodes_ms", register_ms}});
        save();
      }
      if (nodes == node_counts.front()) {
        // The history: every queued job cancelled, 10 new ones queued.
        client::connection w(sock);
        const passwd* pw = ::getpwuid(::geteuid());
        protocol::cancel c;
        c.id = w.next_id();
        c.user = pw != nullptr ? pw->pw_name : std::to_string(::geteuid());
        w.call(c);
        aqs::bench::wait_idle(w, 600s);
        submit_many(sock, work, too_big, 10);
        const double plain = fjobs_ms(sock, {}, 5);
        const double all_json = fjobs_ms(sock, {"--all", "--json"}, 3);
        const double mem = rss_mb(pid_file);
        std::printf("history: %ld finished + 10 queued, %d nodes: fjobs %.1f ms, fjobs --all --json %.1f ms, aqsd %.1f MB\n",
                    queued, nodes, plain, all_json, mem);
        results["history"] = {{"finished", queued}, {"queued", 10},  {"nodes", nodes},
                              {"fjobs_ms", plain},  {"fjobs_all_json_ms", all_json}, {"aqsd_rss_mb", mem}};
        save();
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_scale: %s\n", e.what());
    return 1;
  }
  results["complete"] = true;
  save();
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
