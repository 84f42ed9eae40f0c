#!/usr/bin/env python3
"""Issue 34's KTH target against its ideal, over several seeds: is "-30 % at 20 % malleable" within reach?

For each seed, runs aqs-sim (niced, Amdahl 0.95, 10 s per resize) on one
trace: easy with every job rigid, each policy with the seed's adaptive jobs,
and easy on the trace without those adaptive jobs (classes.py --ideal, which
does the same for one seed). The ideal is the workload's mean response if
the rigid jobs got what easy gives them with the adaptive jobs removed
(the adaptive fifth taking no processors at all) and every adaptive job
started at once at its maximum (2 x its logged size, at most the machine),
never waiting and never resized. A policy that keeps EASY for the rigid jobs
(the head's reservation, in queue order) cannot be expected to beat it
(EASY is not monotone, so it is not a strict bound).

Prints a table (seed by seed and the mean: easy, the ideal, each policy,
and the share of the ideal's gain each policy gets) and the share of that
gain the target asks, and writes $AQS_BENCH_RESULTS/policy_ideal-<percent>.json (default
bench/results/).

  bench/policies/ideal.py [--sim build/scheduler/sim/aqs-sim] [--trace traces/KTH-SP2-1996-2.1-cln.swf.gz]
                          [--malleable 0.2] [--seeds 5] [--policies payoff_lxf,payoff,pref_common_pool,equipartition]
                          [--target 0.30]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import classes  # noqa: E402  (the runs and the trace filter are classes.py's)

PARALLEL = 0.95  # the Amdahl fraction classes.run gives aqs-sim


def speedup(p):
    return 1 / ((1 - PARALLEL) + PARALLEL / p)


def resp(row):
    return float(row["end"]) - float(row["submit"])


def one_seed(a, tmp, seed, easy, easy_summary):
    """The ideal and each policy's mean response for one seed."""
    out = {"seed": seed, "policies": {}}
    adaptive = None
    for pol in a.policies:
        rows, summary = classes.run(a.sim, a.trace, pol, a.malleable, seed, os.path.join(tmp, f"{pol}-{seed}.csv"))
        if rows.keys() != easy.keys():
            sys.exit(f"ideal: {pol} (seed {seed}) does not run the same jobs as easy")
        flagged = {k for k, r in rows.items() if r["adaptive"] == "1"}
        if adaptive is None:
            adaptive = flagged
        elif flagged != adaptive:
            sys.exit(f"ideal: {pol} (seed {seed}) makes other jobs adaptive than {a.policies[0]}")
        out["policies"][pol] = {"mean_response_s": summary["mean_response_s"],
                                "resizes_per_job": summary["resizes_per_job"]}
    rigid_trace = os.path.join(tmp, f"rigid-{seed}.swf")
    classes.without(a.trace, adaptive, rigid_trace)
    rigid, _ = classes.run(a.sim, rigid_trace, "easy", a.malleable, seed, os.path.join(tmp, f"rigid-{seed}.csv"))
    if rigid.keys() != easy.keys() - adaptive:
        sys.exit(f"ideal: the rigid-only run (seed {seed}) does not have the rigid jobs")
    procs = easy_summary["procs"]
    free = [float(easy[k]["run"]) * speedup(int(easy[k]["procs"])) / speedup(min(procs, 2 * int(easy[k]["procs"])))
            for k in adaptive]
    out["adaptive_jobs"] = len(adaptive)
    out["rigid_alone_mean_response_s"] = classes.mean(resp(r) for r in rigid.values())
    out["rigid_alone_mean_wait_s"] = classes.mean(float(r["wait"]) for r in rigid.values())
    out["ideal_mean_response_s"] = (out["rigid_alone_mean_response_s"] * len(rigid) + sum(free)) / len(easy)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.path.join(classes.ROOT, "build/scheduler/sim/aqs-sim"))
    ap.add_argument("--trace", default=os.path.join(classes.ROOT, "traces/KTH-SP2-1996-2.1-cln.swf.gz"))
    ap.add_argument("--malleable", type=float, default=0.2)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--policies", default="payoff_lxf,payoff,pref_common_pool,equipartition")
    ap.add_argument("--target", type=float, default=0.30, help="cut of mean response below easy the issue asks")
    ap.add_argument("--json", default="", help="default: bench/results/policy_ideal-<percent malleable>.json")
    a = ap.parse_args()
    if not a.json:
        a.json = os.path.join(os.environ.get("AQS_BENCH_RESULTS", os.path.join(classes.ROOT, "bench/results")),
                              f"policy_ideal-{round(a.malleable * 100)}.json")
    a.policies = [p for p in a.policies.split(",") if p]
    if not os.access(a.sim, os.X_OK):
        sys.exit(f"ideal: no aqs-sim at {a.sim} (build it, or give --sim)")
    if not 0 < a.malleable <= 1:
        sys.exit("ideal: --malleable must be in (0, 1]")
    if a.seeds < 1 or not a.policies or "easy" in a.policies:
        sys.exit("ideal: --seeds >= 1 and at least one policy other than easy")

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        # easy ignores --malleable and the seed on a trace: one run serves every seed.
        easy, easy_summary = classes.run(a.sim, a.trace, "easy", a.malleable, 1, os.path.join(tmp, "easy.csv"))
        easy_resp = easy_summary["mean_response_s"]
        seeds = [one_seed(a, tmp, s, easy, easy_summary) for s in range(1, a.seeds + 1)]

    def pct(x):
        return (x / easy_resp - 1) * 100

    def share(x, ideal):
        return (easy_resp - x) / (easy_resp - ideal) * 100

    goal = easy_resp * (1 - a.target)
    print(f"{os.path.basename(a.trace)}, {a.malleable * 100:g} % malleable (Amdahl {PARALLEL}, 10 s per resize): "
          f"easy {easy_resp:,.1f} s; the target, {a.target * 100:g} % below easy: {goal:,.1f} s\n")
    print("| seed | rigid jobs alone under easy: mean response (s) | ideal (s) | ideal vs easy | "
          + " | ".join(f"{p} vs easy (share of the ideal's gain)" for p in a.policies) + " |")
    print("|---|---|---|---|" + "---|" * len(a.policies))
    for s in seeds:
        ideal = s["ideal_mean_response_s"]
        cells = [f"{pct(s['policies'][p]['mean_response_s']):+.2f} % ({share(s['policies'][p]['mean_response_s'], ideal):.0f} %)"
                 for p in a.policies]
        print(f"| {s['seed']} | {s['rigid_alone_mean_response_s']:,.1f} | {ideal:,.1f} | {pct(ideal):+.2f} % | "
              + " | ".join(cells) + " |")
    ideal = classes.mean(s["ideal_mean_response_s"] for s in seeds)
    means = {p: classes.mean(s["policies"][p]["mean_response_s"] for s in seeds) for p in a.policies}
    print(f"| mean | {classes.mean(s['rigid_alone_mean_response_s'] for s in seeds):,.1f} | {ideal:,.1f} | "
          f"{pct(ideal):+.2f} % | " + " | ".join(f"{pct(means[p]):+.2f} % ({share(means[p], ideal):.0f} %)"
                                                  for p in a.policies) + " |")
    best = min(a.policies, key=lambda p: means[p])
    below = sum(1 for s in seeds if s["ideal_mean_response_s"] > goal)
    needed = a.target * 100 / -pct(ideal) * 100 if ideal < easy_resp else float("inf")
    print(f"\nThe ideal is {pct(ideal):+.2f} % against easy over {len(seeds)} seeds "
          f"({below} of them with the ideal short of the target). The target ({-a.target * 100:g} %) asks "
          f"{needed:.0f} % of the ideal's gain; the best policy, {best}, gets {share(means[best], ideal):.0f} % "
          f"({pct(means[best]):+.2f} %).")
    result = {"benchmark": "policy_ideal", "trace": os.path.basename(a.trace), "malleable": a.malleable,
              "speedup": f"amdahl:{PARALLEL}", "resize_cost_s": 10, "target": a.target,
              "easy_mean_response_s": easy_resp, "target_mean_response_s": goal,
              "ideal_mean_response_s": ideal, "ideal_vs_easy_pct": pct(ideal), "seeds_with_ideal_short_of_target": below,
              "target_share_of_ideal_gain_pct": needed,
              "policies": {p: {"mean_response_s": means[p], "vs_easy_pct": pct(means[p]),
                               "share_of_ideal_gain_pct": share(means[p], ideal)} for p in a.policies},
              "best": best, "per_seed": seeds}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"results: {a.json}")


if __name__ == "__main__":
    main()
