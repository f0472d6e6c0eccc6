"""Why does active learning gain little on the real LAMMPS runs? (issue 6, second round)

Error vs number of runs for four ways of choosing runs, over more seeds than the first
benchmark, with the oracle (the same ANN ensemble trained on the whole pool) and the noise
floor of the dataset beside them:

* initial design: ``random`` (as before) or ``spread`` (greedy maximin / k-centre in the
  standardised log-input space the nets see, from a random first point);
* then ``random`` picks or ``active`` picks (``hpcpredict suggest-runs`` logic: ANN ensemble
  CoV, min-distance rule with distance 0.5, a batch of ``step`` runs per round), or
  ``active-wide`` (the same with the candidates' median nearest-neighbour spacing as distance),
  or ``active-density`` (``active-wide`` with CoV × the candidate's density in the pool).

A configuration's measured value is the median of its repetitions (``--value mean`` for the
mean). Savings are read at several error levels, not only random's final one: for each level
(random's mean error after n runs), how many runs active needs to get there (linear
interpolation between rounds), with a bootstrap interval over seeds.

    nice -n 10 python benchmarks/runtime/active_study.py --out benchmarks/runtime/active_study.json \
        --seeds 8 [--designs random spread] [--strategies random active]

``--surrogate-noise S`` (semi-synthetic, to isolate the effect of measurement noise): the
runtimes are replaced by a smooth function of the same LAMMPS inputs — a 10-net ANN ensemble
fitted to all configurations' measured values — times log-normal noise of σ = S (S = 0: none);
``--surrogate-pool N`` also draws N configurations of the same design (to isolate the effect
of the candidate pool's size: the real set has only 126 candidates for a budget of 70).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.runtime import ANNEnsemble, RuntimeModel, mape, pick_diverse, read_runs_csv

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "runtime"


def configurations(table, value: str = "median"):
    """(X per configuration, measured value, list of repetition arrays)."""
    inputs = [name for name in table.inputs if name not in table.report_times]
    X_all = RuntimeModel("linear", {}, inputs).fit(table).matrix(table.rows)  # the encoder only
    configs = np.unique(table.groups)
    reps = [table.y[table.groups == g] for g in configs]
    X = np.stack([X_all[table.groups == g][0] for g in configs])
    y = np.array([np.median(r) if value == "median" else np.mean(r) for r in reps])
    return X, y, reps


def standardised_log(X):
    L = np.where(np.all(X > 0, axis=0), np.log(np.maximum(X, 1e-300)), X)
    std = L.std(axis=0)
    return (L - L.mean(axis=0)) / np.where(std > 0, std, 1.0)


def spread_design(Z, pool, count, rng):
    """Greedy maximin: each next point is the pool point farthest from those chosen."""
    chosen = [int(rng.choice(pool))]
    distance = np.linalg.norm(Z[pool] - Z[chosen[0]], axis=1)
    while len(chosen) < count:
        nxt = int(pool[np.argmax(distance)])
        chosen.append(nxt)
        distance = np.minimum(distance, np.linalg.norm(Z[pool] - Z[nxt], axis=1))
    return chosen


def curve(X, y, test, pool, first, strategy, seed, start, step, budget, members):
    rng = np.random.default_rng(seed + 1000)
    chosen, errors = list(first), []
    while True:
        ann = ANNEnsemble(n_members=members, random_state=seed).fit(X[chosen], y[chosen])
        errors.append(mape(y[test], ann.predict(X[test])))
        if len(chosen) >= budget:
            return errors
        left = np.setdiff1d(pool, chosen)
        if strategy == "random":
            chosen += [int(i) for i in rng.choice(left, step, replace=False)]
        else:
            cov = ann.coefficient_of_variation(X[left])
            Z_left = ann.standardised_inputs(X[left])
            distance = 0.5
            if strategy in ("active-wide", "active-density"):
                # Min distance = the candidates' median nearest-neighbour spacing (not 0.5): in 8
                # standardised dimensions 0.5 hardly ever binds, so CoV alone chose the batch.
                gaps = np.linalg.norm(Z_left[:, None, :] - Z_left[None, :, :], axis=2)
                np.fill_diagonal(gaps, np.inf)
                distance = float(np.median(gaps.min(axis=1)))
            if strategy == "active-density":
                # Information density: CoV × how typical the candidate is of the pool (Gaussian
                # kernel, bandwidth = median pairwise distance), so corners of the input space
                # where the nets merely extrapolate do not take every pick.
                np.fill_diagonal(gaps, 0.0)
                bandwidth = float(np.median(gaps[np.triu_indices(len(gaps), 1)])) if len(gaps) > 1 else 1.0
                cov = cov * np.exp(-0.5 * (gaps / bandwidth) ** 2).mean(axis=1)
            picks = pick_diverse(cov, Z_left, done=ann.standardised_inputs(X[chosen]), k=step, min_distance=distance)
            chosen += [int(left[i]) for i in picks]


def runs_to_reach(runs, errors, level):
    """First (interpolated) number of runs at which the curve is at or below ``level``."""
    for i, e in enumerate(errors):
        if e <= level:
            if i == 0:
                return float(runs[0])
            e0, e1 = errors[i - 1], e
            return float(runs[i - 1] + (runs[i] - runs[i - 1]) * (e0 - level) / (e0 - e1))
    return None


def savings(runs, base_curves, other_curves, at_runs, n_boot=2000, seed=0):
    """Saving of ``other`` vs ``base`` at the levels base reaches after ``at_runs`` runs."""
    base, other = np.asarray(base_curves), np.asarray(other_curves)
    rng = np.random.default_rng(seed)
    rows = []
    for n in at_runs:
        k = runs.index(n)

        def saving(idx):
            b, o = base[idx].mean(axis=0), other[idx].mean(axis=0)
            reach = runs_to_reach(runs, o.tolist(), b[k])
            return None if reach is None else 1 - reach / n

        point = saving(np.arange(len(base)))
        boot = [saving(rng.integers(0, len(base), len(base))) for _ in range(n_boot)]
        boot = np.array([np.nan if b is None else b for b in boot])
        rows.append({"base_runs": n, "level": float(base.mean(axis=0)[k]), "saving": point,
                     "saving_ci90": [float(np.nanpercentile(boot, 5)), float(np.nanpercentile(boot, 95))],
                     "unreached_share": float(np.isnan(boot).mean())})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=DATA / "lammps_melt.csv")
    parser.add_argument("--target", default="runtime_s")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--designs", nargs="*", default=["random", "spread"])
    parser.add_argument("--strategies", nargs="*", default=["random", "active"])
    parser.add_argument("--value", choices=("median", "mean"), default="median")
    parser.add_argument("--start", type=int, default=10)
    parser.add_argument("--step", type=int, default=5)
    parser.add_argument("--budget", type=int, default=70)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--time-limit-s", type=float, default=1800, help="stop starting new seeds after this")
    parser.add_argument("--surrogate-noise", type=float, default=None, help="semi-synthetic runtimes (see above)")
    parser.add_argument("--surrogate-pool", type=int, default=0,
                        help="with --surrogate-noise: this many configurations (30 %% test, the rest candidates)")
    args = parser.parse_args()
    table = read_runs_csv(args.data, target=args.target)
    X, y, reps = configurations(table, args.value)
    if args.surrogate_noise is not None:
        surrogate = ANNEnsemble(n_members=10, random_state=123).fit(X, y)
        if args.surrogate_pool:
            # More candidates from the same design: each input drawn from its observed values.
            draw = np.random.default_rng(322)
            X = np.stack([draw.choice(X[:, j], args.surrogate_pool) for j in range(X.shape[1])], axis=1)
        y = surrogate.predict(X) * np.exp(np.random.default_rng(321).normal(0, args.surrogate_noise, len(X)))
        reps = [np.array([v]) for v in y]
    Z = standardised_log(X)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.update(data=str(args.data.name), value=args.value, start=args.start, step=args.step,
                   budget=args.budget, members=args.members, surrogate_noise=args.surrogate_noise,
                   surrogate_pool=args.surrogate_pool, n_configurations=int(len(y)))
    curves = results.setdefault("curves", {})
    oracle = results.setdefault("oracle_mape", {})
    started = time.time()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        if time.time() - started > args.time_limit_s:
            print(f"time limit: stopped before seed {seed}", flush=True)
            break
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(y))
        test, pool = order[: len(y) * 3 // 10], order[len(y) * 3 // 10:]
        if str(seed) not in oracle:
            model = ANNEnsemble(n_members=args.members, random_state=seed).fit(X[pool], y[pool])
            oracle[str(seed)] = mape(y[test], model.predict(X[test]))
        for design in args.designs:
            first = (list(pool[: args.start]) if design == "random"
                     else spread_design(Z, pool, args.start, np.random.default_rng(seed + 500)))
            for strategy in args.strategies:
                key = f"{design} start + {strategy}"
                if str(seed) in curves.get(key, {}):
                    continue
                errors = curve(X, y, test, pool, first, strategy, seed, args.start, args.step, args.budget,
                               args.members)
                curves.setdefault(key, {})[str(seed)] = errors
                print(key, seed, [round(100 * e, 1) for e in errors], f"{time.time() - started:.0f}s", flush=True)
                args.out.write_text(json.dumps(results, indent=1))
    runs = list(range(args.start, args.budget + 1, args.step))
    results["runs"] = runs
    # Noise floor: a perfect model's MAPE against a configuration's measured value, estimated by
    # predicting each repetition by the median of the *other* repetitions of its configuration.
    loo = [abs(r[i] - np.median(np.delete(r, i))) / r[i] for r in reps if len(r) > 1 for i in range(len(r))]
    results["repetition_mape"] = float(np.mean(loo)) if loo else None
    results["summary"] = {}
    seeds_all = sorted(set.intersection(*(set(v) for v in curves.values())), key=int) if curves else []
    for design in args.designs:
        base_key = f"{design} start + random"
        for strategy in ("active", "active-wide", "active-density"):
            active_key = f"{design} start + {strategy}"
            if base_key in curves and active_key in curves:
                base = [curves[base_key][s] for s in seeds_all]
                other = [curves[active_key][s] for s in seeds_all]
                results["summary"][f"{design} start: {strategy} vs random"] = savings(runs, base, other,
                                                                                      [20, 30, 40, 50, 70])
    if "random start + random" in curves and "spread start + active" in curves:
        base = [curves["random start + random"][s] for s in seeds_all]
        other = [curves["spread start + active"][s] for s in seeds_all]
        results["summary"]["spread start + active vs random start + random"] = savings(runs, base, other,
                                                                                       [20, 30, 40, 50, 70])
    results["mean_curves"] = {k: np.mean([v[s] for s in seeds_all], axis=0).tolist() for k, v in curves.items()}
    results["seeds"] = [int(s) for s in seeds_all]
    results["oracle_mean"] = float(np.mean([oracle[s] for s in seeds_all])) if seeds_all else None
    args.out.write_text(json.dumps(results, indent=1))
    print(json.dumps({k: results[k] for k in ("summary", "oracle_mean", "repetition_mape", "seeds")}, indent=1))


if __name__ == "__main__":
    main()
