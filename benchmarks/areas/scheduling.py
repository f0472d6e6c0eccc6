"""What the walltime policies do to the queue of real traces, per Slurm release, and which soft value.

    python -m benchmarks run scheduling [--traces kth,hpc2n] [--shakes 20] [--ratios 0,4,16]
                                        [--values point,bound@0.25,bound@0.3,bound@0.35,bound@0.5,answer@0.3,low]
                                        [--easy-ratios 0,2,4,8] [--easy-scales 1,1.5,2,3]

For KTH-SP2 (28,481 jobs, 100 processors) and the HPC2N subset (3,170 jobs, 240 processors)
in tests/data/traces, EASY backfilling (daemon/scheduling/easy.py, bf_resolution 60 s):

1. ``releases``: the default policies (``user``, ``hpcpredict`` = the product's default mode for
   the cluster, ``oracle``, ``easy++``) and ``hpcpredict-bound`` (the opt-in kill-limit bound at
   risk 0.03) on each cluster: Slurm 22.05, 24.11 with ``time_min_as_soft_limit`` (the product's
   main path), 24.11 without it, 25.05 (>= 25.05.3) without it.
2. ``soft``: the soft ``--time-min`` (Slurm 24.11 with the option) fed each candidate *value*
   (``point``: our point estimate; ``bound@r``: our bound at risk r from its own online pass,
   an upper quantile; ``answer@r``: the same bound as the risk-0.03 model answers it beside its
   own (``online_predictions(..., soft_risk=r)``), what a daemon configured with ``risk = 0.03``
   and ``soft_risk = r`` sets: ``answer@0.3`` is the product's default; ``low``: the low end of
   our 80 % interval; ``VALUE|COMBINER``: VALUE combined with EASY++'s last-two mean where the
   user has one, ``min-last2``, ``max-last2``, ``gmean-last2`` (geometric mean) or
   ``last2-first`` (the last-two mean where there is one, VALUE elsewhere)) under each
   ``soft_max_ratio`` k (0 = no guard), through :func:`plan_limits` exactly as the hook calls
   it; EASY++ beside them. A single replay of a trace is chaotic (one job starting a second
   earlier reshuffles the queue behind it), so every figure is the mean over the trace and
   ``--shakes`` copies whose submit times are shifted by uniform noise of +-30 s (input shaking:
   Tsafrir, Ouaknine and Feitelson, 2007), with its standard error and the min and max across
   copies; the share of the oracle's gain, the wide jobs' p99 wait against the users' own and
   the difference to EASY++ are taken per copy (paired). Predictions are made once, online on
   the trace as recorded, through the daemon's sources (``sources.first_estimate``: the
   walltime model, else the user's recent runs where it knows nothing of the job, else the
   request).

3. EASY++ made admissible the ways a site could, in the same shaken replay: each
   ``--easy-scales`` c (the last-two mean x c as the soft ``--time-min``) under each
   ``--easy-ratios`` k (the same ``soft_max_ratio`` guard as ours); ``easy++ x1 k=0`` is the
   published EASY++ (named ``easy++``).

``goal``: at least 60 % of the oracle's gain in mean bounded slowdown with 0 kills, and the
p99 wait of the widest 5 % (processor count at or above the 95th percentile) at most 5 % above
the users' own limits, both on the shaken mean; ``best_meeting_goal``: our variant with the
largest share that meets it. ``tail_goal``: only the tail half (0 kills, wide p99 at most +5 %);
``frontier``: per policy family (ours, EASY++'s variants) the lowest mean bsld that meets the
tail goal (and our default against EASY++'s best), ours minus EASY++ in bsld paired per copy;
and the converse, at EASY++'s own tail: our lowest bsld whose wide p99 is no worse than the
published EASY++'s, against it. ``share_of_means`` is the share of the mean bsld (the per-copy
share is unsteady where the oracle's room is small, as on HPC2N).
Deterministic (seeded): no timing is measured,
so the machine's load does not change the numbers.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
from pathlib import Path

import numpy as np

DESCRIPTION = ("EASY backfilling replay of KTH-SP2 and HPC2N per Slurm release; the soft --time-min's "
               "value and soft_max_ratio chosen on the shaken queue (bsld, kills, wait tail)")

TRACES = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces"
TRACE_FILES = {"kth": "KTH-SP2.swf", "hpc2n": "hpc2n-subset.swf"}
# cluster name -> (release, time_min_as_soft_limit)
CLUSTERS = {"22.05": ("22.05", False), "24.11": ("24.11", True), "24.11-no-soft": ("24.11", False),
            "25.05.3-no-soft": ("25.05.3", False), "26.05": ("26.05", True)}
RELEASE_POLICIES = ("user", "hpcpredict", "oracle", "easy++", "hpcpredict-bound")
SOFT_RELEASES = ("24.11", "26.05")    # one release per planning rule: hard_end, soft_then_halfway
SHAKE_S = 30.0
KEPT = ("mean_bounded_slowdown", "mean_wait_s", "p99_wait_s", "max_wait_s", "wide_mean_wait_s", "wide_p99_wait_s",
        "wide_max_wait_s", "killed", "shortened", "backfilled")
GOAL_SHARE, GOAL_WIDE_P99 = 0.6, 0.05
DEFAULT_SLIP_S = 1800.0                # [policy] soft_max_slip_s's default


def _rounded(scores: dict) -> dict:
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in scores.items()}


def _shaken(jobs: list, seed: int) -> list:
    if seed == 0:
        return jobs                            # copy 0: the trace as recorded
    rng = random.Random(seed)
    return [dataclasses.replace(job, submit_s=max(0.0, job.submit_s + rng.uniform(-SHAKE_S, SHAKE_S)))
            for job in jobs]


def _stats(values) -> dict:
    values = np.asarray(values, float)
    se = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0
    return {"mean": round(float(values.mean()), 4), "se": round(se, 4), "min": round(float(values.min()), 4),
            "max": round(float(values.max()), 4), "trace": round(float(values[0]), 4)}


def _summary(per_copy: list[dict], users: list[dict], oracles: list[dict], easy: list[dict] | None = None) -> dict:
    """Mean (its standard error) / min / max over the copies of each kept metric, the share of
    the oracle's gain and the wide jobs' p99 wait against the users' own, taken per copy; and,
    paired per copy, the difference to EASY++ in bsld and in the wide jobs' p99 wait."""
    share = [(u["mean_bounded_slowdown"] - s["mean_bounded_slowdown"])
             / (u["mean_bounded_slowdown"] - o["mean_bounded_slowdown"]) for s, u, o in zip(per_copy, users, oracles)]
    wide = [s["wide_p99_wait_s"] / u["wide_p99_wait_s"] - 1.0 for s, u in zip(per_copy, users)]
    out = {key: _stats(values) for key, values in
           [("share", share), ("wide_p99_vs_user", wide)] + [(k, [s[k] for s in per_copy]) for k in KEPT]}
    if easy is not None:
        for key in ("mean_bounded_slowdown", "wide_p99_wait_s"):
            out[f"{key}_minus_easy++"] = _stats([s[key] - e[key] for s, e in zip(per_copy, easy)])
    # the share of the mean bsld, steady where the oracle's room is small (HPC2N: per-copy ratios explode)
    out["share_of_means"] = round((np.mean([u["mean_bounded_slowdown"] for u in users])
                                   - out["mean_bounded_slowdown"]["mean"])
                                  / np.mean([u["mean_bounded_slowdown"] - o["mean_bounded_slowdown"]
                                             for u, o in zip(users, oracles)]), 4)
    out["tail_goal_met"] = out["killed"]["max"] == 0 and out["wide_p99_vs_user"]["mean"] <= GOAL_WIDE_P99
    out["goal_met"] = out["tail_goal_met"] and out["share"]["mean"] >= GOAL_SHARE
    out["_bsld_per_copy"] = [s["mean_bounded_slowdown"] for s in per_copy]
    return out


def _frontier(soft: dict, ours: list[str], easy: list[str], default: str) -> dict:
    """The comparison the goal implies: each family's lowest mean bsld under the tail goal, and
    the converse at the published EASY++'s tail; ours minus EASY++ in bsld, paired per copy
    (negative: ours better), and each side's share of means."""
    def best(names, admissible):
        return min((n for n in names if admissible(soft[n])), key=lambda n: soft[n]["mean_bounded_slowdown"]["mean"],
                   default=None)

    def paired(a, b):
        if a is None or b is None:
            return None
        return {"ours": a, "easy++": b, "share_ours": soft[a]["share_of_means"], "share_easy++": soft[b]["share_of_means"],
                "wide_p99_ours": soft[a]["wide_p99_vs_user"]["mean"],
                "wide_p99_easy++": soft[b]["wide_p99_vs_user"]["mean"],
                "bsld_ours_minus_easy++": _stats([x - y for x, y in zip(soft[a]["_bsld_per_copy"],
                                                                       soft[b]["_bsld_per_copy"])])}

    easy_tail = best(easy, lambda s: s["tail_goal_met"])
    easy_wide = soft["easy++"]["wide_p99_vs_user"]["mean"]
    return {"best_under_tail_goal": paired(best(ours, lambda s: s["tail_goal_met"]), easy_tail),
            "default_under_tail_goal": paired(default if default in soft else None, easy_tail),
            "at_easy++_tail": paired(best(ours, lambda s: s["killed"]["max"] == 0
                                          and s["wide_p99_vs_user"]["mean"] <= easy_wide), "easy++")}


COMBINERS = ("min-last2", "gmean-last2", "max-last2", "last2-first")


def _combined(value_s: float, last_two, combiner: str) -> float:
    """A soft value combined with EASY++'s last-two mean (``last_two``: its estimate, or None
    when the user has fewer than two ended jobs: the value stands)."""
    if last_two is None:
        return value_s
    if combiner == "min-last2":
        return min(value_s, last_two.runtime_s)
    if combiner == "max-last2":
        return max(value_s, last_two.runtime_s)
    if combiner == "last2-first":
        return last_two.runtime_s
    if combiner == "gmean-last2":
        return float(np.sqrt(value_s * last_two.runtime_s))
    raise SystemExit(f"benchmarks run scheduling: unknown combiner {combiner!r} (one of {', '.join(COMBINERS)})")


def _risk_of(value: str) -> float | None:
    """The soft risk a value is answered at (``answer@R``), None for the others."""
    return float(value.split("@")[1]) if value.startswith("answer@") else None


def replay_trace(path: Path, shakes: int, ratios: list[float], values: list[str],
                 easy_ratios: list[float] = (0.0,), easy_scales: list[float] = (1.0,),
                 releases: list[str] = SOFT_RELEASES, slips: list[float] = (DEFAULT_SLIP_S,)) -> dict:
    from hpcpredict.daemon.lab.history import read_trace
    from hpcpredict.daemon.lab.scheduling import (POLICIES, Workload, last_two_predictions, online_predictions,
                                                  replay_facts, replay_jobs, replay_policies, sim_jobs,
                                                  soft_risk_for, trace_machine_size)

    records = read_trace(path)
    procs = trace_machine_size(path)
    workload = sim_jobs(records, procs)
    answered: dict[float, dict] = {}

    def answers_at(risk: float) -> dict:
        """The daemon's answers (risk 0.03) with the soft value at ``risk`` (soft_s), made once."""
        if risk not in answered:
            answered[risk] = online_predictions(records, 0.03, soft_risk=risk)
        return answered[risk]

    out = {"trace": path.name, "procs": procs, "jobs": len(workload.jobs), "dropped": dict(workload.dropped),
           "releases": {}, "soft": {}, "best_meeting_goal": {}, "frontier": {}}
    for name, (slurm, soft) in CLUSTERS.items():
        ours = answers_at(soft_risk_for(replay_facts(slurm, soft, procs)))     # the daemon's default for it
        out["releases"][name] = {policy: _rounded(s) for policy, s in replay_policies(
            workload, ours, RELEASE_POLICIES, slurm=slurm, soft_limit=soft).items()}
    last_two = last_two_predictions(records)
    copies = [Workload(_shaken(workload.jobs, seed), workload.records, workload.dropped, procs)
              for seed in range(shakes + 1)]
    for slurm in releases:
        facts = replay_facts(slurm, True, procs)      # the controller every policy is told
        default_risk = soft_risk_for(facts)
        named = [f"answer@{default_risk:g}" if value == "answer" else value for value in values]
        ours = answers_at(default_risk)
        fed = {"point": (ours, "runtime_s"), "low": (ours, "low_s")}
        for value in {value.partition("|")[0] for value in named} - set(fed):
            if value.startswith("answer@"):
                fed[value] = (answers_at(float(value.split("@")[1])), "soft_s")
            elif value.startswith("bound@"):
                fed[value] = (online_predictions(records, float(value.split("@")[1])), "bound_s")
        for value in named:
            base, _, combiner = value.partition("|")
            if combiner:
                answers, field = fed[base]
                fed[value] = ({key: dataclasses.replace(estimate, runtime_s=_combined(
                    getattr(estimate, field) or estimate.runtime_s, last_two.get(key), combiner), soft_s=0.0)
                    for key, estimate in answers.items()}, "runtime_s")

        def replay_all(policy, answers) -> list[dict]:
            return [replay_jobs(copy, [policy(job, answers.get(id(record)), facts)
                                       for job, record in zip(copy.jobs, copy.records)], slurm=slurm)
                    for copy in copies]

        soft_out: dict[str, dict] = {}
        users = replay_all(POLICIES["user"], {})
        oracles = replay_all(POLICIES["oracle"], {})
        soft_out["user"] = _summary(users, users, oracles)
        soft_out["oracle"] = _summary(oracles, users, oracles)
        easy = replay_all(POLICIES["easy++"], last_two)
        soft_out["easy++"] = _summary(easy, users, oracles)
        easy_named = ["easy++"]
        for scale in easy_scales:
            scaled = {key: dataclasses.replace(e, runtime_s=e.runtime_s * scale, bound_s=e.bound_s * scale)
                      for key, e in last_two.items()}
            for ratio in easy_ratios:
                if scale == 1 and ratio == 0:
                    continue                       # the published EASY++, above
                def easy_policy(job, estimate, facts, ratio=ratio):
                    return POLICIES["easy++"](job, estimate, facts, soft_max_ratio=ratio)
                name = f"easy++ x{scale:g} k={ratio:g}"
                soft_out[name] = _summary(replay_all(easy_policy, scaled), users, oracles, easy)
                easy_named.append(name)
        ours_named = []
        for value in named:
            answers, field = fed[value]
            valued = {key: dataclasses.replace(estimate, runtime_s=getattr(estimate, field) or estimate.runtime_s,
                                               soft_s=0.0) for key, estimate in answers.items()}
            for ratio in ratios:
                for slip in slips:
                    def policy(job, estimate, facts, ratio=ratio, slip=slip, risk=_risk_of(value)):
                        return POLICIES["hpcpredict"](job, estimate, facts, soft_max_ratio=ratio,
                                                      soft_max_slip_s=slip, soft_risk=risk)
                    name = f"{value} k={ratio:g} S={slip:g}"
                    soft_out[name] = _summary(replay_all(policy, valued), users, oracles, easy)
                    ours_named.append(name)
        met = [name for name in ours_named if soft_out[name]["goal_met"]]
        out["best_meeting_goal"][slurm] = max(met, key=lambda name: soft_out[name]["share"]["mean"], default=None)
        out["frontier"][slurm] = _frontier(soft_out, ours_named, easy_named,
                                           f"answer@{default_risk:g} k=0 S={DEFAULT_SLIP_S:g}")
        for summary in soft_out.values():
            del summary["_bsld_per_copy"]
        out["soft"][slurm] = soft_out
    return out


def _headline(traces: dict) -> dict:
    head: dict = {}
    for key, trace in traces.items():
        for slurm, soft in trace["soft"].items():
            default = trace["frontier"][slurm]["default_under_tail_goal"]
            default_name = default["ours"] if default else None
            chosen = {"easy++", "user", "oracle", default_name, trace["best_meeting_goal"][slurm]}
            chosen |= {name for name in soft if name.endswith("k=0 S=1800") or name.endswith("k=0 S=0")}
            head.setdefault(key, {})[slurm] = {
                name: {"share": s["share"]["mean"], "share_trace": s["share"]["trace"],
                       "wide_p99_vs_user": s["wide_p99_vs_user"]["mean"],
                       "wide_p99_vs_user_trace": s["wide_p99_vs_user"]["trace"],
                       "bsld": s["mean_bounded_slowdown"]["mean"], "bsld_trace": s["mean_bounded_slowdown"]["trace"],
                       "killed": s["killed"]["max"], "goal_met": s["goal_met"]}
                for name, s in soft.items() if name in chosen}
            head[key][slurm]["best_meeting_goal"] = trace["best_meeting_goal"][slurm]
            head[key][slurm]["frontier"] = trace["frontier"][slurm]
    return head


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run scheduling")
    parser.add_argument("--traces", default="kth,hpc2n", help=f"from {', '.join(TRACE_FILES)}")
    parser.add_argument("--shakes", type=int, default=20, help="shaken copies of each trace (besides the trace)")
    parser.add_argument("--releases", default=",".join(SOFT_RELEASES),
                        help="the releases (with time_min_as_soft_limit) of the soft section: one per planning rule")
    parser.add_argument("--ratios", default="0", help="soft_max_ratio values, comma-separated")
    parser.add_argument("--slips", default="0,1800,3600,7200", help="soft_max_slip_s values, comma-separated")
    parser.add_argument("--values", default="answer,answer@0.3,answer@0.5,point",
                        help="soft --time-min values: answer (the estimate at the release's default soft_risk), "
                             "point, low, bound@RISK, answer@RISK, each optionally "
                             f"|COMBINER with EASY++'s last-two mean ({', '.join(COMBINERS)})")
    parser.add_argument("--easy-ratios", default="0,4",
                        help="soft_max_ratio guards given EASY++ (0 = none, as published), comma-separated")
    parser.add_argument("--easy-scales", default="1",
                        help="factors on EASY++'s last-two mean before it becomes the soft --time-min")
    options = parser.parse_args(args)
    ratios = [float(r) for r in options.ratios.split(",")]
    values = options.values.split(",")
    easy_ratios = [float(r) for r in options.easy_ratios.split(",")]
    easy_scales = [float(c) for c in options.easy_scales.split(",")]
    releases = options.releases.split(",")
    slips = [float(slip) for slip in options.slips.split(",")]
    traces = {key: replay_trace(TRACES / TRACE_FILES[key], options.shakes, ratios, values, easy_ratios, easy_scales,
                                releases, slips)
              for key in options.traces.split(",")}
    return {"method": "EASY backfilling (daemon/scheduling/easy.py), bf_resolution 60 s; releases: Slurm 22.05 "
                      "(a backfill start runs under its time_min), 24.11 with time_min_as_soft_limit (started on "
                      "the time_min, planned at the hard end once running), 24.11 without it (every start runs "
                      "under its time_min), 25.05.3 without it (lowered to the room before the reservation), 26.05 "
                      "with it (planned at the soft end, then halfway to the hard end at every pass); "
                      "soft: each --releases release with the option, each figure the mean over the trace and --shakes copies "
                      f"with submit times shifted by U(-{SHAKE_S:g}, {SHAKE_S:g}) s; online predictions as in "
                      "evaluate walltime; wide = processor count >= the 95th percentile",
            "shakes": options.shakes, "headline": _headline(traces), "traces": traces}
