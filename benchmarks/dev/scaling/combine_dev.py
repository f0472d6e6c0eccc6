"""Development harness for the multi-parameter combination step (DEV seeds only, never 3).

Runs the adaptive modeler on synthetic_protocol.py tasks with different ``combine`` rules
(monkeypatched; "shipped" = ``combine_for_noise`` as in the daemon, "loo" = the rule before
the relative fit, "extrap" = choose on the outer points of a fit on the inner ones, "mix" = mean of both,
"hyb<t>" = extrap up to rrd t, else LOO + drop; "hyb<t>+wls" = relative least squares up to
rrd t, parameters may drop out (hyb0.7+wls = an earlier rule); "+drop" / "+top2" / "@margin" flags) and prints accuracy / extrapolation error next to Extra-P 4.2.5 (median),
whose results are cached per seed (dev_common.py).

    nice -n 10 .venv/bin/python benchmarks/scaling/combine_dev.py --seed 101 --functions 40 --m 2 \
        --extrap-python /tmp/extrap-venv/bin/python
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scaling"))  # synthetic_protocol

import dev_common  # noqa: E402
import synthetic_protocol as protocol  # noqa: E402
from hpcpredict.daemon.lab.scaling import adaptive, regression  # noqa: E402
from hpcpredict.daemon.lab.scaling.pmnf import CompoundTerm, PmnfFunction, factor  # noqa: E402

ORIGINAL_COMBINE = regression.combine          # selection="loo": the original rule
SHIPPED = regression.combine_for_noise


def _smape(y, f):
    denom = (np.abs(y) + np.abs(f)) / 2
    return 100 * np.mean(np.where(denom > 0, np.abs(y - f) / denom, 0))


def make_combine(score: str, margin_noisy: float | None = None, drop: bool = False):
    """combine() variant: score 'loo' (current), 'extrap' (fit on the inner points, score on the
    points at any parameter's largest value), 'mix' (mean of both)."""
    def combine(data, choices, margin=1e-3):
        if score.startswith("hyb"):   # holdout score on calm data, LOO + drop on noisy data
            from hpcpredict.daemon.lab.scaling.measurements import relative_deviation_range
            calm = relative_deviation_range(data.points) <= float(score[3:])
            inner = make_combine("extrap" if calm else "loo", margin_noisy, drop=not calm)
            return inner(data, choices, margin)
        if drop:     # every parameter may also be left out (its single-parameter model: constant)
            choices = {nm: list(c) + [(0.0, 0)] for nm, c in choices.items()}
        if score == "loo" and margin_noisy is None and not drop:
            return ORIGINAL_COMBINE(data, choices, margin)
        if margin_noisy is not None and margin > 1e-3:
            margin = margin_noisy
        if score == "loo":
            if margin_noisy is not None and margin > 1e-3:
                margin = margin_noisy
            return ORIGINAL_COMBINE(data, choices, margin)
        columns = data.columns()
        y = data.medians()
        n = len(y)
        coords = data.coordinates()
        outer = (coords == coords.max(axis=0)).any(axis=1)
        names = list(data.parameters)
        hyps = []
        for picked in itertools.product(*(list(dict.fromkeys(choices[nm])) for nm in names)):
            active = {nm: p for nm, p in zip(names, picked) if p != (0.0, 0)}
            basis = {nm: factor(columns[nm], p) for nm, p in active.items()}
            for family in regression.covering_families(list(active)):
                cols = [np.ones(n)] + [np.prod([basis[p] for p in prod], axis=0) for prod in family]
                if len(cols) >= n or len(cols) >= (~outer).sum():
                    continue
                key = tuple(tuple((p, active[p]) for p in prod) for prod in family)
                hyps.append((len(cols), key, np.column_stack(cols)))
        hyps.sort(key=lambda h: h[0])
        best = None
        for width, key, X in hyps:
            coef, loo = regression.loo_fit(X[None], y)
            coef, loo = coef[0], float(loo[0])
            if (coef[1:] < 0).any():
                continue
            s = X.max(axis=0); s[s == 0] = 1
            ctr, *_ = np.linalg.lstsq(X[~outer] / s, y[~outer], rcond=None)
            ext = _smape(y[outer], (X[outer] / s) @ ctr)
            value = ext if score == "extrap" else (ext + loo) / 2
            if not np.isfinite(value):
                continue
            if best is None or value < best[0] - max(1e-9, margin * best[0]):
                terms = tuple(CompoundTerm(float(c), dict(prod)) for c, prod in zip(coef[1:], key))
                best = (value, PmnfFunction(float(coef[0]), terms))
        if best is None:
            return ORIGINAL_COMBINE(data, choices, margin)
        return best[1], best[0]
    return combine


def _top_k(modeler, original, k):
    """Classifier-only lines keep the adapted classifier's k most probable plausible classes."""
    def candidates(x, y, noise, noise_range, repetitions, classifier_only=False):
        picked = original(modeler, x, y, noise, noise_range, repetitions, classifier_only)
        if not classifier_only or k == 1 or len(picked) != 1:
            return picked
        weights = modeler.adapted(x, noise_range, repetitions)
        prob = weights.probabilities(adaptive.line_features(x, y, noise)[None, :])[0]
        order = [adaptive.CLASSES[j] for j in np.argsort(prob)[::-1][:adaptive.TOP_K]]
        ranked = regression.rank_single_parameter(x, y, pairs=order)
        plausible = {r.pair for r in ranked if np.isfinite(r.cv_smape)}
        return list(dict.fromkeys(picked + [p for p in order if p in plausible]))[:k]
    return candidates


def main(argv=None) -> int:
    parser = dev_common.dev_parser(__doc__, functions=40, m=2, noise=[0.1, 0.5, 0.75, 1.0])
    parser.add_argument("--variants", nargs="+", default=["loo", "extrap", "mix"])
    parser.add_argument("--extrap-python", default=None)
    parser.add_argument("--modeler", choices=("adaptive", "regression"), default="adaptive")
    args = dev_common.parse_dev_args(parser, argv)
    tasks = dev_common.dev_tasks(args)
    results = {}
    if args.extrap_python:
        results["Extra-P"] = dev_common.extrap_results(args, tasks, args.extrap_python)
    modeler = adaptive.AdaptiveModeler(samples_per_class=150, epochs=2)
    original_candidates = adaptive.AdaptiveModeler.candidates
    for variant in args.variants:
        head, *flags = variant.split("+")
        score, _, margin = head.partition("@")
        if "wls" in flags:     # relative (1/y) least squares up to rrd <thr>, parameters may drop out
            def rule(data, choices, margin=1e-3, thr=float(score[3:]) if score.startswith("hyb") else 9.0):
                from hpcpredict.daemon.lab.scaling.measurements import relative_deviation_range
                relative = relative_deviation_range(data.points) <= thr
                return regression.combine(data, choices, margin, relative=relative, allow_dropping=True)
        else:
            rule = make_combine(score, float(margin) if margin else None, "drop" in flags)
        patched = SHIPPED if score == "shipped" else (lambda data, choices, noise, margin=1e-3, rule=rule, **_: rule(data, choices, margin))
        adaptive.combine_for_noise = regression.combine_for_noise = patched
        top = next((int(f[3:]) for f in flags if f.startswith("top")), 1)
        modeler.candidates = _top_k(modeler, original_candidates, top)
        results[variant] = protocol.run_ours(tasks, args.modeler, modeler)
    adaptive.combine_for_noise = regression.combine_for_noise = SHIPPED
    dev_common.report(tasks, results, args.noise, args.variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
