"""Development check for the adaptive modeler's high-noise rule (DEV seeds only, never 3 or 7).

Same adapted classifier, two ways to pick a noisy line's exponent: CV SMAPE among the top-3
classes (seed 001's DNN modeler as first built) vs the classifier's most probable plausible
class (``CLASSIFIER_ONLY_ABOVE``; now the class at the growth median of its
probabilities, ``NOISY_LINE_QUANTILE``; see noisy_line_dev.py for comparing those). Tasks come from synthetic_protocol.py.

    nice -n 10 .venv/bin/python benchmarks/scaling/selection_rules.py --seed 101 --functions 60 --m 1
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scaling"))  # synthetic_protocol

import dev_common  # noqa: E402
import synthetic_protocol as protocol  # noqa: E402
from hpcpredict.daemon.lab.scaling import adaptive  # noqa: E402


def main(argv=None) -> int:
    parser = dev_common.dev_parser(__doc__, functions=60, m=1, noise=[0.5, 0.75, 1.0])
    args = dev_common.parse_dev_args(parser, argv)
    tasks = dev_common.dev_tasks(args)
    modeler = adaptive.AdaptiveModeler(samples_per_class=150, epochs=2)   # adaptations shared
    results = {}
    current = adaptive.CLASSIFIER_ONLY_ABOVE
    for name, threshold in (("cv-among-top-3", float("inf")), ("shipped-noisy-line-rule", current)):
        adaptive.CLASSIFIER_ONLY_ABOVE = threshold
        results[name] = protocol.run_ours(tasks, "adaptive", modeler)
    adaptive.CLASSIFIER_ONLY_ABOVE = current
    dev_common.report(tasks, results, args.noise, list(results), label="rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
