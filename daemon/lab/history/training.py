"""Train the walltime model on a store's history, streaming: memory does not grow with it.

:func:`hpcpredict.daemon.history.train_model` replays a list of jobs; a store of 10^7 jobs
does not fit in a list (a JobRecord costs ~1 KiB of Python objects). This replays the same
jobs in the same order straight from the store's cursor (:meth:`Store.jobs_by_submit`: in
submission order, fetched in batches): what is held at any time is the model's own windowed
state (each user's last jobs, recent residuals) and the jobs submitted but not yet ended at
the point of the replay (a heap, as large as the trace's concurrency). The result is the very
model ``train_model`` would fit on the same jobs (tested: equal states).
"""
from __future__ import annotations

import heapq
import math
from typing import Callable

from .history.evaluate import end_time
from .history.model import HpcPredictModel, ModelParams
from .store import Store


def train_from_store(store: Store, params: ModelParams | None = None, risk: float = 0.03,
                     replay_last: int = 200_000, progress: Callable[[int, int], None] | None = None,
                     cluster: str | None = None) -> tuple[HpcPredictModel, int]:
    """The walltime model fit on every scorable job of ``store`` (of ``cluster``; None: of
    every cluster, one shared model), and how many jobs it saw.

    As :func:`~hpcpredict.daemon.history.persist.train_model`: jobs are predicted at submit and
    observed at end, only the last ``replay_last`` submissions in full (older ones are only
    remembered: the model keeps nothing of them but each user's last jobs and the ratio
    window). ``replay_last`` is counted from the store's count taken before the stream opens;
    jobs ingested in between shift it by as many, which changes nothing that matters."""
    total = store.count_jobs(scorable=True, cluster=cluster)
    model = HpcPredictModel(params)
    full_from = max(total - replay_last, 0)
    running: list[tuple[float, int, object]] = []   # (end, index, job) of jobs not yet ended
    last_end = -math.inf
    seen = 0
    for index, job in enumerate(store.jobs_by_submit(with_inputs=False, cluster=cluster)):
        while running and running[0][0] <= job.submit_time:
            _, done, record = heapq.heappop(running)
            (model.remember if done < full_from else model.observe)(record)
        if index >= full_from:
            model.submit(job, risk, explain=False)
        ended = end_time(job)
        heapq.heappush(running, (ended, index, job))
        last_end = max(last_end, ended)
        seen = index + 1
        if progress is not None and index % 5000 == 0:
            progress(index, total)
    while running:
        _, done, record = heapq.heappop(running)
        (model.remember if done < full_from else model.observe)(record)
    if seen:
        model.state.trained_until = last_end
    return model, seen
