// aqs-sim: the trace-driven simulator's command line (parses, runs, formats; nothing else).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/strategy.hpp"
#include "sim/events.hpp"
#include "sim/simulator.hpp"
#include "sim/swf.hpp"
#include "sim/workload.hpp"

namespace {

int fail(const std::string& msg) {
  std::cerr << "aqs-sim: " << msg << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aqs-sim: replay a workload log (SWF) or a synthetic workload through the AQS scheduling core"};
  std::string trace, policy, jobs_out, speedup = "linear", events;
  std::size_t procs = 0, node_procs = 1, generate = 0;
  double malleable = 0, resize_cost = 0, load = 0.5, mean_runtime = 64.5;
  double suspend_fraction = 0, suspend_duration = 600, range_change_fraction = 0;
  std::uint64_t seed = 1;
  bool json = false;
  bool fairshare = false;
  double half_life = 7 * 86400.0;
  std::uint32_t fairshare_weight = 10000, age_weight = 0;
  auto* trace_opt = app.add_option("--trace", trace, "SWF log, plain or .gz");
  auto* gen_opt = app.add_option("--generate", generate, "instead of --trace: N synthetic jobs (Poisson arrivals)");
  trace_opt->excludes(gen_opt);
  // The list comes from the core's registry, in the order the contract shows it.
  std::string listed = "fcfs, easy, equipartition";
  for (const auto& n : aqs::core::strategy_names()) {
    if (n != "fcfs" && n != "easy" && n != "equipartition") listed += ", " + n;
  }
  app.add_option("--policy", policy, "scheduling policy (" + listed + ")")->required();
  app.add_option("--procs", procs, "machine size (default: the trace's MaxProcs; 64 for --generate)");
  app.add_option("--node-procs", node_procs, "processors per node in the cluster model (default 1)");
  app.add_flag("--json", json, "print one JSON object instead of the report");
  app.add_option("--jobs-out", jobs_out, "write one CSV line per job to this file");
  app.add_option("--malleable", malleable,
                 "fraction of jobs made adaptive, with preferred sizes (policies that resize; 0..1)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--speedup", speedup,
                 "adaptive jobs' speedup model: linear, amdahl:F, or drawn (each job its own Amdahl F)");
  double min_interval = aqs::core::strategy_params{}.min_resize_interval;
  app.add_option("--min-resize-interval", min_interval,
                 "payoff, payoff_lxf: seconds between two resizes of a job (default 60)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resize-cost", resize_cost, "seconds without progress per resize")->check(CLI::NonNegativeNumber);
  app.add_option("--load", load, "--generate: load factor (offered work / capacity)")->check(CLI::PositiveNumber);
  app.add_option("--mean-runtime", mean_runtime, "--generate: mean run time in seconds")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "seed for --generate, --malleable and the synthesised events");
  app.add_option("--events", events, "suspend/resume/range events: lines 'TIME JOB suspend|resume' or 'TIME JOB range MIN MAX'");
  app.add_option("--suspend-fraction", suspend_fraction, "suspend this fraction of the jobs once, mid-run (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--suspend-duration", suspend_duration, "seconds each --suspend-fraction job stays suspended (default 600)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--range-change-fraction", range_change_fraction,
                 "this fraction of the adaptive jobs asks for a doubled or halved range mid-run (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  auto* fs_opt = app.add_flag("--fairshare", fairshare,
                              "order the queue by fair share between the trace's users (equal shares, multifactor priority)");
  app.add_option("--fairshare-half-life", half_life,
                 "--fairshare: half-life of past usage in seconds (default 604800, 0: no decay)")
      ->check(CLI::NonNegativeNumber)
      ->needs(fs_opt);
  app.add_option("--priority-weight-fairshare", fairshare_weight, "--fairshare: PriorityWeightFairshare (default 10000)")
      ->check(CLI::Range(1u, 100'000'000u))
      ->needs(fs_opt);
  app.add_option("--priority-weight-age", age_weight,
                 "--fairshare: PriorityWeightAge, reached at 7 days of waiting (default 0)")
      ->check(CLI::Range(0u, 100'000'000u))
      ->needs(fs_opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    return fail(std::string(e.what()) + " (see --help)");
  }
  if (trace.empty() && generate == 0) return fail("give --trace FILE or --generate N (see --help)");

  try {
    aqs::sim::sim_options opt;
    opt.policy = policy;
    opt.procs_per_node = node_procs;
    const bool drawn = speedup == "drawn";
    opt.speedup = aqs::sim::speedup_model::parse(drawn ? "linear" : speedup);
    opt.resize_cost = resize_cost;
    opt.params.min_resize_interval = min_interval;
    // A job that declares no cost: the run's cost (every simulated job declares it anyway).
    opt.params.default_resize_cost = resize_cost;
    opt.suspend_fraction = suspend_fraction;
    opt.suspend_duration = suspend_duration;
    opt.range_change_fraction = range_change_fraction;
    opt.seed = seed;
    if (fairshare) {
      opt.priority.fairshare = fairshare_weight;
      opt.priority.age = age_weight;
      opt.priority.half_life_s = half_life;
    }
    if (!events.empty()) {
      aqs::sim::event_file ef = aqs::sim::read_events(events);
      if (ef.malformed > 0) {
        const auto& e = ef.errors.front();
        std::string more = ef.malformed > 1 ? fmt::format(" (and {} more bad lines)", ef.malformed - 1) : "";
        return fail(fmt::format("{} line {}: {}{}", events, e.line, e.reason, more));
      }
      opt.events = std::move(ef.events);
    }
    const bool resizes = aqs::core::make_strategy(policy)->resizes();  // an unknown name fails here, listing the known ones

    aqs::sim::workload w;
    aqs::sim::swf_trace t;
    std::string source;
    if (!trace.empty()) {
      t = aqs::sim::read_swf(trace);
      if (procs == 0) {
        if (!t.max_procs) return fail(trace + " has no MaxProcs header: give --procs");
        procs = static_cast<std::size_t>(*t.max_procs);
      }
      w = aqs::sim::filter_trace(t, procs);
      source = trace;
    } else {
      aqs::sim::generator_params g;
      g.jobs = generate;
      g.procs = procs ? procs : 64;
      g.load = load;
      g.mean_runtime = mean_runtime;
      g.seed = seed;
      w = aqs::sim::generate(g);
      source = fmt::format("synthetic: {} jobs, load {}, mean run time {} s, seed {}", generate, load, mean_runtime, seed);
    }
    // Rigid policies never resize: --malleable only changes runs of policies that do.
    bool applied = malleable > 0 && resizes;
    if (applied) aqs::sim::make_malleable(w, malleable, seed, drawn);

    auto t0 = std::chrono::steady_clock::now();
    aqs::sim::sim_result r = aqs::sim::simulate(w, opt);
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (!jobs_out.empty()) {
      std::ofstream out(jobs_out);
      if (!out) return fail("cannot write " + jobs_out);
      out << "id,submit,start,end,wait,run,procs,min_pe,max_pe,adaptive,resizes,bsld,suspensions,suspended\n";
      for (const auto& j : r.jobs) {
        // run = end - start (suspended time included); the slowdown counts suspended time as waiting.
        double wait = j.start - j.submit, run = j.end - j.start;
        out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.4f},{},{}\n", j.id, j.submit, j.start, j.end, wait, run,
                           j.first_procs, j.min_pe, j.max_pe, j.adaptive ? 1 : 0, j.resizes,
                           aqs::sim::bounded_slowdown(wait + j.suspended_s, run - j.suspended_s), j.suspensions,
                           j.suspended_s);
      }
      if (!out) return fail("cannot write " + jobs_out);
    }

    if (json) {
      nlohmann::json o;
      o["source"] = source;
      o["policy"] = policy;
      o["procs"] = r.procs;
      o["jobs"] = r.jobs.size();
      o["skipped"] = w.skipped;
      o["skipped_by_reason"] = w.skipped_by_reason;
      o["malformed_lines"] = t.malformed;
      nlohmann::json errs = nlohmann::json::array();
      for (const auto& e : t.errors) errs.push_back({{"line", e.line}, {"reason", e.reason}});
      o["malformed"] = errs;
      o["filter"] = "skip run/requested time/requested procs <= 0 or > machine; run cut to requested time; size = requested procs";
      o["mean_wait_s"] = r.mean_wait;
      o["mean_response_s"] = r.mean_response;
      o["mean_bsld"] = r.mean_bsld;
      o["bsld_tau_s"] = 10;
      o["utilization"] = r.utilization;
      o["makespan_s"] = r.makespan;
      o["wall_s"] = r.wall_s;
      o["malleable"] = applied ? malleable : 0.0;
      o["speedup"] = drawn ? std::string("drawn") : opt.speedup.name();
      o["resize_cost_s"] = resize_cost;
      o["resizes"] = r.resizes;
      o["resizes_per_job"] = r.jobs.empty() ? 0.0 : static_cast<double>(r.resizes) / static_cast<double>(r.jobs.size());
      o["min_resize_interval_s"] = min_interval;
      o["ranks_moved"] = r.ranks_moved;
      o["events_file"] = events;
      o["suspend_fraction"] = suspend_fraction;
      o["suspend_duration_s"] = suspend_duration;
      o["range_change_fraction"] = range_change_fraction;
      o["suspends"] = r.suspends;
      o["resumes"] = r.resumes;
      o["range_changes"] = r.range_changes;
      o["deferred_suspends"] = r.deferred_suspends;
      o["resumed_at_end"] = r.resumed_at_end;
      o["unblocked_resumes"] = r.unblocked_resumes;
      o["events_skipped"] = r.events_skipped;
      o["events_skipped_by_reason"] = r.events_skipped_by_reason;
      o["mean_suspended_s"] = r.mean_suspended_s;
      o["fairshare"] = fairshare;
      if (fairshare) {
        o["fairshare_half_life_s"] = half_life;
        o["priority_weight_fairshare"] = fairshare_weight;
        o["priority_weight_age"] = age_weight;
        o["priority_changes"] = r.priority_changes;
        nlohmann::json users = nlohmann::json::object();
        for (const auto& [u, v] : r.user_usage) users[std::to_string(u)] = v;
        o["user_usage_cpu_s"] = users;
      }
      std::cout << o.dump() << "\n";
    } else {
      std::cout << fmt::format("aqs-sim  {}\n", source);
      std::cout << fmt::format("policy   {} on {} processors ({}-processor nodes)\n", policy, r.procs, node_procs);
      if (malleable > 0) {
        std::cout << (applied ? fmt::format("malleable {:.0f}% of jobs, speedup {}, resize cost {} s\n",
                                            malleable * 100, drawn ? std::string("drawn") : opt.speedup.name(), resize_cost)
                              : std::string("malleable ignored: rigid policies never resize\n"));
      }
      std::cout << fmt::format("jobs     {} simulated, {} skipped by the filter", r.jobs.size(), w.skipped);
      std::string why;
      for (const auto& [k, v] : w.skipped_by_reason) why += fmt::format("{}{} {}", why.empty() ? "" : ", ", k, v);
      std::cout << (why.empty() ? "\n" : " (" + why + ")\n");
      std::cout << "filter   skip jobs with run time, requested time or requested processors <= 0 or larger than\n"
                   "         the machine; run time cut to the requested time; size = requested processors\n";
      if (t.malformed > 0) {
        std::cout << fmt::format("malformed {} lines:", t.malformed);
        for (const auto& e : t.errors) std::cout << fmt::format(" line {} ({});", e.line, e.reason);
        std::cout << "\n";
      }
      std::cout << fmt::format("mean wait      {:14.1f} s\n", r.mean_wait);
      std::cout << fmt::format("mean response  {:14.1f} s\n", r.mean_response);
      std::cout << fmt::format("mean bsld      {:14.2f}   (tau 10 s)\n", r.mean_bsld);
      std::cout << fmt::format("utilization    {:14.4f}\n", r.utilization);
      std::cout << fmt::format("makespan       {:14.0f} s\n", r.makespan);
      if (r.resizes > 0) std::cout << fmt::format("resizes        {:14}   ({} ranks moved)\n", r.resizes, r.ranks_moved);
      if (!events.empty() || suspend_fraction > 0 || range_change_fraction > 0) {
        std::cout << fmt::format("events         {} suspends, {} resumes, {} range changes applied", r.suspends,
                                 r.resumes, r.range_changes);
        if (r.resumed_at_end > 0) std::cout << fmt::format("; {} resumed at the end", r.resumed_at_end);
        std::cout << fmt::format("; {} skipped", r.events_skipped);
        std::string why;
        for (const auto& [k, v] : r.events_skipped_by_reason) why += fmt::format("{}{} {}", why.empty() ? "" : ", ", k, v);
        std::cout << (why.empty() ? "\n" : " (" + why + ")\n");
        std::cout << fmt::format("mean suspended {:14.1f} s\n", r.mean_suspended_s);
      }
      if (fairshare) {
        std::cout << fmt::format("fair share     {} users, half-life {} s, weights fairshare {} age {}; {} priority changes\n",
                                 r.user_usage.size(), half_life, fairshare_weight, age_weight, r.priority_changes);
      }
      std::cout << fmt::format("wall time      {:14.3f} s\n", r.wall_s);
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}
