"""APMT-style decomposition (seed 002) from a few profiled runs at different process counts.

``T(P) = sum_kernels (T_comp + BF_mem * T_mem) + BF_comm * T_comm``:

* ``T_comp = instructions * CPI / (f * P)`` from perf counters (totals over all ranks); when the
  machine has no hardware counters (``<not supported>``), computation falls back to the
  per-function seconds of the profile / P when given, else ``task-clock / P`` minus the
  per-process MPI time (MPI busy-polls by default, so task-clock includes it).
* ``T_mem`` = (L1 hits * L1 latency + LLC hits * LLC latency + LLC misses * memory latency) /
  (f * P) when cache events exist; ``BF_mem = stall cycles / memory cycles`` when a stall event
  exists, else 0 (then ``T_comp`` already contains the memory time via the measured cycles).
* ``T_comm``: point-to-point calls by Hockney ``t = a * bytes + b``, collectives by
  ``t = a * log2(P) + b * bytes + c``, each per process; bytes per process are themselves
  fitted against P. ``BF_comm`` comes from the measured wall time when given, else 1.

Every quantity is fitted against P from a small function set by best R² (seed 002).

Manifest (JSON): ``{"runs": [{"processes": 2, "perf": "p2.perf.csv", "mpi_profile": "p2.mpi.csv",
"wall_s": 1.9, "functions": {"stencil": 1.2e9, ...}}, ...], "latency_cycles": {...}}``;
paths are relative to the manifest.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ...errors import ParseError
from .profiles import P2P_CALLS, MpiCall, PerfCounters, parse_mpi_profile, parse_perf_stat

DEFAULT_LATENCY_CYCLES = {"L1": 4.0, "LLC": 40.0, "memory": 200.0}
KERNEL_SHARE = 0.05


@dataclass(frozen=True)
class ProfiledRun:
    processes: int
    counters: PerfCounters
    mpi: tuple[MpiCall, ...] = ()
    wall_s: float | None = None
    functions: Mapping[str, float] = field(default_factory=dict)   # per-function cycles or CPU s


# --- fitting one quantity against P -------------------------------------------------------

# name -> design matrix of a fit linear in its parameters; None: fitted in log space below.
FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray] | None] = {
    "a+b*P": lambda p: np.column_stack([np.ones_like(p), p]),
    "a+b*log2P": lambda p: np.column_stack([np.ones_like(p), np.log2(p)]),
    "a+b/P": lambda p: np.column_stack([np.ones_like(p), 1.0 / p]),
    "a*P^b": None,          # fitted in log-log space
    "a*exp(b*P)": None,     # fitted in log-linear space
}


@dataclass(frozen=True)
class CounterFit:
    function: str
    params: tuple[float, ...]
    r2: float

    def __call__(self, p: float | np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        a, b = self.params
        if self.function == "a*P^b":
            return a * p ** b
        if self.function == "a*exp(b*P)":
            return a * np.exp(b * p)
        design = FUNCTIONS[self.function]
        assert design is not None  # the two log-space functions (design None) returned above
        return (design(np.atleast_1d(p)) @ np.array([a, b])).reshape(p.shape)


def _r2(y: np.ndarray, fitted: np.ndarray) -> float:
    total = float(np.sum((y - y.mean()) ** 2))
    residual = float(np.sum((y - fitted) ** 2))
    return 1.0 - residual / total if total > 0 else (1.0 if residual == 0 else 0.0)


def fit_against_p(p: npt.ArrayLike, y: npt.ArrayLike) -> CounterFit:
    """Best-R² function of P from the set above (ties: the earlier, simpler function)."""
    p = np.asarray(p, dtype=float)
    y = np.asarray(y, dtype=float)
    best: CounterFit | None = None
    for name, design in FUNCTIONS.items():
        if design is not None:
            coef = np.linalg.lstsq(design(p), y, rcond=None)[0]
            candidate = CounterFit(name, (float(coef[0]), float(coef[1])), 0.0)
        elif np.all(y > 0):
            xs = np.log(p) if name == "a*P^b" else p
            slope, intercept = np.polyfit(xs, np.log(y), 1)
            candidate = CounterFit(name, (float(np.exp(intercept)), float(slope)), 0.0)
        else:
            continue
        fitted = candidate(p)
        if not np.all(np.isfinite(fitted)):
            continue
        candidate = CounterFit(candidate.function, candidate.params, _r2(y, fitted))
        if best is None or candidate.r2 > best.r2 + 1e-9:
            best = candidate
    assert best is not None
    return best


# --- kernels --------------------------------------------------------------------------------

def select_kernels(runs: Sequence[ProfiledRun], share: float = KERNEL_SHARE) -> list[str]:
    """Functions above ``share`` of the total in any run, plus functions whose per-process cost
    does not shrink with P; the rest is aggregated by the caller as 'others'."""
    names = sorted({name for run in runs for name in run.functions})
    ordered = sorted(runs, key=lambda r: r.processes)
    kernels = []
    for name in names:
        big = any(run.functions.get(name, 0.0) > share * sum(run.functions.values()) for run in ordered)
        per_process = [run.functions.get(name, 0.0) / run.processes for run in ordered]
        not_shrinking = len(per_process) > 1 and per_process[-1] >= per_process[0] > 0
        if big or not_shrinking:
            kernels.append(name)
    return kernels


# --- decomposition --------------------------------------------------------------------------

@dataclass(frozen=True)
class Decomposition:
    processes: tuple[int, ...]
    fits: Mapping[str, CounterFit]
    compute_source: str                   # "hardware counters", "function timers" or "task-clock"
    bf_mem: float
    bf_comm: float
    latency_cycles: Mapping[str, float]
    p2p_calls: tuple[str, ...]
    collective_calls: tuple[str, ...]
    comm_models: Mapping[str, tuple[float, ...]]
    kernels: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def components(self, p: float) -> dict[str, float]:
        f = self.fits
        if self.compute_source == "hardware counters":
            freq = f["frequency_hz"](p)
            comp = float(f["instructions"](p) * f["cpi"](p) / (freq * p))
            mem = 0.0
            if "memory_cycles" in f:
                mem = float(f["memory_cycles"](p) / (freq * p))
        else:
            comp = max(float(f["compute_s_per_process"](p)), 0.0)
            mem = 0.0
        comm = 0.0
        for call in self.p2p_calls:
            a, b = self.comm_models[call]
            comm += a * float(f[f"bytes:{call}"](p)) + b
        for call in self.collective_calls:
            a, b, c = self.comm_models[call]
            comm += a * math.log2(p) + b * float(f[f"bytes:{call}"](p)) + c
        comm = max(comm, 0.0)
        total = comp + self.bf_mem * mem + self.bf_comm * comm
        return {"processes": p, "comp_s": comp, "mem_s": mem, "comm_s": comm, "total_s": total}

    def to_dict(self, predict_at: Sequence[int] = ()) -> dict:
        at = list(self.processes) + [p for p in predict_at if p not in self.processes]
        return {
            "processes": list(self.processes), "compute_source": self.compute_source,
            "bf_mem": self.bf_mem, "bf_comm": self.bf_comm, "kernels": list(self.kernels),
            "fits": {k: {"function": v.function, "params": list(v.params), "r2": v.r2} for k, v in self.fits.items()},
            "comm_models": {k: list(v) for k, v in self.comm_models.items()},
            "predictions": [self.components(float(p)) for p in at], "notes": list(self.notes),
        }


def _per_call(runs: Sequence[ProfiledRun]) -> dict[str, list[tuple[int, float, float]]]:
    """call -> [(P, bytes per process, seconds per process)] over runs that made the call."""
    table: dict[str, list[tuple[int, float, float]]] = {}
    for run in runs:
        for call in run.mpi:
            table.setdefault(call.call, []).append((run.processes, call.bytes / run.processes,
                                                    call.time_s / run.processes))
    return table


def decompose(runs: Sequence[ProfiledRun], latency_cycles: Mapping[str, float] | None = None) -> Decomposition:
    """Fit the APMT components from >= 3 runs at distinct process counts."""
    runs = sorted(runs, key=lambda r: r.processes)
    processes = [r.processes for r in runs]
    if len(set(processes)) < 3:
        raise ParseError(f"APMT needs runs at >= 3 distinct process counts, got {sorted(set(processes))}",
                         part="processes")
    latency = dict(DEFAULT_LATENCY_CYCLES, **(latency_cycles or {}))
    p = np.array(processes, dtype=float)
    fits: dict[str, CounterFit] = {}
    notes: list[str] = []
    mpi_time = np.array([sum(c.time_s for c in r.mpi) / r.processes for r in runs])
    have = lambda name: all(r.counters.get(name) is not None for r in runs)  # noqa: E731
    bf_mem = 0.0
    if have("instructions") and have("cycles") and have("task-clock"):
        source = "hardware counters"
        instructions = np.array([r.counters.get("instructions") for r in runs])
        cycles = np.array([r.counters.get("cycles") for r in runs])
        fits["instructions"] = fit_against_p(p, instructions)
        fits["cpi"] = fit_against_p(p, cycles / instructions)
        fits["frequency_hz"] = fit_against_p(p, cycles / np.array([r.counters.get("task-clock") for r in runs]))
        if have("L1-dcache-loads") and have("L1-dcache-load-misses") and have("LLC-loads") and have("LLC-load-misses"):
            get = lambda n: np.array([r.counters.get(n) for r in runs])  # noqa: E731
            l1_hits = get("L1-dcache-loads") - get("L1-dcache-load-misses")
            llc_hits = get("LLC-loads") - get("LLC-load-misses")
            memory_cycles = (l1_hits * latency["L1"] + llc_hits * latency["LLC"]
                             + get("LLC-load-misses") * latency["memory"])
            fits["memory_cycles"] = fit_against_p(p, memory_cycles)
            if have("stalled-cycles-backend"):
                bf_mem = float(np.median(get("stalled-cycles-backend") / memory_cycles))
            else:
                notes.append("no stall counter: BF_mem = 0, memory time stays inside measured CPI")
    elif have("task-clock"):
        unreadable = sorted({n for r in runs for n in r.counters.unsupported})
        reason = "hardware counters unavailable" + (f" ({', '.join(unreadable)} not supported)" if unreadable else "")
        if all(r.functions for r in runs):
            # Per-function seconds from the profile are the kernels' own time: prefer them.
            source = "function timers"
            notes.append(f"{reason}: computation = sum of per-function seconds / P")
            compute = np.array([sum(r.functions.values()) / r.processes for r in runs])
        else:
            source = "task-clock"
            notes.append(f"{reason}: computation = task-clock / P - MPI time per process")
            cpu = np.array([r.counters.get("task-clock") for r in runs]) / p
            compute = np.maximum(cpu - mpi_time, 0.0)
        fits["compute_s_per_process"] = fit_against_p(p, compute)
    else:
        raise ParseError("perf stat files need instructions+cycles+task-clock or at least task-clock",
                         part="perf")
    p2p, collectives, comm_models = [], [], {}
    for call, rows in sorted(_per_call(runs).items()):
        if len(rows) < 3:
            notes.append(f"{call}: seen in {len(rows)} runs, left out of T_comm")
            continue
        cp = np.array([r[0] for r in rows], dtype=float)
        size = np.array([r[1] for r in rows])
        seconds = np.array([r[2] for r in rows])
        fits[f"bytes:{call}"] = fit_against_p(cp, size)
        if call in P2P_CALLS:
            design = np.column_stack([size, np.ones_like(size)])
            p2p.append(call)
        else:
            design = np.column_stack([np.log2(cp), size, np.ones_like(size)])
            collectives.append(call)
        comm_models[call] = tuple(float(c) for c in np.linalg.lstsq(design, seconds, rcond=None)[0])
    result = Decomposition(tuple(processes), fits, source, bf_mem, 1.0, latency, tuple(p2p),
                           tuple(collectives), comm_models, tuple(select_kernels(runs)), tuple(notes))
    walls = [(r.processes, r.wall_s) for r in runs if r.wall_s]
    if walls and (p2p or collectives):
        ratios = []
        for procs, wall in walls:
            parts = result.components(float(procs))
            if parts["comm_s"] > 0:
                ratios.append((wall - parts["comp_s"] - bf_mem * parts["mem_s"]) / parts["comm_s"])
        if ratios:
            bf_comm = float(np.clip(np.median(ratios), 0.0, 10.0))
            result = Decomposition(tuple(processes), fits, source, bf_mem, bf_comm, latency, tuple(p2p),
                                   tuple(collectives), comm_models, result.kernels, tuple(notes))
    return result


def load_runs(manifest: Path) -> list[ProfiledRun]:
    """Read a JSON manifest of runs; file paths relative to the manifest."""
    try:
        spec = json.loads(Path(manifest).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ParseError(f"cannot read manifest: {error}", source=str(manifest)) from error
    if not isinstance(spec, dict) or not isinstance(spec.get("runs"), list):
        raise ParseError("manifest needs a 'runs' list", source=str(manifest))
    base = Path(manifest).parent
    runs = []
    for k, entry in enumerate(spec["runs"]):
        where = f"runs[{k}]"
        try:
            processes = int(entry["processes"])
            perf_path = base / entry["perf"]
        except (KeyError, TypeError, ValueError) as error:
            raise ParseError(f"{where} needs 'processes' and 'perf'", source=str(manifest), part=where) from error
        if processes < 1:
            raise ParseError(f"{where}: processes must be >= 1", source=str(manifest), part=where)
        try:
            counters = parse_perf_stat(perf_path.read_text(encoding="utf-8").splitlines(), source=str(perf_path))
            mpi: tuple[MpiCall, ...] = ()
            if entry.get("mpi_profile"):
                mpi_path = base / entry["mpi_profile"]
                mpi = tuple(parse_mpi_profile(mpi_path.read_text(encoding="utf-8").splitlines(), source=str(mpi_path)))
        except OSError as error:
            raise ParseError(f"{where}: cannot read {error.filename}", source=str(manifest), part=where) from error
        wall = entry.get("wall_s")
        functions = {str(k): float(v) for k, v in (entry.get("functions") or {}).items()}
        runs.append(ProfiledRun(processes, counters, mpi, float(wall) if wall else None, functions))
    return runs
