"""Training and daemon start-up on long histories: 10^6 and 10^7 stored jobs.

    python -m benchmarks run history_scale                      # 10^6 jobs
    python -m benchmarks run history_scale --jobs 1000000 10000000
    python -m benchmarks run history_scale --jobs 1000000 10000000 --start-up-only   # models trained before

For each size: a store of real jobs replayed from KTH-SP2 and HPC2N with shifted times and
users (benchmarks/history_scale/build.py says how; built once, reused from --cache), then,
each in a fresh process: ``hpcpredict train --no-reload`` (streams the store into the walltime
model and publishes it) with its wall time and peak RSS, and ``hpcpredictd`` start-up (load the
published model, replay each user's recent jobs) until it serves, with its peak RSS.
Goals: 10^7 jobs trained in <= 10 min with peak RSS <= 4 GiB; start-up <= 30 s.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.history_scale.build import build_store

DESCRIPTION = "streamed walltime training and daemon start-up on 10^6 / 10^7 stored jobs: time, peak RSS"


def _environment(work: Path, store: Path) -> dict:
    return {**os.environ, "HPCPREDICT_DATA_DIR": str(work), "HPCPREDICT_STORE_PATH": str(store),
            "HPCPREDICT_DAEMON_LOG_LEVEL": "WARNING", "HPCPREDICT_DAEMON_HOOK_SOCKET": "",
            "HPCPREDICT_DAEMON_METRICS": ""}


def _timed_child(argv: list[str], env: dict) -> dict:
    """Run ``argv``; its wall time, CPU time and peak RSS (from wait4 on that very child)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024), "stdout": out.decode(errors="replace").strip()}


def _start_up(env: dict, work: Path, timeout: float = 600.0) -> dict:
    """Start hpcpredictd; seconds until it serves (runtime info written after the replay), the
    CPU time it used until then, and its peak RSS then (VmHWM)."""
    info = work / "hpcpredictd.json"
    if info.exists():
        info.unlink()
    log = open(work / "daemon.log", "ab")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "hpcpredict.daemon.server"], env=env, stdout=log, stderr=log)
    try:
        while not info.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"daemon exited: {(work / 'daemon.log').read_text()[-2000:]}")
            if time.perf_counter() - started > timeout:
                raise RuntimeError("daemon did not start")
            time.sleep(0.05)
        serving = time.perf_counter() - started
        status = Path(f"/proc/{proc.pid}/status").read_text()
        hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
        ticks = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
        cpu = sum(int(t) for t in ticks) / os.sysconf("SC_CLK_TCK")
        return {"start_s": round(serving, 1), "start_cpu_s": round(cpu, 1), "peak_rss_mib": round(hwm / 1024)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _train(env: dict) -> dict:
    """``hpcpredict train`` on the store ``env`` names, in a child: wall, CPU, peak RSS, jobs."""
    train = _timed_child([sys.executable, "-m", "hpcpredict.daemon.cli.main", "train", "--no-reload", "--json"], env)
    trained = json.loads(train.pop("stdout"))
    train.update(jobs=trained["jobs"], version=trained["version"])
    return train


def _row(train: dict | None, start: dict) -> dict:
    """The headline numbers of one history size (no training ones with --start-up-only)."""
    row = {"start_up_s": start["start_s"], "daemon_peak_rss_mib": start["peak_rss_mib"]}
    if train is None:
        return row
    return {"train_s": train["wall_s"], "train_cpu_s": train["cpu_s"], "train_peak_rss_mib": train["peak_rss_mib"],
            **row}


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run history_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1_000_000], help="history sizes (default 10^6)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/hpcpredict-history-scale"),
                        help="where the built stores are kept between runs")
    parser.add_argument("--start-up-only", action="store_true",
                        help="measure the daemon start only, on the models an earlier run published in --cache")
    options = parser.parse_args(args)
    sizes, headline = {}, {}
    for total in options.jobs:
        work = options.cache / f"{total}"
        store = work / "history.sqlite"
        built = build_store(store, total)
        env = _environment(work, store)
        if options.start_up_only:
            if not (work / "models" / "walltime").is_dir():
                raise SystemExit(f"--start-up-only: no walltime model in {work / 'models'}: run without it first")
            train = None
        else:
            train = _train(env)
        start = _start_up(env, work)
        sizes[str(total)] = {"store": built, "train": train, "start_up": start,
                             "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
        headline[f"{total:.0e}".replace("+0", "")] = _row(train, start)
    return {"headline": headline, "sizes": sizes}
