#!/usr/bin/env python3
"""The preferred-size policies study (issue 34): regenerates the table in docs/simulator.md.

Runs aqs-sim (niced) on the shipped KTH-SP2 and LLNL-Atlas logs and on the
synthetic Faucets workload, at 0, 10, 20, 50 and 100 % malleable, for easy,
equipartition, pref_common_pool, payoff and payoff_lxf, 5 seeds each (Amdahl 0.95, 10 s
per resize), prints a markdown table (mean over the seeds +- their standard
deviation) and writes bench/results/policy_study.json.

  bench/policies/study.py [--sim build/scheduler/sim/aqs-sim] [--jobs 2]
                          [--workloads kth,llnl,faucets] [--seeds 5]
                          [--fractions 0,0.1,0.2,0.5,1] [--policies ...]
                          [--cache runs.jsonl]   (resume: finished runs are kept there)
                          [--from-json bench/results/policy_study.json]   (table only)
"""
import argparse
import concurrent.futures
import json
import os
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = {
    "kth": ["--trace", os.path.join(ROOT, "traces/KTH-SP2-1996-2.1-cln.swf.gz")],
    "llnl": ["--trace", os.path.join(ROOT, "traces/LLNL-Atlas-2006-2.1-cln.swf.gz")],
    # The Faucets experiment's generator (docs/simulator.md) at load 0.9, where queues form.
    "faucets": ["--generate", "5000", "--procs", "64", "--load", "0.9", "--mean-runtime", "64.5"],
}
NAMES = {"kth": "KTH-SP2", "llnl": "LLNL-Atlas", "faucets": "Faucets synthetic (load 0.9)"}


def run(sim, workload, policy, fraction, seed, extra):
    cmd = ["nice", "-n", "19", sim, *WORKLOADS[workload], "--policy", policy, "--json", "--seed", str(seed),
           "--speedup", "amdahl:0.95", "--resize-cost", "10", *extra]
    if fraction > 0:
        cmd += ["--malleable", str(fraction)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return {
        "workload": workload, "policy": policy, "malleable": fraction, "seed": seed,
        "mean_response_s": r["mean_response_s"], "mean_wait_s": r["mean_wait_s"], "mean_bsld": r["mean_bsld"],
        "utilization": r["utilization"], "resizes_per_job": r["resizes_per_job"], "wall_s": r["wall_s"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.path.join(ROOT, "build/scheduler/sim/aqs-sim"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--workloads", default="kth,llnl,faucets")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--fractions", default="0,0.1,0.2,0.5,1")
    ap.add_argument("--policies", default="easy,equipartition,pref_common_pool,payoff,payoff_lxf")
    ap.add_argument("--extra", default="", help="more aqs-sim options, e.g. '--min-resize-interval 120'")
    ap.add_argument("--from-json", default="", help="print the table of a finished study's JSON instead of running")
    ap.add_argument("--cache", default="", help="JSON lines of finished runs: read first, appended to (resume a study)")
    ap.add_argument("--json", default=os.path.join(os.environ.get("AQS_BENCH_RESULTS", os.path.join(ROOT, "bench/results")),
                                                   "policy_study.json"))
    a = ap.parse_args()
    if not a.from_json and not os.access(a.sim, os.X_OK):
        sys.exit(f"study: no aqs-sim at {a.sim} (build it, or give --sim)")
    workloads = a.workloads.split(",")
    fractions = [float(f) for f in a.fractions.split(",")]
    policies = a.policies.split(",")
    extra = a.extra.split()
    tasks = []
    for w in workloads:
        for pol in policies:
            for f in fractions:
                # easy ignores --malleable: one run per seed of the workload (one in all for a trace).
                if pol == "easy" and f != fractions[0]:
                    continue
                for seed in range(1, a.seeds + 1):
                    if pol == "easy" and w != "faucets" and seed > 1:
                        continue
                    tasks.append((w, pol, 0.0 if pol == "easy" else f, seed))
    results = []
    if a.from_json:
        with open(a.from_json) as fh:
            results = json.load(fh)["runs"]
        tasks = []
    if a.cache and os.path.exists(a.cache):
        with open(a.cache) as fh:
            results = [json.loads(line) for line in fh if line.strip()]
        done = {(r["workload"], r["policy"], r["malleable"], r["seed"]) for r in results}
        tasks = [t for t in tasks if t not in done]
    cache = open(a.cache, "a") if a.cache else None
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        futs = {ex.submit(run, a.sim, *t, extra): t for t in tasks}
        for i, fu in enumerate(concurrent.futures.as_completed(futs), 1):
            results.append(fu.result())
            if cache:
                cache.write(json.dumps(fu.result()) + "\n")
                cache.flush()
            print(f"[{i}/{len(tasks)}] {futs[fu]}", file=sys.stderr, flush=True)

    def agg(rows, key):
        v = [r[key] for r in rows]
        return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)

    rows_out = []
    print("| workload | malleable | policy | mean response (s) | vs easy | mean wait (s) | AVEbsld | utilization | resizes/job |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w in workloads:
        easy = [r for r in results if r["workload"] == w and r["policy"] == "easy"]
        easy_resp = agg(easy, "mean_response_s")[0] if easy else None
        for f in fractions:
            for pol in policies:
                if pol == "easy" and f != fractions[0]:
                    continue  # the same runs at every fraction: shown once
                rows = [r for r in results if r["workload"] == w and r["policy"] == pol and
                        (pol == "easy" or r["malleable"] == f)]
                if not rows:
                    continue
                m = {k: agg(rows, k) for k in ("mean_response_s", "mean_wait_s", "mean_bsld", "utilization", "resizes_per_job")}
                vs = "" if easy_resp is None else f"{100 * (m['mean_response_s'][0] / easy_resp - 1):+.1f} %"
                rows_out.append({"workload": w, "malleable": f, "policy": pol, "seeds": len(rows),
                                 **{k: {"mean": v[0], "sd": v[1]} for k, v in m.items()}})
                print(f"| {NAMES[w]} | {f * 100:.0f} % | {pol} | {m['mean_response_s'][0]:,.1f} ± {m['mean_response_s'][1]:,.1f} | {vs} "
                      f"| {m['mean_wait_s'][0]:,.1f} ± {m['mean_wait_s'][1]:,.1f} | {m['mean_bsld'][0]:,.2f} ± {m['mean_bsld'][1]:,.2f} "
                      f"| {m['utilization'][0]:.4f} ± {m['utilization'][1]:.4f} | {m['resizes_per_job'][0]:.2f} ± {m['resizes_per_job'][1]:.2f} |")
    if a.from_json:
        return
    # CPU of the aqs-sim runs of this invocation (user + system), whatever the machine's load did to the wall time.
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = ru.ru_utime + ru.ru_stime
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump({"speedup": "amdahl:0.95", "resize_cost_s": 10, "extra": a.extra, "runs_made": len(tasks),
                   "cpu_s": cpu_s, "rows": rows_out, "runs": results}, fh, indent=1)
    print(f"{len(tasks)} runs, {cpu_s:.1f} s of CPU; JSON in {a.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
