#!/usr/bin/env python3
"""Where a policy's gain over easy comes from: rigid and adaptive jobs apart (issue 34's KTH target).

Runs aqs-sim (niced) twice on one workload and seed, easy and the given
policy, with --jobs-out, and prints mean wait, run and response for the jobs
the policy ran rigid and those it ran adaptive (the same jobs under easy), and
the bound the target implies: the mean response the rigid jobs would need for
the whole workload to reach the target even if no adaptive job waited at all.
With --ideal it also runs easy on the trace without the adaptive jobs: the
rigid jobs' mean response if the adaptive ones took no processors at all,
and the workload's mean response if moreover every adaptive job started at
once at its maximum (2 x its logged size, at most the machine) and never
resized: an ideal no policy that keeps EASY for the rigid jobs can be
expected to beat (EASY is not monotone, so it is not a strict bound).

  bench/policies/classes.py [--sim build/scheduler/sim/aqs-sim] [--policy payoff]
                            [--trace traces/KTH-SP2-1996-2.1-cln.swf.gz]
                            [--malleable 0.2] [--seed 1] [--target 0.30] [--ideal]
"""
import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(sim, trace, policy, malleable, seed, out):
    cmd = ["nice", "-n", "10", sim, "--trace", trace, "--policy", policy, "--json", "--seed", str(seed),
           "--speedup", "amdahl:0.95", "--resize-cost", "10", "--jobs-out", out]
    if policy != "easy":
        cmd += ["--malleable", str(malleable)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"classes: {policy} on {trace}: {done.stderr.strip() or f'aqs-sim exited {done.returncode}'}")
    summary = json.loads(done.stdout)
    with open(out, newline="") as f:
        return {row["id"]: row for row in csv.DictReader(f)}, summary


def without(trace, drop, out):
    """Writes the SWF `trace` less the jobs whose number is in `drop`."""
    opener = gzip.open if trace.endswith(".gz") else open
    with opener(trace, "rt") as src, open(out, "w") as dst:
        for line in src:
            fields = line.split()
            if fields and not line.lstrip().startswith(";") and fields[0] in drop:
                continue
            dst.write(line)


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.path.join(ROOT, "build/scheduler/sim/aqs-sim"))
    ap.add_argument("--policy", default="payoff")
    ap.add_argument("--trace", default=os.path.join(ROOT, "traces/KTH-SP2-1996-2.1-cln.swf.gz"))
    ap.add_argument("--malleable", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", type=float, default=0.30, help="cut of mean response below easy to reach")
    ap.add_argument("--ideal", action="store_true", help="also the ideal: easy on the rigid jobs alone, adaptive jobs free")
    a = ap.parse_args()
    if not os.access(a.sim, os.X_OK):
        sys.exit(f"classes: no aqs-sim at {a.sim} (build it, or give --sim)")
    if not 0 < a.malleable <= 1:
        sys.exit("classes: --malleable must be in (0, 1]")
    with tempfile.TemporaryDirectory() as tmp:
        easy, _ = run(a.sim, a.trace, "easy", a.malleable, a.seed, os.path.join(tmp, "easy.csv"))
        pol, summary = run(a.sim, a.trace, a.policy, a.malleable, a.seed, os.path.join(tmp, "policy.csv"))
        rigid_only = None
        if a.ideal:
            adaptive = {k for k, r in pol.items() if r["adaptive"] == "1"}
            without(a.trace, adaptive, os.path.join(tmp, "rigid.swf"))
            rigid_only, _ = run(a.sim, os.path.join(tmp, "rigid.swf"), "easy", a.malleable, a.seed,
                                os.path.join(tmp, "rigid.csv"))
    if easy.keys() != pol.keys():
        sys.exit("classes: the two runs do not have the same jobs")

    def resp(row):
        return float(row["end"]) - float(row["submit"])

    print(f"| jobs | count | easy wait (s) | {a.policy} wait (s) | easy run (s) | {a.policy} run (s) "
          f"| easy response (s) | {a.policy} response (s) | change |")
    print("|---|---|---|---|---|---|---|---|---|")
    classes = {}
    for label, flag in (("rigid", "0"), ("adaptive", "1"), ("all", None)):
        ids = [k for k, r in pol.items() if flag is None or r["adaptive"] == flag]
        e_resp = mean(resp(easy[k]) for k in ids)
        p_resp = mean(resp(pol[k]) for k in ids)
        classes[label] = (len(ids), e_resp, p_resp, mean(float(pol[k]["run"]) for k in ids),
                          mean(float(easy[k]["run"]) for k in ids))
        print(f"| {label} | {len(ids):,} | {mean(float(easy[k]['wait']) for k in ids):,.1f} "
              f"| {mean(float(pol[k]['wait']) for k in ids):,.1f} | {classes[label][4]:,.1f} "
              f"| {classes[label][3]:,.1f} | {e_resp:,.1f} | {p_resp:,.1f} | {(p_resp / e_resp - 1) * 100:+.1f} % |")
    n, easy_all, _, _, _ = classes["all"]
    n_rigid, easy_rigid, _, _, rigid_run = classes["rigid"]
    n_adapt, _, _, adapt_run, _ = classes["adaptive"]
    goal = easy_all * (1 - a.target)
    # Every adaptive job at zero wait with the run it had under the policy.
    rigid_needed = (goal * n - adapt_run * n_adapt) / n_rigid
    print(f"\nTarget {a.target * 100:.0f} % below easy: mean response {goal:,.1f} s. Even if no adaptive job "
          f"waited, the rigid jobs would need a mean response of {rigid_needed:,.1f} s "
          f"({(rigid_needed / easy_rigid - 1) * 100:+.1f} % against easy), i.e. a mean wait of "
          f"{rigid_needed - rigid_run:,.1f} s.")
    if rigid_only is not None:
        if rigid_only.keys() != {k for k, r in pol.items() if r["adaptive"] == "0"}:
            sys.exit("classes: the rigid-only run does not have the rigid jobs")
        procs = summary["procs"]
        parallel = 0.95

        def speedup(p):
            return 1 / ((1 - parallel) + parallel / p)

        r_resp = mean(resp(r) for r in rigid_only.values())
        r_wait = mean(float(r["wait"]) for r in rigid_only.values())
        ideal_adaptive = [float(easy[k]["run"]) * speedup(int(easy[k]["procs"])) /
                          speedup(min(procs, 2 * int(easy[k]["procs"]))) for k, r in pol.items() if r["adaptive"] == "1"]
        ideal = (r_resp * len(rigid_only) + sum(ideal_adaptive)) / n
        print(f"\nIdeal: easy on the rigid jobs alone gives them a mean response of {r_resp:,.1f} s "
              f"({(r_resp / easy_rigid - 1) * 100:+.1f} % against easy with every job), mean wait {r_wait:,.1f} s; "
              f"with every adaptive job free, unwaited and at its maximum, the workload's mean response would be "
              f"{ideal:,.1f} s ({(ideal / easy_all - 1) * 100:+.1f} % against easy).")


if __name__ == "__main__":
    main()
