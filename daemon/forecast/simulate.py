"""The forecast: the queue run forward from a snapshot (to be built, issue #41)."""
from __future__ import annotations

from .types import QueuedJob, QueueSnapshot, StartForecast


def forecast_starts(snapshot: QueueSnapshot, *, runs: int = 32, seed: int = 0,
                    extra: QueuedJob | None = None) -> dict[str, StartForecast]:
    """A :class:`StartForecast` for every pending job of ``snapshot`` (and ``extra``, a job not
    yet submitted, placed at its ``priority_rank``), keyed by job id."""
    raise NotImplementedError("issue #41")
