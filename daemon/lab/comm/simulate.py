"""SimGrid-driven generator of communication records for fabrics we do not have (simulated).

:func:`plan_points` draws the sweep (pure, seeded): configurations like the paper's benchmark
(n, ppn, l, PM; Table 5 ranges, capped to the fabric and ``max_ranks``) or an evaluation
pattern's, each placed on random allocations of a partly busy machine (other jobs hold
contiguous node ranges, the job gets the first free nodes from a random point, like a
first-fit scheduler, so allocations are irregular but local). :func:`simulate` writes the
platform XML, runs :mod:`~hpcpredict.daemon.lab.comm.simworker` as a child process (SimGrid allows
one engine per process) and returns :class:`CommRecord` rows with ``source="simgrid"``.

>>> pts = plan_points("fattree", "2;4,4;1,2;1,2", "halo3d", 3, seed=1)
>>> len(pts), sorted(pts[0]) [:3]
(3, ['grid', 'hosts', 'message_bytes'])
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from typing import Callable

import numpy as np

from .fabric import HOST_PREFIX, fabric_size, platform_xml
from ...comm.patterns import PATTERNS
from ...comm.records import CommRecord
from ...errors import CommandError, InvalidRequest

logger = logging.getLogger(__name__)

LULESH_TASKS = (8, 27, 64, 125, 216)
PPN_CHOICES = (1, 2, 4, 8, 16)


def tasks_per_node_string(counts) -> str:
    """Per-node counts in SLURM_TASKS_PER_NODE form: [4, 4, 4, 3] -> '4(x3),3'."""
    parts, i, counts = [], 0, list(counts)
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(f"{counts[i]}(x{j - i})" if j - i > 1 else str(counts[i]))
        i = j
    return ",".join(parts)


def _allocate(rng: np.random.Generator, total: int, n: int) -> np.ndarray:
    """First-fit allocation of ``n`` nodes on a machine where other jobs hold node ranges."""
    busy = np.zeros(total, dtype=bool)
    target = rng.uniform(0.2, 0.7) * total
    while busy.sum() < min(target, total - n):
        start = int(rng.integers(total))
        busy[start: start + int(rng.integers(1, max(2, total // 8)))] = True
    free = np.flatnonzero(~busy)
    if free.size < n:
        free = np.arange(total)
    offset = int(rng.integers(free.size))
    return np.sort(np.roll(free, -offset)[:n])


def _loguniform_int(rng, low: float, high: float) -> int:
    return int(round(np.exp(rng.uniform(np.log(low), np.log(high)))))


def plan_points(fabric: str, shape: str, pattern: str, npoints: int, seed: int,
                max_ranks: int = 256, repeats: int = 2, peers: tuple[int, int] = (1, 4)) -> list[dict]:
    """``npoints`` points: configurations drawn at random, each on ``repeats`` allocations.

    ``peers`` is the benchmark's PM range (the paper's 1-4 by default).
    """
    if not 1 <= peers[0] <= peers[1]:
        raise InvalidRequest("peers", f"bad PM range {peers}")
    if pattern not in PATTERNS or pattern == "explicit":
        raise InvalidRequest("pattern", f"cannot simulate pattern {pattern!r}")
    if npoints < 1:
        raise InvalidRequest("points", f"must be >= 1, got {npoints}")
    total = fabric_size(fabric, shape)
    rng = np.random.default_rng(seed)
    points: list[dict] = []
    while len(points) < npoints:
        config: dict = {"pattern": pattern, "seed": int(rng.integers(1 << 31)), "grid": []}
        ppn = int(rng.choice(PPN_CHOICES)) if rng.random() < 0.5 else int(rng.integers(1, 17))
        if pattern == "benchmark":
            nmax = max(2, min(total, max_ranks // ppn))
            n = _loguniform_int(rng, 2, nmax + 0.49)
            ntasks = n * ppn
            config.update(message_bytes=_loguniform_int(rng, 16, 16 << 20),
                          peers=int(rng.integers(peers[0], peers[1] + 1)))
        else:
            if pattern.startswith("lulesh"):
                ntasks = int(rng.choice([t for t in LULESH_TASKS if t <= max_ranks]))
            else:
                ntasks = _loguniform_int(rng, 8, max_ranks)
            # at least two nodes: a single-node run never touches the network, and the
            # benchmark (like the paper's, n >= 8) does not cover it
            n = min(total, max(2, -(-ntasks // ppn)))
            config.update(message_bytes=_loguniform_int(rng, 256, 4 << 20), peers=0)
        if n > total or ntasks < 2:
            continue
        counts = np.full(n, ntasks // n)
        counts[: ntasks % n] += 1
        config.update(ntasks=ntasks, tasks_per_node=tasks_per_node_string(counts),
                      rank_node=np.repeat(np.arange(n), counts).tolist())
        for _ in range(repeats):
            if len(points) < npoints:
                points.append(dict(config, hosts=_allocate(rng, total, n).tolist()))
    return points


def simulate(fabric: str, shape: str, points: list[dict], *, background: int = 0,
             iterations: int = 0, seed: int = 0,
             progress: Callable[[int], None] | None = None) -> list[CommRecord]:
    """Simulate every point; returns one record per point (``source="simgrid"``)."""
    from ClusterShell.NodeSet import NodeSet

    if background < 0:
        raise InvalidRequest("background", f"must be >= 0, got {background}")
    iterations = iterations or (5 if background else 1)
    with tempfile.TemporaryDirectory(prefix="hpcpredict-sim-") as tmp:
        platform = os.path.join(tmp, "platform.xml")
        with open(platform, "w", encoding="utf-8") as out:
            out.write(platform_xml(fabric, shape))
        spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.jsonl")
        with open(spec_path, "w", encoding="utf-8") as out:
            json.dump({"platform": platform, "points": points, "background": background,
                       "iterations": iterations, "seed": seed}, out)
        cmd = [sys.executable, "-m", "hpcpredict.daemon.lab.comm.simworker", spec_path, out_path]
        logger.info("simulating %d points on %s %s", len(points), fabric, shape)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        done = 0
        while proc.poll() is None:
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            if progress and os.path.exists(out_path):
                with open(out_path, encoding="utf-8") as stream:
                    now = sum(1 for _ in stream)
                if now > done:
                    progress(now - done)
                    done = now
        stderr = proc.stderr.read() if proc.stderr else ""
        if proc.returncode != 0:
            raise CommandError(cmd, proc.returncode, "", stderr)
        times = {}
        with open(out_path, encoding="utf-8") as stream:
            for line in stream:
                row = json.loads(line)
                times[row["index"]] = row["time_s"]
    if len(times) != len(points):
        raise CommandError(cmd, proc.returncode, "", stderr,
                           message=f"simulated {len(times)} of {len(points)} points")
    records = []
    for index, point in enumerate(points):
        nodes = NodeSet.fromlist([f"{HOST_PREFIX}{h}" for h in point["hosts"]])
        records.append(CommRecord(
            pattern=point["pattern"], ntasks=point["ntasks"], message_bytes=point["message_bytes"],
            nodes=str(nodes), time_s=times[index], peers=point.get("peers", 0),
            grid="x".join(map(str, point.get("grid", ()))), seed=point["seed"],
            distribution="block", tasks_per_node=point["tasks_per_node"], source="simgrid",
            fabric=fabric, shape=shape, background=background, iterations=iterations))
    return records
