"""Runtime features: values an application reports early in its run, with the time it did.

Protocol (language neutral): the job gets the environment variable
``HPCPREDICT_FEATURES_FILE`` naming a file; the application appends lines::

    HPCPREDICT t=12.5 iterations=400 solver=cg

``t`` is the number of seconds since the job started (``HPCPREDICT_T0``, Unix seconds, when
the launcher sets it; otherwise since this module was first imported). Any program can write
these lines (``echo "HPCPREDICT t=$SECONDS n=400" >> "$HPCPREDICT_FEATURES_FILE"``); Python
programs call :func:`report`. The daemon reads the lines with :func:`parse_feature_lines` and
re-predicts (``ReportRuntimeFeatures``); which reported features a model may use is decided at
training time by :func:`hpcpredict.daemon.lab.runtime.reduction.reduce_by_time`.

>>> line = format_feature_line({"iterations": 400, "solver": "cg"}, at_s=12.5)
>>> line
'HPCPREDICT t=12.5 iterations=400 solver=cg'
>>> parse_feature_lines(line + "\\nnoise\\n")
[ReportedFeature(key='iterations', value=400.0, at_s=12.5), ReportedFeature(key='solver', value='cg', at_s=12.5)]
"""
from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Mapping

from .values import MAX_VALUE_CHARS, Value, coerce_value, valid_key

logger = logging.getLogger(__name__)

FEATURES_FILE_ENV = "HPCPREDICT_FEATURES_FILE"
START_TIME_ENV = "HPCPREDICT_T0"
LINE_PREFIX = "HPCPREDICT"
MAX_LINES = 10_000
MAX_LINE_CHARS = 4096
_IMPORTED_AT = time.time()


@dataclass(frozen=True)
class ReportedFeature:
    key: str
    value: Value
    at_s: float


def _format_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if not math.isfinite(float(value)):
            raise ValueError(f"runtime feature value must be finite: {value!r}")
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    if not text or len(text) > MAX_VALUE_CHARS or any(c.isspace() or c == "=" for c in text):
        raise ValueError(f"runtime feature value must be a non-empty word without '=': {text!r}")
    return text


def format_feature_line(features: Mapping[str, object], *, at_s: float) -> str:
    """One protocol line for ``features`` reported at ``at_s`` seconds (raises ValueError)."""
    if not features:
        raise ValueError("no runtime feature to report")
    parts = [LINE_PREFIX, f"t={_format_value(float(at_s))}"]
    for key, value in features.items():
        if not valid_key(key) or key == "t":
            raise ValueError(f"invalid runtime feature key: {key!r}")
        parts.append(f"{key}={_format_value(value)}")
    return " ".join(parts)


def elapsed_s(environment: Mapping[str, str] | None = None) -> float:
    """Seconds since the job started (``HPCPREDICT_T0``) or since this module was imported."""
    environment = os.environ if environment is None else environment
    try:
        start = float(environment.get(START_TIME_ENV, ""))
    except ValueError:
        start = _IMPORTED_AT
    return max(0.0, time.time() - start)


def report(key: str, value, *, at_s: float | None = None, path: str | None = None) -> ReportedFeature:
    """Report one runtime feature: append its protocol line to ``$HPCPREDICT_FEATURES_FILE``.

    A bad key or value is a programming error (ValueError). Without a features file, or when
    the file cannot be written, nothing is written (logged): reporting never stops the
    application.
    """
    at = elapsed_s() if at_s is None else float(at_s)
    line = format_feature_line({key: value}, at_s=at)
    feature = ReportedFeature(key, coerce_value(_format_value(value)), at)
    target = path if path is not None else os.environ.get(FEATURES_FILE_ENV)
    if not target:
        logger.debug("no %s: runtime feature %s not written", FEATURES_FILE_ENV, key)
        return feature
    try:
        # O_APPEND keeps concurrent writers' lines whole (one write call per line).
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError as error:
        logger.warning("cannot write runtime feature to %s: %s", target, error)
    return feature


def parse_feature_lines(text: str | bytes, *, max_lines: int = MAX_LINES) -> list[ReportedFeature]:
    """Every ``HPCPREDICT t=... key=value`` pair in ``text``; other lines are ignored.

    Lines without a valid ``t`` and malformed pairs are skipped (counted, logged): the text is
    written by user programs and must never make the reader fail.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    features: list[ReportedFeature] = []
    skipped = 0
    for number, line in enumerate(text.splitlines()):
        if number >= max_lines:
            skipped += 1
            break
        words = line[:MAX_LINE_CHARS].split()
        if len(words) < 3 or words[0] != LINE_PREFIX or not words[1].startswith("t="):
            if words and words[0] == LINE_PREFIX:
                skipped += 1
            continue
        at = coerce_value(words[1][2:])
        if isinstance(at, bool) or not isinstance(at, float) or at < 0:
            skipped += 1
            continue
        for word in words[2:]:
            key, sep, raw = word.partition("=")
            if not sep or not raw or not valid_key(key) or key == "t":
                skipped += 1
                continue
            features.append(ReportedFeature(key, coerce_value(raw), at))
    if skipped:
        logger.warning("runtime features: skipped %d malformed line(s) or pair(s)", skipped)
    return features


def latest_values(features: list[ReportedFeature]) -> tuple[dict[str, Value], dict[str, float]]:
    """The last value of each key and the time it was reported."""
    values: dict[str, Value] = {}
    times: dict[str, float] = {}
    for feature in features:
        values[feature.key] = feature.value
        times[feature.key] = feature.at_s
    return values, times
