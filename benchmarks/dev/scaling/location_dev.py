"""Development check: which estimate of a point's repetitions the adaptive modeler fits (DEV seeds only).

Variants (``adaptive.MEAN_ABOVE`` / ``MEAN_VARIANCE_RATIO`` / ``ADAPT_ON_LOCATION``):
"median" = seed 001's rule (shipped before the mean rule); "mean>T" = the mean of the repetitions
whenever the task's rrd is above T; "auto>T" = the mean above rrd T only if a bootstrap of the
pooled noise says the mean is clearly less variable than the median (ratio <= 0.75, the shipped
rule; "auto>T@r" sets the ratio); flag "+medadapt" = domain adaptation still simulates medians,
"+skew<s>" = mean only if the pooled deviations' |skewness| <= s (``MEAN_MAX_SKEW``; "+skewinf" = no
skewness guard).
Prints accuracy / extrapolation error next to Extra-P 4.2.5 (median; cached per seed, see
dev_common.py) and, per variant, the cells that meet the issue's targets.

    nice -n 10 .venv/bin/python benchmarks/scaling/location_dev.py --seed 104 --m 1 --functions 200 \
        --noise 0.02 0.05 0.1 0.2 0.5 0.75 1.0 --evaluate 0.2 0.5 0.75 1.0 \
        --extrap-python /tmp/extrap-venv/bin/python --variants median mean>0.15 auto>0.15

``--skewed`` replaces the tasks' uniform noise by right-skewed noise with rare outliers (a
check that the "auto" rule keeps the median where the mean would be hurt; no Extra-P then).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scaling"))  # synthetic_protocol

import dev_common  # noqa: E402
import synthetic_protocol as protocol  # noqa: E402
from hpcpredict.daemon.lab.scaling import adaptive  # noqa: E402

SETTINGS = ("MEAN_ABOVE", "MEAN_VARIANCE_RATIO", "ADAPT_ON_LOCATION", "MEAN_MAX_SKEW")


def skew_noise(tasks: list[dict], seed: int) -> None:
    """Re-draw each task's repetitions: clean * (1 + n * (lognormal(0, 0.5) - 1) / 2), and one
    repetition in 20 slowed by a further factor 1 + 2n (interference); clean = the median of
    the original repetitions (unbiased enough for a comparison between estimators)."""
    rng = np.random.default_rng(seed + 1000)
    for task in tasks:
        noise = task["noise"]
        lines = []
        for line in task["lines"]:
            record = json.loads(line)
            clean = float(np.median(record["value"]))
            base = 1 + noise * (rng.lognormal(0.0, 0.5, 5) - 1) / 2
            spikes = np.where(rng.random(5) < 0.05, 1 + 2 * noise, 1.0)
            record["value"] = [float(v) for v in clean * base * spikes]
            lines.append(json.dumps(record))
        task["lines"] = lines


def main(argv=None) -> int:
    parser = dev_common.dev_parser(__doc__, functions=60, m=1, noise=list(protocol.NOISE_LEVELS))
    dev_common.add_modelling_options(parser, variants=["median", "auto>0.15"])
    parser.add_argument("--skewed", action="store_true")
    args = dev_common.parse_dev_args(parser, argv)
    tasks = dev_common.dev_tasks(args)
    chosen = [t for t in tasks if any(abs(t["noise"] - n) < 1e-9 for n in args.evaluate)]
    results = {}
    if args.extrap_python and not args.skewed:
        ids = {t["id"] for t in chosen}
        results["Extra-P"] = [r for r in dev_common.extrap_results(args, tasks, args.extrap_python) if r["id"] in ids]
    if args.skewed:
        skew_noise(chosen, args.seed)
    modeler = adaptive.AdaptiveModeler(samples_per_class=args.adapt_samples, epochs=2)
    saved = {name: getattr(adaptive, name) for name in SETTINGS}
    try:
        for variant in args.variants:
            rule, *flags = variant.split("+")
            rule, _, ratio = rule.partition("@")
            adaptive.ADAPT_ON_LOCATION = "medadapt" not in flags
            adaptive.MEAN_MAX_SKEW = next((float(f[4:]) for f in flags if f.startswith("skew")),
                                          saved["MEAN_MAX_SKEW"])
            if rule == "median":
                adaptive.MEAN_ABOVE = None
            else:
                kind, threshold = rule.split(">")
                adaptive.MEAN_ABOVE = float(threshold)
                adaptive.MEAN_VARIANCE_RATIO = (np.inf if kind == "mean" else
                                                float(ratio) if ratio else saved["MEAN_VARIANCE_RATIO"])
            started = time.monotonic()
            results[variant] = protocol.run_ours(chosen, "adaptive", modeler)
            print(f"{variant}: {time.monotonic() - started:.0f} s wall", file=sys.stderr)
    finally:
        for name, value in saved.items():
            setattr(adaptive, name, value)
    if args.skewed:       # no Extra-P: compare every variant with the first one
        first = args.variants[0]
        results = {"Extra-P" if k == first else k: v for k, v in results.items()}
        print(f"(skewed noise; the 'Extra-P' column is variant {first})")
    dev_common.report(chosen, results, args.evaluate, [v for v in args.variants if v in results])
    return 0


if __name__ == "__main__":
    sys.exit(main())
