"""Train and publish the runtime models of one application from its run table.

Writes the ``inputs`` variant (job-script inputs only: usable at submission) and, when some
runtime features arrive early enough (time reduction), the ``runtime`` variant (inputs +
those features: used after ``ReportRuntimeFeatures``). Each artifact's metadata records the
data file, its SHA-256, the cross-validated MAPE and the features kept.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> csv = folder / "runs.csv"
>>> _ = csv.write_text("n,it,it@t,t\\n" + "\\n".join(f"{n},{n % 7 + 1},0.01,{n * (n % 7 + 1)}" for n in range(1, 60)))
>>> summary = train_application(csv, target="t", application="demo", directory=folder / "models",
...                             params={"n_estimators": 20, "random_state": 0})
>>> sorted(summary)
['inputs', 'runtime']
>>> summary["runtime"]["required_inputs"]
['n', 'it']
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .dataset import read_runs_csv
from .evaluation import usable_inputs
from .model import RuntimeModel
from .reduction import DEFAULT_TIME_SHARE
from .selection import cross_validated_mape
from .service import save_application_model


def train_application(data: Path, *, target: str, application: str, directory: Path,
                      time_share: float = DEFAULT_TIME_SHARE, params: dict | None = None,
                      input_aliases: dict[str, str] | None = None, version: str = "") -> dict[str, dict]:
    """Fit and save the application's variants; returns each variant's metadata."""
    table = read_runs_csv(Path(data), target=target)
    rows = np.arange(len(table.y))
    digest = hashlib.sha256(Path(data).read_bytes()).hexdigest()
    params = dict(params or {})
    static_inputs, _, _ = usable_inputs(table, rows, time_share=None)
    all_inputs, kept_features, dropped = usable_inputs(table, rows, time_share=time_share)
    variants = {"inputs": static_inputs}
    if kept_features:
        variants["runtime"] = all_inputs
    summary = {}
    for variant, inputs in variants.items():
        model = RuntimeModel("extra-trees", params, inputs).fit(table)
        metadata = {
            "variant": variant, "version": version or digest[:12], "data": str(data), "data_sha256": digest,
            "target": target, "n_runs": int(len(table.y)),
            "cv_mape": cross_validated_mape(table, rows, "extra-trees", dict(params, calibration_folds=0),
                                            inputs=inputs),
            "kept_features": model.kept_features, "required_inputs": model.required_inputs,
            "runtime_features_dropped": dropped, "input_aliases": dict(input_aliases or {}),
        }
        save_application_model(model, Path(directory), application=application, metadata=metadata)
        summary[variant] = metadata
    return summary
