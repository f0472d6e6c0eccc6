"""Fit the walltime model by replaying job history online, from a list or streamed from a store.

Both fits predict each job at its submission and observe it at its end, exactly as the daemon
would have seen the jobs, so every calibration residual is out of sample; they write nothing
(:func:`hpcpredict.daemon.history.persist.save_model` writes the artifact the daemon loads).

:func:`train_model` replays a list of jobs; a store of 10^7 jobs does not fit in a list (a
JobRecord costs ~1 KiB of Python objects). :func:`train_from_store` replays the same jobs in
the same order straight from the store's cursor (:meth:`Store.jobs_by_submit`: in submission
order, fetched in batches): what is held at any time is the model's own windowed state (each
user's last jobs, recent residuals) and the jobs submitted but not yet ended at the point of
the replay (a heap, as large as the trace's concurrency). The result is the very model
``train_model`` would fit on the same jobs (tested: equal states).

>>> import tempfile, pathlib
>>> from hpcpredict.daemon.history.persist import load_model, save_model
>>> from hpcpredict.daemon.records import JobRecord
>>> jobs = [JobRecord(str(i), "ann", 100.0 * i, runtime_s=60.0, requested_time_s=600.0,
...                   end_time=100.0 * i + 60.0) for i in range(5)]
>>> directory = pathlib.Path(tempfile.mkdtemp())
>>> save_model(train_model(jobs), directory)
>>> round(load_model(directory).predict(JobRecord("9", "ann", 999.0, requested_time_s=600.0)).runtime_s, 3)
60.0
"""
from __future__ import annotations

import heapq
import math
from typing import Callable

from .evaluation import end_time, scorable
from ...history.model import WalltimeModel, ModelParams
from ...records import JobRecord
from ...store import Store


def train_model(records: list[JobRecord], params: ModelParams | None = None, risk: float = 0.03,
                replay_last: int = 200_000,
                progress: Callable[[int, int], None] | None = None) -> WalltimeModel:
    """Fit by replaying ``records`` online (predict at submit, observe at end), exactly as the
    daemon would have seen them, so every calibration residual is out of sample.

    Everything the model learns is windowed (a user's last jobs, recent residuals, decaying
    expert scores), so only the last ``replay_last`` submissions are replayed in full; older
    jobs are just added to the history (:meth:`WalltimeModel.remember`), which is what
    keeps training on 10^6 jobs within the time budget.

    The model remembers the last end time it was trained on: replaying the same history into
    it again (as the daemon does with its store at start) is ignored, newer jobs are learned."""
    model = WalltimeModel(params)
    ordered = scorable(records)
    full_from = max(len(ordered) - replay_last, 0)
    running: list[tuple[float, int]] = []
    for index, job in enumerate(ordered):
        while running and running[0][0] <= job.submit_time:
            done = heapq.heappop(running)[1]
            if done < full_from:
                model.remember(ordered[done])
            else:
                model.observe(ordered[done])
        if index >= full_from:
            model.submit(job, risk, explain=False)
        heapq.heappush(running, (end_time(job), index))
        if progress is not None and index % 5000 == 0:
            progress(index, len(ordered))
    while running:
        done = heapq.heappop(running)[1]
        (model.remember if done < full_from else model.observe)(ordered[done])
    if ordered:
        model.state.trained_until = max(end_time(job) for job in ordered)
    return model


def train_from_store(store: Store, params: ModelParams | None = None, risk: float = 0.03,
                     replay_last: int = 200_000, progress: Callable[[int, int], None] | None = None,
                     cluster: str | None = None,
                     on_prediction: Callable[[JobRecord, float], None] | None = None) -> tuple[WalltimeModel, int]:
    """The walltime model fit on every scorable job of ``store`` (of ``cluster``; None: of
    every cluster, one shared model), and how many jobs it saw. ``on_prediction`` hears each
    job the replay predicts and the runtime predicted at its submission (out of sample: the
    publish check, :func:`hpcpredict.daemon.lab.refresh.held_out_check`).

    As :func:`train_model`: jobs are predicted at submit and observed at end, only the last
    ``replay_last`` submissions in full (older ones are only remembered: the model keeps
    nothing of them but each user's last jobs and the ratio window). ``replay_last`` is counted from the store's count taken before the stream opens;
    jobs ingested in between shift it by as many, which changes nothing that matters."""
    total = store.count_jobs(scorable=True, cluster=cluster)
    model = WalltimeModel(params)
    full_from = max(total - replay_last, 0)
    running: list[tuple[float, int, JobRecord]] = []   # (end, index, job) of jobs not yet ended
    last_end = -math.inf
    seen = 0
    for index, job in enumerate(store.jobs_by_submit(with_inputs=False, cluster=cluster)):
        while running and running[0][0] <= job.submit_time:
            _, done, record = heapq.heappop(running)
            (model.remember if done < full_from else model.observe)(record)
        if index >= full_from:
            predicted = model.submit(job, risk, explain=False)
            if on_prediction is not None:
                on_prediction(job, predicted.runtime_s)
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
