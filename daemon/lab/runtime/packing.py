"""Pack a fitted runtime learner into artifact arrays and write a runtime-model artifact.

The artifact is the interface to the daemon: :mod:`hpcpredict.daemon.runtime.served` loads it,
and :mod:`hpcpredict.daemon.runtime.artifacts` holds each format's layout and served predictor.
A servable learner (:func:`~.learners.register_learner` with ``served=``) packs itself with its
``artifact()`` method: (arrays, JSON settings).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np
from sklearn.exceptions import NotFittedError

from ...errors import ModelArtifactError
from ...runtime.artifacts import FORMAT_VERSION, SERVABLE, format_of
from ...runtime.served import USERS_DIR


def pack(estimator) -> tuple[str, dict[str, np.ndarray], dict]:
    """(learner name, arrays, JSON settings) of a fitted runtime learner that can be served."""
    served = getattr(type(estimator), "served", None)
    try:
        if served is None:
            raise NotFittedError("not a servable learner")
        arrays, settings = estimator.artifact()
    except NotFittedError as error:
        raise ModelArtifactError(f"only fitted {', '.join(SERVABLE)} runtime models can be saved") from error
    return served.learner, arrays, settings


def trend_arrays(fill, log_columns, coef, intercept, pairs=None) -> dict[str, np.ndarray]:
    """The arrays of a log-log trend (:class:`~hpcpredict.daemon.runtime.artifacts` reads them)."""
    arrays = {"fill": np.asarray(fill, dtype=float), "log_columns": np.asarray(log_columns).astype(np.int8),
              "trend_coef": np.asarray(coef, dtype=float), "trend_intercept": np.asarray([intercept], dtype=float)}
    if pairs is not None and len(pairs):  # absent: a first-order trend (artifacts written before pairs load unchanged)
        arrays["trend_pairs"] = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return arrays


def _safe_name(name: str, what: str) -> str:
    if (not name or len(name) > 128 or name.startswith(".") or "/" in name or "\\" in name
            or "\x00" in name):
        raise ModelArtifactError(f"invalid {what} for a model directory: {name!r}")
    return name


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_application_model(model, directory: Path, *, application: str, metadata: dict,
                           user: str | None = None) -> None:
    """Write a fitted :class:`RuntimeModel` (a servable learner) under ``directory/<application>/``
    (``user``'s own model: under ``directory/<application>/users/<user>/``, served for her jobs only).

    ``metadata["variant"]`` names the variant (default ``inputs``); the rest (data reference,
    learner choice and CV scores, version, ``input_aliases``...) is stored as given (must be JSON).
    """
    learner, arrays, settings = pack(getattr(model, "estimator_", None))
    variant = _safe_name(str(metadata.get("variant", "inputs")), "variant")
    target = Path(directory) / _safe_name(application, "application key")
    if user is not None:
        target = target / USERS_DIR / _safe_name(user, "user name")
    target.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, allow_pickle=False, **arrays)
    blob = buffer.getvalue()
    description = dict(settings, **{
        "format": format_of(learner), "format_version": FORMAT_VERSION, "application": application,
        "learner": learner, "variant": variant, "encoder": model.encoder_.to_json(),
        "required_inputs": model.required_inputs, "kept_features": model.kept_features,
        "arrays_sha256": hashlib.sha256(blob).hexdigest(), "metadata": metadata,
        "input_ranges": {name: [low, high] for name, (low, high) in getattr(model, "input_ranges_", {}).items()},
    })
    derived = getattr(model, "derived_", None)
    if derived:  # absent otherwise: artifacts without derived inputs are unchanged
        description["derived_inputs"] = derived.to_json()
    try:
        text = json.dumps(description, indent=1, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise ModelArtifactError(f"metadata is not JSON: {error}") from error
    _atomic_write(target / f"{variant}.npz", blob)
    _atomic_write(target / f"{variant}.json", text.encode())
