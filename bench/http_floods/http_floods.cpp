// bench_http_floods: what one user flooding aqsd's HTTP front costs another
// user (issue 28): that user's authenticated GET /api/v1/jobs (a fresh
// connection from 127.0.0.1 each time) and `fjobs --json` latency, median
// and p99, and aqsd's resident memory, quiet and during each flood:
//   body:      128 connections sending unauthenticated POST /api/v1/jobs
//              with 15 MiB bodies, each again a second after its answer
//              (the flood), and the same with no pause at all;
//   half-open: 256 half-sent requests (half stop inside the head, half
//              inside the body with the flooder's own token), reopened as
//              aqsd drops them;
//   idle:      connections that send nothing, reopened as aqsd drops them.
//   bench_http_floods [--runs N] [--body-connections N] [--idle N] [--jobs N] [--aqsd PATH]
// Needs root (it makes two throwaway users, removed at the end). Prints a
// table and writes $AQS_BENCH_RESULTS/http_floods.json.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <grp.h>
#include <mutex>
#include <poll.h>
#include <pwd.h>
#include <string>
#include <sys/socket.h>
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
using clk = std::chrono::steady_clock;

namespace {

struct sample {
  std::vector<double> get_ms, fjobs_ms;
  int get_failed = 0;
  double rss_peak_mb = 0;
};

// The other user's GETs and fjobs, alternately, `runs` of each, while
// sampling aqsd's memory.
sample measure(int port, const std::string& token, const bench::bench_user& other, const std::string& socket, pid_t aqsd,
               int runs) {
  sample s;
  std::atomic<bool> done{false};
  std::atomic<double> peak{0};
  std::thread sampler([&] {
    while (!done) {
      const double r = bench::rss_mb(aqsd);
      if (r > peak) peak = r;
      std::this_thread::sleep_for(50ms);
    }
  });
  for (int i = 0; i < runs; ++i) {
    auto t0 = clk::now();
    const unsigned status = bench::http_get(port, token, "/api/v1/jobs");
    s.get_ms.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    if (status != 200) ++s.get_failed;
    t0 = clk::now();
    (void)bench::run_as(other, {AQS_FJOBS_BINARY, "--json", "--socket", socket});
    s.fjobs_ms.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    std::this_thread::sleep_for(20ms);
  }
  done = true;
  sampler.join();
  s.rss_peak_mb = peak;
  return s;
}

// A flood running on its own threads until stop().
class flood {
public:
  virtual ~flood() = default;
  virtual void stop() = 0;
};

// Unauthenticated POST /api/v1/jobs with 15 MiB bodies on `n` connections
// of `u`'s, each sending until answered, then again.
class body_flood : public flood {
public:
  body_flood(int port, const bench::bench_user& u, int n, std::chrono::milliseconds pause) {
    // Sockets of `u`'s made 64 at a time (one fork each), so that the
    // flooding client's own cost stays small beside aqsd's.
    threads_.emplace_back([this, port, u] {
      while (!done_) {
        std::size_t have = 0;
        {
          std::lock_guard lock(mu_);
          have = pool_.size();
        }
        if (have >= 64) {
          std::this_thread::sleep_for(5ms);
          continue;
        }
        try {
          auto fresh = test::connect_tcp_as("127.0.0.1", port, u.uid, u.gid, 64);
          std::lock_guard lock(mu_);
          pool_.insert(pool_.end(), fresh.begin(), fresh.end());
        } catch (const std::exception&) {
          std::this_thread::sleep_for(50ms);
        }
      }
    });
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, pause] {
        const std::string chunk(64 << 10, 'x');
        constexpr std::size_t k_body = std::size_t{15} << 20;
        while (!done_) {
          int fd = -1;
          {
            std::lock_guard lock(mu_);
            if (!pool_.empty()) {
              fd = pool_.back();
              pool_.pop_back();
            }
          }
          if (fd < 0) {
            std::this_thread::sleep_for(5ms);
            continue;
          }
          bench::send_all(fd, "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       "Content-Length: " + std::to_string(k_body) + "\r\n\r\n");
          ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
          std::size_t sent = 0;
          const auto give_up = clk::now() + 60s;
          while (!done_ && clk::now() < give_up) {
            pollfd p{fd, static_cast<short>(POLLIN | (sent < k_body ? POLLOUT : 0)), 0};
            if (::poll(&p, 1, 200) <= 0) continue;
            if (p.revents & (POLLIN | POLLHUP | POLLERR)) break;  // answered (or dropped)
            const ssize_t m = ::send(fd, chunk.data(), std::min(chunk.size(), k_body - sent), MSG_NOSIGNAL);
            if (m > 0) sent += static_cast<std::size_t>(m);
            if (m < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
          }
          ::close(fd);
          ++requests;
          for (auto slept = 0ms; slept < pause && !done_; slept += 10ms) std::this_thread::sleep_for(10ms);
        }
      });
    }
  }
  void stop() override {
    done_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
    for (int fd : pool_) ::close(fd);
    pool_.clear();
  }
  ~body_flood() override { stop(); }
  std::atomic<int> requests{0};

private:
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::vector<int> pool_;
  std::vector<std::thread> threads_;
};

// `n` connections of `u`'s, each begun with `begin(i, fd)` (may send
// nothing), reopened (in batches) as aqsd drops them.
class held_flood : public flood {
public:
  held_flood(int port, const bench::bench_user& u, int n, std::function<void(int, int)> begin) {
    for (int done = 0; done < n;) {
      const int batch = std::min(250, n - done);
      for (int fd : test::connect_tcp_as("127.0.0.1", port, u.uid, u.gid, batch)) held_.push_back(fd);
      done += batch;
    }
    for (int i = 0; i < n; ++i) begin(i, held_[static_cast<std::size_t>(i)]);
    thread_ = std::thread([this, port, u, begin] {
      while (!done_) {
        std::vector<int> gone;
        for (std::size_t i = 0; i < held_.size(); ++i) {
          pollfd p{held_[i], POLLIN, 0};
          if (::poll(&p, 1, 0) > 0) gone.push_back(static_cast<int>(i));
        }
        if (!gone.empty()) {
          try {
            const auto fresh = test::connect_tcp_as("127.0.0.1", port, u.uid, u.gid, static_cast<int>(gone.size()));
            for (std::size_t k = 0; k < gone.size(); ++k) {
              ::close(held_[static_cast<std::size_t>(gone[k])]);
              held_[static_cast<std::size_t>(gone[k])] = fresh[k];
              begin(gone[k], fresh[k]);
            }
            reopened += static_cast<int>(gone.size());
          } catch (const std::exception&) {
          }
        }
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  void stop() override {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : held_) ::close(fd);
    held_.clear();
  }
  ~held_flood() override { stop(); }
  std::atomic<int> reopened{0};

private:
  std::atomic<bool> done_{false};
  std::vector<int> held_;
  std::thread thread_;
};

nlohmann::json row(const std::string& phase, const sample& s) {
  return {{"phase", phase},
          {"get_jobs_median_ms", bench::median(s.get_ms)},
          {"get_jobs_p99_ms", bench::pct(s.get_ms, 0.99)},
          {"get_jobs_not_200", s.get_failed},
          {"fjobs_median_ms", bench::median(s.fjobs_ms)},
          {"fjobs_p99_ms", bench::pct(s.fjobs_ms, 0.99)},
          {"aqsd_rss_peak_mb", s.rss_peak_mb}};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 100, body_connections = 128, idle = 2000, jobs = 200;
  std::string aqsd_path = AQS_AQSD_BINARY;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--body-connections") body_connections = std::atoi(argv[i + 1]);
    else if (a == "--idle") idle = std::atoi(argv[i + 1]);
    else if (a == "--jobs") jobs = std::atoi(argv[i + 1]);
    else if (a == "--aqsd") aqsd_path = argv[i + 1];  // another build's aqsd (a before/after comparison)
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_http_floods: needs root (it makes two throwaway users)\n");
    return 1;
  }
  bench::stop_on_signals();
  bench::bench_user flooder = bench::make_user("aqsbench-hflood"), other = bench::make_user("aqsbench-hother");
  return bench::measure_and_write("http_floods", {{"benchmark", "http_floods"}, {"aqsd", aqsd_path}, {"runs", runs}, {"body_connections", body_connections},
                            {"idle_connections", idle}, {"half_open", 256}, {"jobs", jobs}}, [&](nlohmann::json& results) {
    const bench::system::options o{
        .aqsd = aqsd_path, .aqs_node = AQS_NODE_BINARY, .nodes = 1, .procs_per_node = 4,
        .aqsd_args = {"--http", "127.0.0.1:0"}};
    bench::system sys(o);
    const pid_t aqsd = sys.aqsd_pid();
    const int port = sys.http_port();
    const std::string socket = sys.socket();
    const std::string other_token = bench::last_line(bench::run_as(other, {AQS_FTOKEN_BINARY, "--socket", socket}));
    const std::string flood_token = bench::last_line(bench::run_as(flooder, {AQS_FTOKEN_BINARY, "--socket", socket}));
    // A queue to list: jobs held behind a job that holds every processor.
    {
      client::connection c(socket);
      auto job = [&](const std::string& name, std::vector<std::string> argv, int procs) {
        protocol::submit s;
        s.id = c.next_id();
        s.job.name = name;
        s.job.argv = std::move(argv);
        s.job.workdir = sys.work().string();
        s.job.stdout_pattern = "/dev/null";
        s.job.min_pe = s.job.max_pe = procs;
        (void)c.ask(s);
      };
      job("holder", {"sleep", "3600"}, 4);
      for (int i = 0; i < jobs; ++i) job("queued", {"true"}, 1);
    }
    (void)measure(port, other_token, other, socket, aqsd, 5);  // warm up
    std::vector<std::pair<std::string, sample>> phases;
    phases.emplace_back("quiet", measure(port, other_token, other, socket, aqsd, runs));
    {
      // The flood: each connection sends its 15 MiB body, and
      // sends the next a second after its answer.
      body_flood f(port, flooder, body_connections, 1000ms);
      std::this_thread::sleep_for(2s);
      phases.emplace_back("body flood", measure(port, other_token, other, socket, aqsd, runs));
      f.stop();
      results["body_flood_requests"] = f.requests.load();
    }
    {
      // The same without a pause: as many unauthenticated requests as the
      // flooder's threads can make (aqsd answers each on its head).
      body_flood f(port, flooder, body_connections, 0ms);
      std::this_thread::sleep_for(2s);
      phases.emplace_back("body flood, no pause", measure(port, other_token, other, socket, aqsd, runs));
      f.stop();
      results["body_flood_no_pause_requests"] = f.requests.load();
    }
    {
      held_flood f(port, flooder, 256, [&](int i, int fd) {
        if (i % 2 == 0) {
          bench::send_all(fd, "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le");
        } else {
          bench::send_all(fd, "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + flood_token +
                           "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":");
        }
      });
      std::this_thread::sleep_for(1s);
      phases.emplace_back("half-open flood", measure(port, other_token, other, socket, aqsd, runs));
      f.stop();
      results["half_open_reopened"] = f.reopened.load();
    }
    {
      held_flood f(port, flooder, idle, [](int, int) {});
      std::this_thread::sleep_for(1s);
      phases.emplace_back("idle-connection flood", measure(port, other_token, other, socket, aqsd, runs));
      f.stop();
      results["idle_reopened"] = f.reopened.load();
    }
    std::printf("%-26s %10s %10s %8s %10s %10s %10s\n", "another user's requests", "GET med", "GET p99", "non-200",
                "fjobs med", "fjobs p99", "RSS peak");
    std::printf("%-26s %10s %10s %8s %10s %10s %10s\n", "", "(ms)", "(ms)", "", "(ms)", "(ms)", "(MB)");
    results["phases"] = nlohmann::json::array();
    for (const auto& [name, s] : phases) {
      std::printf("%-26s %10.1f %10.1f %8d %10.1f %10.1f %10.1f\n", name.c_str(), bench::median(s.get_ms),
                  bench::pct(s.get_ms, 0.99), s.get_failed, bench::median(s.fjobs_ms), bench::pct(s.fjobs_ms, 0.99),
                  s.rss_peak_mb);
      results["phases"].push_back(row(name, s));
    }
    std::printf("body flood: %d requests made in its phase (%d without a pause); half-open flood: %d connections "
                "reopened; idle flood: %d reopened\n",
                results.value("body_flood_requests", 0), results.value("body_flood_no_pause_requests", 0),
                results.value("half_open_reopened", 0), results.value("idle_reopened", 0));
  }, [&] {
    bench::remove_user(flooder);
    bench::remove_user(other);
  });
}
