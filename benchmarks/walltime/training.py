"""Training time on 10^6 jobs and per-Predict latency of our walltime model.

Run by ``python -m benchmarks run walltime`` (10^6 jobs with ``--full``).

The 10^6 jobs are synthesised by resampling KTH-SP2: the trace is replayed in consecutive
copies (copy k shifted by k x the trace span, users renamed per copy so each copy adds new
users) with every runtime jittered by a log-normal factor (sigma 0.1, capped at the request).
"""
from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from hpcpredict.daemon.history.persist import load_model, save_model
from hpcpredict.daemon.lab.history import read_trace, train_model
from hpcpredict.daemon.records import TIMEOUT, JobRecord

ROOT = Path(__file__).resolve().parents[2]


def resample(jobs: list[JobRecord], total: int, seed: int = 0) -> list[JobRecord]:
    rng = np.random.default_rng(seed)
    jobs = [j for j in jobs if j.runtime_s >= 0]
    span = max(j.end_time for j in jobs) - min(j.submit_time for j in jobs) + 1.0
    out: list[JobRecord] = []
    copy = 0
    while len(out) < total:
        jitter = np.exp(rng.normal(0.0, 0.1, len(jobs)))
        shift = copy * span
        for job, factor in zip(jobs, jitter):
            runtime = job.runtime_s * float(factor)
            if job.requested_time_s > 0:
                runtime = min(runtime, job.requested_time_s)
            start = job.start_time + shift
            out.append(dataclasses.replace(
                job, job_id=f"{copy}.{job.job_id}", user=f"{copy}:{job.user}", submit_time=job.submit_time + shift,
                start_time=start, end_time=start + runtime, runtime_s=runtime,
                state=TIMEOUT if job.requested_time_s > 0 and runtime >= job.requested_time_s else job.state))
            if len(out) == total:
                break
        copy += 1
    return out


def train_and_time(total_jobs: int = 1_000_000, probes: int = 10_000) -> dict:
    """Train on ``total_jobs`` resampled jobs; time save, load and one predict() at a time."""
    base = read_trace(ROOT / "tests" / "data" / "traces" / "KTH-SP2.swf")
    jobs = resample(base, total_jobs)
    started, started_cpu = time.perf_counter(), time.process_time()
    model = train_model(jobs)
    train_s, train_cpu_s = time.perf_counter() - started, time.process_time() - started_cpu
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        save_model(model, Path(tmp))
        save_s = time.perf_counter() - started
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        started = time.perf_counter()
        model = load_model(Path(tmp))
        load_s = time.perf_counter() - started
    # Predict latency on the last jobs (known users and strangers), one call at a time.
    latencies, cpu = [], []
    for job in jobs[-probes:]:
        probe = dataclasses.replace(job, job_id="", runtime_s=-1.0)
        t0, c0 = time.perf_counter(), time.thread_time()
        model.predict(probe)
        cpu.append(time.thread_time() - c0)
        latencies.append(time.perf_counter() - t0)
    lat = np.array(latencies) * 1e6
    cpu_us = np.array(cpu) * 1e6   # CPU time of the call: wall time minus preemption on a busy host
    return {"jobs": len(jobs), "users": len(model.state.history.by_user), "train_s": round(train_s, 1),
            "train_cpu_s": round(train_cpu_s, 1),
            "save_s": round(save_s, 2), "load_s": round(load_s, 2), "artifact_mb": round(size / 2**20, 1),
            "predict_us_median": round(float(np.median(lat)), 1),
            "predict_us_p99": round(float(np.percentile(lat, 99)), 1),
            "predict_us_max": round(float(lat.max()), 1),
            "predict_cpu_us_median": round(float(np.median(cpu_us)), 1),
            "predict_cpu_us_p99": round(float(np.percentile(cpu_us, 99)), 1)}
