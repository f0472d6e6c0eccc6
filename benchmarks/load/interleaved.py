"""Interleaved A/B of daemon settings on the hook socket (or gRPC): one open-loop phase after another.

Each setting is one ``hpcpredictd`` on its own copy of one data directory (world.py: KTH-SP2
history, its walltime model, the bundled models), started with its own environment. All run
the whole time; phases alternate between them round after round (the order reversed every
other round), with the same fresh scripts for every setting in a round (no parse-cache
answers), so load from the rest of the machine falls on all alike.
"""
from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from pathlib import Path

from .openloop import hook_lines, run_rate, start_daemon, stop_daemon
from .world import KTH, build_world, requests

_PRINTED = ("setting", "round", "rate", "p50_ms", "p99_ms", "p99_from_send_ms", "daemon_cpu_us_per_call",
            "other_cores", "codes")


def interleaved_ab(settings: dict[str, dict[str, str]], rates: list[float], rounds: int, seconds: float,
                   prefix: str = "hpd-ab-", transport: str = "hook") -> dict:
    """``{"summary": {"<setting>@<rate>": medians over rounds}, "rows": every phase}``;
    ``settings`` maps a name to the environment its daemon gets; ``transport``: ``hook`` (the
    local socket, as Slurm's hooks call it) or ``grpc`` (trusted tools)."""
    target = {"hook": "hook_socket", "grpc": "socket"}[transport]
    base = Path(tempfile.mkdtemp(prefix=prefix))
    procs, infos, rows = {}, {}, []
    try:
        world = build_world(base / "world", trace=KTH, learner=None)

        def payloads(count: int, seed: int) -> list:
            made = requests(world, count, seed=seed)
            return hook_lines(made) if transport == "hook" else made
        warm_up = payloads(400, 0)
        for name, env in settings.items():
            shutil.copytree(base / "world", base / name)
            procs[name], infos[name] = start_daemon(base / name, env)
            run_rate(transport, infos[name][target], warm_up, 200.0, 2.0, infos[name]["pid"])
        for round_ in range(rounds):
            for rate in rates:
                lines = payloads(int(rate * seconds), 1 + round_ * 10_000 + int(rate))
                order = list(settings) if round_ % 2 == 0 else list(reversed(settings))
                for name in order:
                    row = run_rate(transport, infos[name][target], lines, rate, seconds, infos[name]["pid"])
                    row.update(setting=name, round=round_)
                    print(json.dumps({key: row[key] for key in _PRINTED}), flush=True)
                    rows.append(row)
    finally:
        for proc in procs.values():
            stop_daemon(proc)
        shutil.rmtree(base, ignore_errors=True)
    summary = {}
    for name in settings:
        for rate in rates:
            mine = [r for r in rows if r["setting"] == name and r["rate"] == rate]
            summary[f"{name}@{rate:g}"] = {
                "p50_ms_median": statistics.median(r["p50_ms"] for r in mine),
                "p99_ms_median": statistics.median(r["p99_ms"] for r in mine),
                "p99_from_send_ms_median": statistics.median(r["p99_from_send_ms"] for r in mine),
                "daemon_cpu_us_per_call_median": statistics.median(r["daemon_cpu_us_per_call"] for r in mine),
                "not_ok": sum(sum(v for k, v in r["codes"].items() if k != "OK") for r in mine),
                "other_cores_mean": statistics.mean(r["other_cores"] for r in mine)}
    return {"summary": summary, "rows": rows}
