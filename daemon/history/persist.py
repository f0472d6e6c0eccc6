"""Save and load our walltime model — plain JSON, never pickle.

The model's learned state (per-user recent history, expert scores, calibration residuals) is
plain data; it is written as one JSON document plus a small manifest with a checksum. The
daemon loads it (:class:`hpcpredict.daemon.model_kinds.WalltimeKind`); the lab fits it
(:mod:`hpcpredict.daemon.lab.history.training`).

>>> import tempfile, pathlib
>>> from hpcpredict.daemon.records import JobRecord
>>> model = WalltimeModel()
>>> for i in range(5):
...     model.observe(JobRecord(str(i), "ann", 100.0 * i, runtime_s=60.0, requested_time_s=600.0,
...                             end_time=100.0 * i + 60.0))
>>> directory = pathlib.Path(tempfile.mkdtemp())
>>> save_model(model, directory)
>>> round(load_model(directory).predict(JobRecord("9", "ann", 999.0, requested_time_s=600.0)).runtime_s, 3)
60.0
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..errors import ModelArtifactError
from .model import WalltimeModel

KIND = "walltime-history"
FORMAT_VERSION = 5  # 5: + calibration batch ids; 4: + calibration gaps; 3: + blend scores; 2: 10 experts + learned selector
READABLE_VERSIONS = (2, 3, 4, 5)  # older states load with neutral blend scores, without gaps or batches
STATE_FILE = "state.json"
MANIFEST_FILE = "manifest.json"


def save_model(model: WalltimeModel, directory: Path) -> None:
    """Write ``model`` under ``directory`` (created) atomically: state, then manifest."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(model.to_state(), separators=(",", ":")).encode()
    manifest = {"kind": KIND, "format_version": FORMAT_VERSION, "predictor": model.name,
                "sha256": hashlib.sha256(payload).hexdigest(), "observed": model.state.observed,
                "users": len(model.state.history.by_user)}
    for name, data in ((STATE_FILE, payload), (MANIFEST_FILE, json.dumps(manifest, indent=1).encode())):
        temporary = directory / f".{name}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, directory / name)


def load_model(directory: Path) -> WalltimeModel:
    """Read a model written by :func:`save_model`; any defect -> ModelArtifactError."""
    directory = Path(directory)
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text())
        payload = (directory / STATE_FILE).read_bytes()
    except (OSError, ValueError) as error:
        raise ModelArtifactError(f"{directory}: cannot read walltime model: {error}") from error
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise ModelArtifactError(f"{directory}: not a walltime model (kind {manifest.get('kind')!r})"
                                 if isinstance(manifest, dict) else f"{directory}: bad manifest")
    written = manifest.get("format_version")
    if isinstance(written, int) and not isinstance(written, bool) and written > max(READABLE_VERSIONS):
        raise ModelArtifactError(f"{directory}: walltime model format {written} was written by a newer hpcpredict "
                                 f"(this one reads formats {', '.join(map(str, READABLE_VERSIONS))}): serve a "
                                 f"version published by this release (`hpcpredict rollback walltime VERSION`) or "
                                 f"retrain with `hpcpredict train`")
    if written not in READABLE_VERSIONS:
        raise ModelArtifactError(f"{directory}: unsupported walltime model format version "
                                 f"{manifest.get('format_version')!r} (this hpcpredict reads "
                                 f"{', '.join(map(str, READABLE_VERSIONS))}; retrain with `hpcpredict train`)")
    if hashlib.sha256(payload).hexdigest() != manifest.get("sha256"):
        raise ModelArtifactError(f"{directory}: {STATE_FILE} does not match its checksum")
    try:
        return WalltimeModel.from_state(json.loads(payload))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ModelArtifactError(f"{directory}: corrupt walltime model state: {error}") from error
