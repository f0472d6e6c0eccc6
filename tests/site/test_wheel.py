"""The wheel a site installs: ``pip wheel .`` builds it with no compiler, ``pip install`` of the
wheel alone into a clean venv brings everything the daemon needs at run time (proto stubs,
bundled models, Slurm hook scripts), and the installed ``hpcpredictd`` serves a prediction.

Real pip, a real venv (from the Python running the tests, without site packages), the real
daemon on a real Unix socket. Dependencies come from the machine's configured package index.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_wheel_builds_installs_alone_and_serves_a_prediction(tmp_path):
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, REPO)
    (wheel,) = wheels.glob("hpcpredict-*-py3-none-any.whl")     # pure Python: one wheel for every Linux
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("hpcpredict/proto/v1/hpcpredict_pb2.py", "hpcpredict/proto/v1/hpcpredict_pb2_grpc.py",
                   "hpcpredict/slurm_plugin/job_submit.lua", "hpcpredict/slurm_plugin/task_prolog.sh",
                   "hpcpredict/slurm_plugin/prolog_slurmctld.py", "hpcpredict/daemon/server.py"):
        assert needed in names, needed
    assert any(n.startswith("hpcpredict/daemon/bundled_models/runtime/") and n.endswith("artifact.json")
               for n in names)

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "pip", "install", "-q", wheel)
    # The installed package, not the checkout: imports resolve inside the venv.
    where = run(venv / "bin" / "python", "-c", "import hpcpredict.daemon as d; print(d.__file__)",
                cwd=tmp_path).stdout.strip()
    assert where.startswith(str(venv)), where

    data_dir = tmp_path / "data"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HPCPREDICT_CONFIG_PATH": "",
           "HPCPREDICT_DATA_DIR": str(data_dir), "HPCPREDICT_DAEMON_METRICS": ""}
    log = open(tmp_path / "daemon.log", "wb")
    daemon = subprocess.Popen([venv / "bin" / "hpcpredictd"], env=env, cwd=tmp_path, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not (data_dir / "hpcpredictd.json").exists():
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "hpcpredictd did not start in 60 s"
            time.sleep(0.2)
        script = tmp_path / "job.sh"
        script.write_text((REPO / "contrib" / "examples" / "lammps-job.sh").read_text())
        # The CLI finds the daemon's local socket from the same defaults the daemon used.
        done = run(venv / "bin" / "hpcpredict", "predict", script, "--json", env=env, cwd=tmp_path)
        estimate = json.loads(done.stdout)
        assert estimate["runtime_s"] > 0 and estimate["suggested_time_limit_s"] >= 300
        # The bundled LAMMPS runtime model (package data of the wheel) answered, not a fallback.
        assert not estimate.get("fallback", False), estimate
        assert estimate["model_name"].startswith("runtime-"), estimate["model_name"]
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
