"""Development check for the adaptive modeler's noisy-line and combination rules (DEV seeds only).

Same adapted classifier, different ways to turn its probabilities for a noisy line into one
exponent (``adaptive.NOISY_LINE_QUANTILE``): "top" = the most probable plausible class (the first
rule), "q<x>" = the class at quantile x of the probabilities with classes ordered by growth
(q0.5 = posterior median). Flags: "+s<n>" adapts on n samples per class (default 150, as the
protocol), "+rel<t>" sets the adaptive modeler's relative-fit threshold (rrd;
``regression.RELATIVE_FIT_BELOW``, shipped: every noise level; "+rel0.7" = an earlier rule), "+cls<t>" the
classifier-only line-noise threshold (and the noisy combination margin's rrd), "+grid<t>" the
classifier-only threshold for lines averaged over a grid (m >= 2). Prints accuracy /
extrapolation error next to Extra-P 4.2.5 (median; cached per seed, see dev_common.py) and, per
variant, the cells that meet the issue's targets.

    nice -n 10 .venv/bin/python benchmarks/scaling/noisy_line_dev.py --seed 104 --m 2 --functions 200 \
        --noise 0.02 0.05 0.1 0.2 0.5 0.75 1.0 --evaluate 0.5 0.75 1.0 \
        --extrap-python /tmp/extrap-venv/bin/python --variants q0.5 q0.5+rel0.7 top
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scaling"))  # synthetic_protocol

import dev_common  # noqa: E402
import synthetic_protocol as protocol  # noqa: E402
from hpcpredict.daemon.lab.scaling import adaptive, regression  # noqa: E402

SETTINGS = ((adaptive, "NOISY_LINE_QUANTILE"), (adaptive, "GRID_CLASSIFIER_ONLY_ABOVE"),
            (adaptive, "CLASSIFIER_ONLY_ABOVE"), (regression, "RELATIVE_FIT_BELOW"))


def _flag(flags, prefix, default):
    return next((float(f[len(prefix):]) for f in flags if f.startswith(prefix)), default)


def main(argv=None) -> int:
    parser = dev_common.dev_parser(__doc__, functions=60, m=1, noise=list(protocol.NOISE_LEVELS))
    dev_common.add_modelling_options(parser, variants=["top", "q0.5"])
    args = dev_common.parse_dev_args(parser, argv)
    tasks = dev_common.dev_tasks(args)
    chosen = [t for t in tasks if any(abs(t["noise"] - n) < 1e-9 for n in args.evaluate)]
    results = {}
    if args.extrap_python:
        ids = {t["id"] for t in chosen}
        results["Extra-P"] = [r for r in dev_common.extrap_results(args, tasks, args.extrap_python) if r["id"] in ids]
    modelers = {}     # adaptations shared between variants with the same classifier settings
    saved = {(module, name): getattr(module, name) for module, name in SETTINGS}
    try:
        for variant in args.variants:
            rule, *flags = variant.split("+")
            samples = int(_flag(flags, "s", args.adapt_samples))
            modeler = modelers.setdefault(samples, adaptive.AdaptiveModeler(samples_per_class=samples, epochs=2))
            adaptive.NOISY_LINE_QUANTILE = None if rule == "top" else float(rule[1:])
            regression.RELATIVE_FIT_BELOW = _flag(flags, "rel", saved[(regression, "RELATIVE_FIT_BELOW")])
            adaptive.CLASSIFIER_ONLY_ABOVE = _flag(flags, "cls", saved[(adaptive, "CLASSIFIER_ONLY_ABOVE")])
            adaptive.GRID_CLASSIFIER_ONLY_ABOVE = _flag(flags, "grid", saved[(adaptive, "GRID_CLASSIFIER_ONLY_ABOVE")])
            results[variant] = protocol.run_ours(chosen, "adaptive", modeler)
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)
    dev_common.report(chosen, results, args.evaluate, args.variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
