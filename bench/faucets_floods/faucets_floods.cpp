// bench_faucets_floods: what one address flooding faucetsd's users' port
// costs another user (issue 28). Starts faucetsd (private PostgreSQL, TLS on
// both ports, default limits: 64 connections per address, 1,024 in all, 10 s
// to finish a TLS handshake or a request head), gets a throwaway user's
// token with ftoken on faucetsd's socket, and times that user's
// GET /api/v1/jobs (a fresh client each time: TCP connect, TLS handshake,
// request, answer) from 127.0.0.1, median and p99 and failures (no 200
// within 10 s), while sampling faucetsd's resident memory and open
// descriptors, in each phase:
//   quiet;
//   idle at the cap:    64 connections from 127.0.0.2 that send nothing;
//   idle past the cap:  --over of them (default 512);
//   heads at the cap:   64 TLS connections from 127.0.0.2, each sending half
//                       a request head and then nothing;
//   heads past the cap: --over of them.
// Every flooding connection is reopened as soon as faucetsd closes it (the
// head or handshake deadline), or 250 ms after, when faucetsd closed it
// within a second (refused: past the cap), so the flood stays at its size.
// Each flood phase lasts at least --seconds (default 25: past faucetsd's
// 10 s deadlines, so held connections are dropped and reopened in it).
//   bench_faucets_floods [--quick] [--runs N] [--seconds S] [--over N]
// --quick: 20 requests a phase, flood phases of 5 s (defaults: 60 and 25 s).
// Needs root. Prints a table and writes
// $AQS_BENCH_RESULTS/faucets_floods.json.
#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>  // before Boost.Asio (1.74 misses it)
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "faucets_client/faucets_api.hpp"

#include "bench_probe.hpp"
#include "bench_system.hpp"

namespace fs = std::filesystem;
namespace fc = aqs::client::faucets;
namespace asio = boost::asio;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {

constexpr const char* k_user = "aqsbench-ffother";  // the other user
constexpr const char* k_flood_from = "127.0.0.2";
constexpr int k_cap = 64;  // faucetsd's default --http-max-per-address

// `n` connections from 127.0.0.2 to the users' port, each reopened when
// faucetsd closes it, on a thread of their own until destruction.
// half_head: each completes a TLS handshake and sends half a request head.
class flood {
public:
  flood(unsigned short port, int n, bool half_head) : tls_(asio::ssl::context::tls_client) {
    tls_.set_verify_mode(asio::ssl::verify_none);
    for (int i = 0; i < n; ++i) asio::co_spawn(io_, hold(port, half_head), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~flood() {
    stop_ = true;
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  flood(const flood&) = delete;
  flood& operator=(const flood&) = delete;

  std::atomic<int> open{0};      // connected now
  std::atomic<int> opened{0};    // connections made in all
  std::atomic<int> refused{0};   // closed by faucetsd within a second
  std::atomic<int> timed_out{0}; // closed by faucetsd later (a deadline)

private:
  asio::awaitable<void> hold(unsigned short port, bool half_head) {
    const asio::ip::tcp::endpoint from(asio::ip::make_address(k_flood_from), 0);
    const asio::ip::tcp::endpoint to(asio::ip::make_address("127.0.0.1"), port);
    asio::steady_timer pause(io_);
    boost::system::error_code ec;
    while (!stop_) {
      asio::ip::tcp::socket s(io_);
      s.open(asio::ip::tcp::v4(), ec);
      if (!ec) s.bind(from, ec);
      if (!ec) co_await s.async_connect(to, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        pause.expires_after(250ms);
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      ++opened;
      ++open;
      const auto t0 = clk::now();
      char buf[4096];
      if (half_head) {
        asio::ssl::stream<asio::ip::tcp::socket> tls(std::move(s), tls_);
        co_await tls.async_handshake(asio::ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) {
          const std::string head = "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriza";
          co_await asio::async_write(tls, asio::buffer(head), asio::redirect_error(asio::use_awaitable, ec));
        }
        while (!ec) co_await tls.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
      } else {
        while (!ec) co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
      }
      --open;
      if (clk::now() - t0 < 1s) {
        ++refused;
        pause.expires_after(250ms);
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      } else {
        ++timed_out;
      }
    }
  }

  std::atomic<bool> stop_{false};
  asio::ssl::context tls_;
  asio::io_context io_;  // after what its coroutines use: destroyed first
  std::thread thread_;
};

struct sample {
  std::vector<double> ms;  // answered requests
  int failed = 0;
  double rss_peak_mb = 0;
  int fds_peak = 0;
};

// The other user's requests, one every 50 ms or so: `runs` of them and for
// at least `at_least`, while sampling faucetsd's memory and descriptors.
sample measure(const fc::client_options& co, pid_t pid, int runs, std::chrono::seconds at_least = 0s) {
  sample s;
  std::atomic<bool> done{false};
  std::atomic<double> peak{0};
  std::atomic<int> fds{0};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), aqs::bench::rss_mb(pid));
      fds = std::max(fds.load(), aqs::bench::open_fds(pid));
      std::this_thread::sleep_for(50ms);
    }
  });
  const auto until = clk::now() + at_least;
  for (int i = 0; i < runs || clk::now() < until; ++i) {
    aqs::bench::throw_if_interrupted();
    const auto t0 = clk::now();
    try {
      fc::client c(co);
      (void)c.list_jobs(false);
      s.ms.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    } catch (const std::exception&) {
      ++s.failed;
    }
    std::this_thread::sleep_for(50ms);
  }
  done = true;
  sampler.join();
  s.rss_peak_mb = peak;
  s.fds_peak = fds;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 60, over = 512, seconds = 25;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      runs = 20;
      seconds = 5;
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atoi(argv[++i]);
    } else if (a == "--over" && i + 1 < argc) {
      over = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_faucets_floods [--quick] [--runs N] [--seconds S] [--over N]\n");
      return 2;
    }
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_faucets_floods: needs root (a throwaway user asks faucetsd)\n");
    return 2;
  }
  aqs::bench::stop_on_signals();
  std::string tmpl = (fs::temp_directory_path() / "aqs-ffloods.XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path top = tmpl;
  bool made_user = false;
  int rc = 0;
  nlohmann::json results = {{"benchmark", "faucets_floods"}, {"runs", runs}, {"per_address_cap", k_cap},
                            {"over_cap", over}, {"flood_phase_min_s", seconds}, {"flood_from", k_flood_from}};
  try {
    const auto rw = fs::perms::owner_read | fs::perms::owner_write;
    fs::permissions(top, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    if (::getpwnam(k_user) == nullptr) {
      const int st = std::system(
          (std::string("/usr/sbin/useradd --system --no-create-home --shell /usr/sbin/nologin ") + k_user).c_str());
      if (st != 0) throw std::runtime_error("useradd failed");
      made_user = true;
    }
    const passwd* pw = ::getpwnam(k_user);
    if (!pw) throw std::runtime_error(std::string("no user ") + k_user);
    const uid_t uid = pw->pw_uid;
    const gid_t gid = pw->pw_gid;
    const std::string openssl = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
                                "-addext subjectAltName=IP:127.0.0.1 -keyout " +
                                (top / "server.key").string() + " -out " + (top / "server.crt").string() +
                                " >/dev/null 2>&1";
    if (std::system(openssl.c_str()) != 0) throw std::runtime_error("openssl req failed");
    fs::permissions(top / "server.crt", rw | fs::perms::group_read | fs::perms::others_read);
    aqs::bench::write_text(top / "one.key", std::string(64, 'a') + "\n", rw);
    aqs::bench::write_text(top / "clusters", "one " + (top / "one.key").string() + "\n", rw);
    aqs::bench::write_text(top / "users", "* * *\n", rw);
    const fs::path state = top / "state";
    fs::create_directories(state);
    fs::permissions(state, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const fs::path log = top / "faucetsd.log";
    aqs::bench::child faucetsd({AQS_FAUCETSD_BINARY, "--state-dir", state.string(), "--listen", "127.0.0.1:0", "--http",
                                "127.0.0.1:0", "--cert", (top / "server.crt").string(), "--key",
                                (top / "server.key").string(), "--clusters", (top / "clusters").string(), "--users",
                                (top / "users").string(), "--policy", "fastest-queue"},
                               log);
    (void)aqs::bench::wait_file(state / "faucetsd.addr", 120s, log);
    const std::string url = aqs::bench::wait_file(state / "faucetsd.http", 10s, log);
    const unsigned short port = static_cast<unsigned short>(std::stoi(url.substr(url.rfind(':') + 1)));
    const pid_t pid = aqs::bench::find_process("faucetsd", state.string());
    if (pid < 0) throw std::runtime_error("cannot find faucetsd's pid");
    std::string token = aqs::bench::trim(aqs::bench::run_as(uid, gid, {AQS_FTOKEN_BINARY, "--socket", (state / "faucetsd.sock").string()}));
    if (const auto nl = token.rfind('\n'); nl != std::string::npos) token = token.substr(nl + 1);
    fc::client_options co;
    co.url = fc::parse_base_url(url);
    co.ca_file = (top / "server.crt").string();
    co.token = token;
    co.connect_timeout = 10s;
    co.timeout = 10s;

    (void)measure(co, pid, 5);  // warm up
    struct phase {
      std::string name;
      sample s;
      int flood_open = 0, opened = 0, refused = 0, timed_out = 0;
    };
    std::vector<phase> phases;
    phases.push_back({"quiet", measure(co, pid, runs)});
    const std::vector<std::tuple<std::string, int, bool>> floods{
        {"idle, at the cap", k_cap, false},
        {"idle, past the cap", over, false},
        {"half heads, at the cap", k_cap, true},
        {"half heads, past the cap", over, true}};
    for (const auto& [name, n, half] : floods) {
      flood f(port, n, half);
      std::this_thread::sleep_for(2s);
      phase p{name, {}};
      p.flood_open = f.open;  // before the measurement: as the flood held it
      p.s = measure(co, pid, runs, std::chrono::seconds(seconds));
      p.opened = f.opened;
      p.refused = f.refused;
      p.timed_out = f.timed_out;
      phases.push_back(std::move(p));
      std::fprintf(stderr, "  %s: done\n", name.c_str());
    }
    std::printf("faucetsd's users' port, another user's GET /api/v1/jobs from 127.0.0.1 (fresh TLS connection each); "
                "floods from %s (cap %d per address)\n\n",
                k_flood_from, k_cap);
    std::printf("%-26s %6s %9s %9s %6s %9s %7s %9s %8s %8s\n", "phase", "flood", "GET p50", "GET p99", "failed",
                "RSS peak", "fds", "flood", "refused", "closed");
    std::printf("%-26s %6s %9s %9s %6s %9s %7s %9s %8s %8s\n", "", "conns", "(ms)", "(ms)", "", "(MB)", "peak",
                "opened", "(<1 s)", "(later)");
    results["phases"] = nlohmann::json::array();
    for (const auto& p : phases) {
      const int size = p.name == "quiet" ? 0 : (p.name.find("past") != std::string::npos ? over : k_cap);
      std::printf("%-26s %6d %9.1f %9.1f %6d %9.1f %7d %9d %8d %8d\n", p.name.c_str(), size, aqs::bench::median(p.s.ms),
                  aqs::bench::pct(p.s.ms, 0.99), p.s.failed, p.s.rss_peak_mb, p.s.fds_peak, p.opened, p.refused,
                  p.timed_out);
      results["phases"].push_back({{"phase", p.name},
                                   {"flood_connections", size},
                                   {"flood_connected_at_start", p.flood_open},
                                   {"get_jobs_median_ms", aqs::bench::median(p.s.ms)},
                                   {"get_jobs_p99_ms", aqs::bench::pct(p.s.ms, 0.99)},
                                   {"get_jobs_answered", p.s.ms.size()},
                                   {"get_jobs_failed", p.s.failed},
                                   {"faucetsd_rss_peak_mb", p.s.rss_peak_mb},
                                   {"faucetsd_fds_peak", p.s.fds_peak},
                                   {"flood_opened", p.opened},
                                   {"flood_refused", p.refused},
                                   {"flood_closed_later", p.timed_out}});
    }
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_faucets_floods: %s\n", e.what());
    rc = 1;
  }
  if (made_user) (void)std::system((std::string("/usr/sbin/userdel ") + k_user).c_str());
  if (std::getenv("AQS_BENCH_KEEP") != nullptr) {
    std::fprintf(stderr, "AQS_BENCH_KEEP: kept %s\n", top.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(top, ec);
  }
  if (rc != 0) return rc;
  aqs::bench::write_results("faucets_floods", results);
  return 0;
}
