// bench_http: the HTTP API under load. aqsd --http with 10,000 jobs queued
// (one 8-processor node runs 8 of them, the rest wait); 200 client threads,
// each on its own keep-alive connection with a token, GET /api/v1/jobs:
// the default page (1,000 jobs) and the whole queue (limit=10000). Then 100
// event-stream watchers and a burst of state changes: how long until every
// watcher has seen every event. Then the sustained test: 100 watchers while
// aqsd commits 100 state changes a second for 30 s (jobs submitted behind a
// job holding every processor, each cancelled a second later: PENDING, then
// CANCELLED): each event's lag from aqsd's commit (its "time") to each
// watcher (p50, p99, max), and the events a watcher missed.
//   bench_http [--quick] [--sustained-only] [--jobs N] [--clients N] [--requests N]
//              [--watchers N] [--rate CHANGES_PER_S] [--seconds N]
// Prints a table and writes $AQS_BENCH_RESULTS/http.json.
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <atomic>
#include <mutex>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>  // before Boost.Asio (1.74 misses it)
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "bench_system.hpp"
#include "protocol/replies.hpp"

using namespace aqs;
using clk = std::chrono::steady_clock;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

namespace {

struct load_result {
  std::vector<double> ms;
  int failures = 0;
  double seconds = 0;
  std::size_t bytes = 0;
};

// `clients` threads, each `requests` GETs of `target` on one keep-alive connection.
load_result load(unsigned short port, const std::string& token, const std::string& target, int clients, int requests) {
  load_result out;
  std::mutex mu;
  std::atomic<int> failures{0};
  std::atomic<std::size_t> bytes{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int c = 0; c < clients; ++c) {
    ts.emplace_back([&] {
      std::vector<double> mine;
      try {
        asio::io_context io;
        beast::tcp_stream s(io);
        s.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
        ++ready;
        while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        beast::flat_buffer buf;
        for (int i = 0; i < requests; ++i) {
          bhttp::request<bhttp::empty_body> req{bhttp::verb::get, target, 11};
          req.set(bhttp::field::host, "127.0.0.1");
          req.set(bhttp::field::authorization, "Bearer " + token);
          const auto t0 = clk::now();
          bhttp::write(s, req);
          bhttp::response_parser<bhttp::string_body> p;
          p.body_limit(std::uint64_t{1} << 30);
          bhttp::read(s, buf, p);
          mine.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
          if (p.get().result_int() != 200) {
            if (failures++ == 0) {
              std::fprintf(stderr, "first failure: %u %s\n", p.get().result_int(), p.get().body().substr(0, 200).c_str());
            }
          }
          bytes += p.get().body().size();
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "client: %s\n", e.what());
        ++failures;
        ++ready;
      }
      std::lock_guard lock(mu);
      out.ms.insert(out.ms.end(), mine.begin(), mine.end());
    });
  }
  while (ready < clients) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto t0 = clk::now();
  go = true;
  for (auto& t : ts) t.join();
  out.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  out.failures = failures;
  out.bytes = bytes;
  return out;
}

// Reads an event stream until it has seen `count` events (or the deadline).
int count_events(asio::ip::tcp::socket& sock, int count, clk::time_point deadline) {
  int seen = 0;
  std::string text;
  char buf[65536];
  sock.non_blocking(true);
  while (seen < count && clk::now() < deadline) {
    boost::system::error_code ec;
    const std::size_t n = sock.read_some(asio::buffer(buf), ec);
    if (ec == asio::error::would_block) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (ec) break;
    text.append(buf, n);
    std::size_t at = 0;
    while ((at = text.find("event: job\n")) != std::string::npos) {
      ++seen;
      text.erase(0, at + 11);
    }
  }
  return seen;
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One event-stream watcher of the sustained test: a thread reading its
// socket, noting each job event's lag (now minus the event's commit time).
struct watcher {
  asio::io_context io;
  asio::ip::tcp::socket sock{io};
  std::thread reader;
  std::vector<double> lag_ms;
  std::atomic<std::int64_t> seen{0};
  std::atomic<bool> stop{false};
  std::int64_t after_job = 0;

  watcher(unsigned short port, const std::string& token, std::int64_t after) : after_job(after) {
    sock.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    const std::string req = "GET /api/v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n\r\n";
    asio::write(sock, asio::buffer(req));
    lag_ms.reserve(1 << 14);
    reader = std::thread([this] { run(); });
  }
  ~watcher() {
    stop = true;
    boost::system::error_code ec;
    sock.shutdown(asio::socket_base::shutdown_both, ec);
    if (reader.joinable()) reader.join();
  }
  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;
  void run() {
    std::string text;
    char buf[65536];
    while (!stop) {
      boost::system::error_code ec;
      const std::size_t n = sock.read_some(asio::buffer(buf), ec);
      if (ec) break;
      const double now = wall_s();
      text.append(buf, n);
      std::size_t at = 0;
      for (;;) {
        const auto ev = text.find("event: job\ndata: ", at);
        if (ev == std::string::npos) break;
        const auto end = text.find("\n\n", ev);
        if (end == std::string::npos) break;
        // Only the test's jobs (ids above the blocker's): a late event of
        // an earlier phase must not stand in for a missed one.
        const auto id = text.find("\"job_id\":", ev);
        const bool ours = id != std::string::npos && id < end && std::strtoll(text.c_str() + id + 9, nullptr, 10) > after_job;
        const auto t = text.find("\"time\":", ev);
        if (ours && t != std::string::npos && t < end) {
          lag_ms.push_back((now - std::strtod(text.c_str() + t + 7, nullptr)) * 1000.0);
        }
        if (ours) ++seen;
        at = end + 2;
      }
      text.erase(0, at);
    }
  }
};

// The sustained test (see the top of this file). Returns its JSON.
nlohmann::json sustained(aqs::bench::system& sys, client::connection& w, unsigned short port, const std::string& token,
                         int watchers, int rate, int seconds) {
  // A job on every processor: what is submitted next waits.
  protocol::submit blocker;
  blocker.id = w.next_id();
  blocker.job.name = "blocker";
  blocker.job.argv = {"sleep", "3600"};
  blocker.job.workdir = sys.work().string();
  blocker.job.stdout_pattern = "/dev/null";
  blocker.job.min_pe = blocker.job.max_pe = 8;
  const std::int64_t blocker_id = w.ask(blocker).job_id;
  for (int i = 0; i < 600; ++i) {
    protocol::list_jobs l;
    l.id = w.next_id();
    l.job_ids = {blocker_id};
    const auto jobs = w.call(l)["jobs"];
    if (!jobs.empty() && jobs[0].value("state", "") == "RUNNING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::vector<std::unique_ptr<watcher>> ws;
  for (int i = 0; i < watchers; ++i) ws.push_back(std::make_unique<watcher>(port, token, blocker_id));
  std::this_thread::sleep_for(std::chrono::seconds(1));  // subscribed (nothing changes meanwhile)

  // Submissions at rate/2 a second, each job cancelled a second after its
  // submission was answered: `rate` changes a second once under way.
  const double interval = 2.0 / rate;
  const int total = rate * seconds / 2;
  std::map<std::int64_t, clk::time_point> submit_ids;  // request id -> sent
  std::deque<std::pair<clk::time_point, std::int64_t>> to_cancel;  // (when, job)
  int submitted = 0, cancelled = 0, answered = 0, errors = 0;
  const auto t0 = clk::now();
  auto drain = [&](std::chrono::milliseconds wait) {
    while (auto m = w.next(wait)) {
      wait = std::chrono::milliseconds(0);
      if (const auto* ok = std::get_if<protocol::ok>(&*m)) {
        if (auto it = submit_ids.find(ok->id); it != submit_ids.end()) {
          to_cancel.emplace_back(clk::now() + std::chrono::seconds(1), ok->result.at("job_id").get<std::int64_t>());
          submit_ids.erase(it);
        }
        ++answered;
      } else if (std::holds_alternative<protocol::error>(*m)) {
        if (errors++ == 0) std::fprintf(stderr, "sustained: %s\n", std::get<protocol::error>(*m).message.c_str());
      }
    }
  };
  while (cancelled < total) {
    const auto now = clk::now();
    if (submitted < total && now >= t0 + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(submitted * interval))) {
      protocol::submit s;
      s.id = w.next_id();
      s.job.name = "sustained-" + std::to_string(submitted);
      s.job.argv = {"true"};
      s.job.workdir = sys.work().string();
      s.job.stdout_pattern = "/dev/null";
      submit_ids.emplace(s.id, now);
      w.send(s);
      ++submitted;
    }
    while (!to_cancel.empty() && to_cancel.front().first <= now) {
      protocol::cancel c;
      c.id = w.next_id();
      c.job_ids = {to_cancel.front().second};
      to_cancel.pop_front();
      w.send(c);
      ++cancelled;
    }
    // At least a few ms: the client reads nothing when its wait rounds down to 0.
    drain(std::chrono::milliseconds(5));
    if (now - t0 > std::chrono::seconds(seconds * 4 + 60)) {
      throw std::runtime_error("sustained: aqsd fell far behind: " + std::to_string(submitted) + " submitted, " +
                               std::to_string(answered) + " answers, " + std::to_string(cancelled) + " cancelled of " +
                               std::to_string(total) + ", " + std::to_string(errors) + " errors");
    }
  }
  const double generated_s = std::chrono::duration<double>(clk::now() - t0).count();
  const std::int64_t expected = 2 * static_cast<std::int64_t>(total);
  // Up to 30 s for the last events to reach every watcher.
  const auto grace = clk::now() + std::chrono::seconds(30);
  while (clk::now() < grace) {
    drain(std::chrono::milliseconds(20));
    bool all = true;
    for (auto& x : ws) all = all && x->seen >= expected;
    if (all) break;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (auto& x : ws) {  // stop the readers: their counts and lags are then complete
    x->stop = true;
    boost::system::error_code ec;
    x->sock.shutdown(asio::socket_base::shutdown_both, ec);
    x->reader.join();
  }
  std::vector<double> lags;
  std::int64_t missed = 0, min_seen = expected, extra = 0;
  int short_watchers = 0;
  for (auto& x : ws) {
    lags.insert(lags.end(), x->lag_ms.begin(), x->lag_ms.end());
    const std::int64_t n = x->seen;
    min_seen = std::min(min_seen, n);
    if (n < expected) {
      missed += expected - n;
      ++short_watchers;
    } else {
      extra += n - expected;
    }
  }
  ws.clear();
  protocol::cancel c;
  c.id = w.next_id();
  c.job_ids = {blocker_id};
  w.call(c);
  const double p50 = aqs::bench::median(lags), p99 = aqs::bench::pct(lags, 0.99);
  const double worst = lags.empty() ? 0 : *std::max_element(lags.begin(), lags.end());
  const double achieved = static_cast<double>(expected) / generated_s;
  std::printf("sustained: %d watchers, %d changes/s asked, %.1f/s made for %.1f s (%lld changes): "
              "lag p50 %.1f ms, p99 %.1f ms, max %.1f ms; missed %lld events (%d watchers short), %d errors\n",
              watchers, rate, achieved, generated_s, static_cast<long long>(expected), p50, p99, worst,
              static_cast<long long>(missed), short_watchers, errors);
  (void)extra;
  return {{"watchers", watchers},          {"rate_asked_per_s", rate}, {"rate_made_per_s", achieved},
          {"seconds", generated_s},        {"changes", expected},      {"lag_p50_ms", p50},
          {"lag_p99_ms", p99},             {"lag_max_ms", worst},      {"missed_events", missed},
          {"watchers_missing_events", short_watchers}, {"min_events_seen", min_seen}, {"errors", errors},
          {"lags_measured", lags.size()}};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, sustained_only = false;
  int jobs = 10000, clients = 200, requests = 5, watchers = 100, rate = 100, seconds = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return std::stoi(argv[++i]);
    };
    if (a == "--quick") {
      quick = true;
    } else if (a == "--jobs") {
      jobs = next();
    } else if (a == "--clients") {
      clients = next();
    } else if (a == "--requests") {
      requests = next();
    } else if (a == "--sustained-only") {
      sustained_only = true;
    } else if (a == "--watchers") {
      watchers = next();
    } else if (a == "--rate") {
      rate = std::max(2, next());
    } else if (a == "--seconds") {
      seconds = std::max(1, next());
    } else {
      std::fprintf(stderr,
                   "usage: bench_http [--quick] [--sustained-only] [--jobs N] [--clients N] [--requests N] "
                   "[--watchers N] [--rate N] [--seconds N]\n");
      return 2;
    }
  }
  if (quick) {
    jobs = std::min(jobs, 1000);
    clients = std::min(clients, 20);
    watchers = 10;
    seconds = std::min(seconds, 5);
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::signal(SIGPIPE, SIG_IGN);
  aqs::bench::stop_on_signals();
  nlohmann::json results = {{"benchmark", "http"}, {"jobs", jobs}, {"clients", clients}, {"requests_per_client", requests}};
  try {
    aqs::bench::system sys({AQS_AQSD_BINARY, AQS_NODE_BINARY, 1, 8, {"--http", "127.0.0.1:0", "--max-connections-per-user", "1024"}});
    const auto port = static_cast<unsigned short>(sys.http_port());
    client::connection w(sys.socket());
    const std::string token = w.ask(protocol::issue_token{w.next_id(), 3600}).token;
    if (sustained_only) {
      results = {{"benchmark", "http_sustained"}};
      results["sustained"] = sustained(sys, w, port, token, watchers, rate, seconds);
      aqs::bench::write_results("http_sustained", results);
      return 0;
    }

    // The queue: pipelined submissions of jobs that sleep (8 run, the rest wait).
    const auto t_submit = clk::now();
    for (int i = 0; i < jobs; ++i) {
      protocol::submit s;
      s.id = w.next_id();
      s.job.name = "bench-" + std::to_string(i);
      s.job.argv = {"sleep", "3600"};
      s.job.workdir = sys.work().string();
      s.job.stdout_pattern = "/dev/null";
      w.send(s);
      if (i % 500 == 499 || i + 1 == jobs) {
        // Drain the replies so far (aqsd answers each once committed).
        int expect = (i % 500) + 1;
        while (expect > 0) {
          auto m = w.next(std::chrono::seconds(120));
          if (!m) throw std::runtime_error("no reply to a submission in 120 s");
          if (std::holds_alternative<protocol::error>(*m)) throw std::runtime_error(std::get<protocol::error>(*m).message);
          if (std::holds_alternative<protocol::ok>(*m)) --expect;
        }
      }
    }
    std::printf("%d jobs submitted in %.1f s\n", jobs, std::chrono::duration<double>(clk::now() - t_submit).count());
    std::printf("%-56s %10s %10s %10s %10s\n", "GET", "p50 ms", "p99 ms", "req/s", "MB/s");
    auto measure = [&](const std::string& key, const std::string& target, int n) {
      (void)load(port, token, target, 2, 1);  // warm up
      const load_result r = load(port, token, target, clients, n);
      const double p50 = aqs::bench::median(r.ms), p99 = aqs::bench::pct(r.ms, 0.99);
      const double rate = static_cast<double>(r.ms.size()) / r.seconds;
      std::printf("%-56s %10.1f %10.1f %10.1f %10.1f\n", (target + " x" + std::to_string(clients)).c_str(), p50, p99, rate,
                  static_cast<double>(r.bytes) / r.seconds / 1e6);
      results[key] = {{"target", target}, {"p50_ms", p50}, {"p99_ms", p99}, {"requests_per_s", rate},
                      {"requests", r.ms.size()}, {"failures", r.failures},
                      {"bytes_per_response", r.ms.empty() ? 0.0 : static_cast<double>(r.bytes) / static_cast<double>(r.ms.size())}};
      if (r.failures > 0) throw std::runtime_error(std::to_string(r.failures) + " failed requests on " + target);
    };
    measure("jobs_page", "/api/v1/jobs", requests);
    measure("jobs_all", "/api/v1/jobs?limit=10000", std::max(1, requests / 5));
    measure("job_one", "/api/v1/jobs/" + std::to_string(jobs / 2), requests * 4);
    measure("cluster_map", "/api/v1/cluster/map", requests * 4);
    measure("metrics", "/metrics", requests * 4);

    // Event streams: `watchers` clients, then the queue cancelled by user in
    // one request (every job changes state once): time until every watcher
    // has seen every change.
    std::vector<std::unique_ptr<asio::io_context>> ios;
    std::vector<std::unique_ptr<asio::ip::tcp::socket>> socks;
    for (int i = 0; i < watchers; ++i) {
      ios.push_back(std::make_unique<asio::io_context>());
      socks.push_back(std::make_unique<asio::ip::tcp::socket>(*ios.back()));
      socks.back()->connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
      const std::string req = "GET /api/v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n\r\n";
      asio::write(*socks.back(), asio::buffer(req));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // subscribed
    const auto t_cancel = clk::now();
    protocol::cancel all;
    all.id = w.next_id();
    all.user = "root";
    w.call(all);
    std::vector<double> done_s(static_cast<std::size_t>(watchers), -1);
    std::vector<int> seen(static_cast<std::size_t>(watchers), 0);
    std::vector<std::thread> readers;
    for (int i = 0; i < watchers; ++i) {
      readers.emplace_back([&, i] {
        seen[static_cast<std::size_t>(i)] = count_events(*socks[static_cast<std::size_t>(i)], jobs, t_cancel + std::chrono::seconds(300));
        done_s[static_cast<std::size_t>(i)] = std::chrono::duration<double>(clk::now() - t_cancel).count();
      });
    }
    for (auto& t : readers) t.join();
    const int min_seen = *std::min_element(seen.begin(), seen.end());
    const double last = *std::max_element(done_s.begin(), done_s.end());
    std::printf("%d watchers, %d cancellations: every watcher saw %d events; the last one all of them after %.2f s (%.0f events/s each)\n",
                watchers, jobs, min_seen, last, min_seen / last);
    results["events"] = {{"watchers", watchers}, {"changes", jobs}, {"min_events_seen", min_seen},
                         {"all_delivered_s", last}, {"events_per_s_per_watcher", min_seen / last}};
    socks.clear();
    ios.clear();
    // The queue is empty again: the sustained test.
    results["sustained"] = sustained(sys, w, port, token, watchers, rate, seconds);
    aqs::bench::write_results("http", results);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_http: %s\n", e.what());
    return 1;
  }
  return 0;
}
