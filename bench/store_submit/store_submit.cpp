// bench_store_submit: N client threads submitting through job_store against a
// private, durable PostgreSQL (fsync and synchronous_commit on, as in
// production); then recovery and fjobs listing times over 100,000 jobs.
// Prints a table and writes $AQS_BENCH_RESULTS/store_submit.json.
//   bench_store_submit [--seconds S] [--committers N] [--jobs N] [--wal-sync METHOD]
// --wal-sync sets the server's wal_sync_method (all methods are durable;
// which is fastest depends on the disk: see pg_test_fsync).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <pqxx/pqxx>

#include "store/pg_job_store.hpp"
#include "store/migrations.hpp"
#include "store/pg_server.hpp"

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;
using namespace aqs::store;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "aqs-bench-store.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

job_submission request(int client, long n) {
  job_submission q;
  q.user_name = "user" + std::to_string(client % 8);
  q.uid = 1000 + client % 8;
  q.gid = 1000;
  q.name = "bench-" + std::to_string(n);
  q.script = "#!/bin/bash\n#AQS -n 4\nsrun ./app --input data/" + std::to_string(n) + ".in\n";
  q.workdir = "/home/" + q.user_name + "/run";
  q.environment = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/" + q.user_name, "OMP_NUM_THREADS=1"};
  q.adaptive = n % 2 == 0;
  q.min_pe = 2;
  q.max_pe = q.adaptive ? 16 : 2;
  q.walltime_s = 3600;
  return q;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

struct run_result {
  int clients;
  int in_flight;
  long submissions;
  double seconds;
  double per_second;
  double p50_ms, p99_ms;
  double jobs_per_batch;
};

// `clients` threads, each with up to `in_flight` submissions outstanding
// (1: a synchronous client that waits for each acknowledgement).
run_result submit_run(job_store& store, int clients, int in_flight, double seconds) {
  const auto before = store.stats();
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  const auto t0 = clk::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto& mine = lat[static_cast<std::size_t>(c)];
      std::deque<std::pair<std::future<std::int64_t>, clk::time_point>> pending;
      auto finish_one = [&] {
        pending.front().first.get();
        mine.push_back(std::chrono::duration<double, std::milli>(clk::now() - pending.front().second).count());
        pending.pop_front();
      };
      for (long n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        const auto s = clk::now();
        pending.emplace_back(store.submit_async(request(c, n)), s);
        if (static_cast<int>(pending.size()) >= in_flight) finish_one();
      }
      while (!pending.empty()) finish_one();
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(clk::now() - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  const auto after = store.stats();
  run_result r{};
  r.clients = clients;
  r.in_flight = in_flight;
  r.submissions = static_cast<long>(all.size());
  r.seconds = elapsed;
  r.per_second = static_cast<double>(all.size()) / elapsed;
  r.p50_ms = percentile(all, 0.50);
  r.p99_ms = percentile(all, 0.99);
  const auto batches = after.batches - before.batches;
  r.jobs_per_batch = batches ? static_cast<double>(after.submissions - before.submissions) / static_cast<double>(batches) : 0;
  return r;
}

template <class F>
double best_ms(int reps, F&& f) {
  double best = 1e18;
  for (int i = 0; i < reps; ++i) {
    const auto s = clk::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(clk::now() - s).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  unsigned committers = pg_job_store_options{}.committers;
  long total_jobs = 100'000;
  std::string wal_sync;
  bool durable = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (a == "--committers") committers = static_cast<unsigned>(std::stoul(argv[i + 1]));
    else if (a == "--jobs") total_jobs = std::stol(argv[i + 1]);
    else if (a == "--wal-sync") wal_sync = argv[i + 1];
    else if (a == "--durable") durable = std::string(argv[i + 1]) != "no";  // "no": diagnosis only, fsync off
    else {
      std::fprintf(stderr, "bench_store_submit: unknown option %s (known: --seconds --committers --jobs --wal-sync --durable)\n", a.c_str());
      return 2;
    }
  }
  try {
    temp_dir dir;
    pg_server server({.dir = dir.path, .durable = durable});
    server.start();
    {
      pqxx::connection c(server.connection_string());
      apply_migrations(c);
      if (!wal_sync.empty()) {
        pqxx::nontransaction tx(c);
        tx.exec0("ALTER SYSTEM SET wal_sync_method = " + tx.quote(wal_sync));
      }
    }
    if (!wal_sync.empty()) {
      server.stop();
      server.start();
    }
    std::string method;
    {
      pqxx::connection c(server.connection_string());
      pqxx::nontransaction tx(c);
      method = tx.exec1("SHOW wal_sync_method")[0].as<std::string>();
      if (durable && (tx.exec1("SHOW fsync")[0].as<std::string>() != "on" ||
                      tx.exec1("SHOW synchronous_commit")[0].as<std::string>() != "on")) {
        throw std::runtime_error("the server is not durable (fsync or synchronous_commit off)");
      }
    }
    pg_job_store_options o;
    o.conninfo = server.connection_string();
    o.committers = committers;
    pg_job_store store(o);

    std::printf("%s submissions through job_store (fsync %s, synchronous_commit on, wal_sync_method %s, "
                "%u committers)\n", durable ? "durable" : "NOT DURABLE (diagnosis)", durable ? "on" : "off",
                method.c_str(), committers);
    std::printf("%8s %10s %12s %14s %10s %10s %12s\n", "clients", "in flight", "submitted", "per second",
                "p50 ms", "p99 ms", "jobs/commit");
    std::vector<run_result> runs;
    // Synchronous clients (the measure), then 16 clients with 8 submissions
    // outstanding each: as many concurrent submitters as a busy aqsd has.
    for (auto [clients, in_flight] : {std::pair{1, 1}, {4, 1}, {16, 1}, {16, 8}}) {
      runs.push_back(submit_run(store, clients, in_flight, seconds));
      const auto& r = runs.back();
      std::printf("%8d %10d %12ld %14.0f %10.2f %10.2f %12.1f\n", r.clients, r.in_flight, r.submissions,
                  r.per_second, r.p50_ms, r.p99_ms, r.jobs_per_batch);
    }

    // Recovery and listing over exactly total_jobs jobs, in a database of
    // their own (the submit runs above wrote however many they managed): all
    // live, a few hundred running with maps, as a busy cluster would have.
    {
      pqxx::connection c(server.ensure_database("aqs_recovery"));
      apply_migrations(c);
    }
    o.conninfo = server.connection_string("aqs_recovery");
    pg_job_store filled(o);
    std::vector<std::future<std::int64_t>> futures;
    for (long n = 0; n < total_jobs; ++n) futures.push_back(filled.submit_async(request(static_cast<int>(n % 16), n)));
    for (auto& f : futures) f.get();
    for (std::int64_t id = 1; id <= std::min<std::int64_t>(500, total_jobs); ++id) {
      aqs::core::processor_set map(1024);
      map.set_range(static_cast<std::size_t>(id % 256) * 4, static_cast<std::size_t>(id % 256) * 4 + 4);
      filled.transition({.job_id = id, .to = aqs::core::job_state::running, .procs = map});
    }
    {
      pqxx::connection c(o.conninfo);
      pqxx::nontransaction tx(c);
      tx.exec0("VACUUM ANALYZE");
    }

    std::size_t loaded = 0, listed = 0, listed_user = 0;
    const double recovery_ms = best_ms(3, [&] {
      pg_job_store fresh(o);  // what aqsd does at start: connect, then load
      loaded = fresh.load_live_state().jobs.size();
    });
    const double list_ms = best_ms(3, [&] { listed = filled.list_jobs({.include_finished = true}).size(); });
    const double list_user_ms = best_ms(3, [&] { listed_user = filled.list_jobs({.user_name = "user3"}).size(); });
    std::printf("\n%-44s %10s %10s\n", "a store of --jobs jobs (best of 3)", "jobs", "ms");
    std::printf("%-44s %10zu %10.1f\n", "recovery: connect + load_live_state", loaded, recovery_ms);
    std::printf("%-44s %10zu %10.1f\n", "fjobs --all: list_jobs(include_finished)", listed, list_ms);
    std::printf("%-44s %10zu %10.1f\n", "fjobs -u user3: list_jobs(user)", listed_user, list_user_ms);

    const char* env = std::getenv("AQS_BENCH_RESULTS");
    const fs::path out_dir = env && *env ? fs::path(env) : fs::path("bench/results");
    fs::create_directories(out_dir);
    std::ofstream js(out_dir / "store_submit.json");
    js << "{\n  \"benchmark\": \"store_submit\",\n  \"cpus\": " << std::thread::hardware_concurrency()
       << ",\n  \"durable\": " << (durable ? "true" : "false") << ",\n  \"wal_sync_method\": \"" << method << "\",\n  \"committers\": " << committers << ",\n  \"seconds_per_run\": " << seconds
       << ",\n  \"submit\": [\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      js << "    {\"clients\": " << r.clients << ", \"in_flight\": " << r.in_flight << ", \"submissions\": " << r.submissions
         << ", \"per_second\": " << r.per_second << ", \"p50_ms\": " << r.p50_ms << ", \"p99_ms\": " << r.p99_ms
         << ", \"jobs_per_commit\": " << r.jobs_per_batch << "}" << (i + 1 < runs.size() ? "," : "") << "\n";
    }
    js << "  ],\n  \"recovery\": {\"jobs\": " << loaded << ", \"ms\": " << recovery_ms << "},\n"
       << "  \"list_all\": {\"jobs\": " << listed << ", \"ms\": " << list_ms << "},\n"
       << "  \"list_user\": {\"jobs\": " << listed_user << ", \"ms\": " << list_user_ms << "}\n}\n";
    std::printf("\nJSON: %s\n", (out_dir / "store_submit.json").c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_store_submit: %s\n", e.what());
    return 1;
  }
  return 0;
}
