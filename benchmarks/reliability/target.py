"""One daemon under attack: start it (this checkout or another commit's code), watch it from /proc.

The "before" column of the reliability table runs an older commit's code: its four package
folders are extracted with ``git archive`` into a temporary directory put first on the
daemon's ``PYTHONPATH`` (the repository itself is never checked out or changed).
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from io import BytesIO
from pathlib import Path

import grpc

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("daemon", "topology", "proto", "slurm_plugin")


def source_of(commit: str) -> Path:
    """A directory whose ``hpcpredict`` package is ``commit``'s code (``git archive``, no checkout)."""
    archive = subprocess.run(["git", "archive", commit, *PACKAGES], cwd=REPO, capture_output=True, check=True).stdout
    root = Path(tempfile.mkdtemp(prefix=f"hpd-src-{commit[:10]}-"))
    os.chmod(root, 0o755)
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if (m.isfile() or m.isdir()) and not m.name.startswith(("/", ".."))
                   and ".." not in Path(m.name).parts]   # our own archive, checked anyway
        tar.extractall(root / "hpcpredict", members=members)
    return root


class Target:
    """``hpcpredictd`` on a fresh data directory; ``source`` None = this checkout's code."""

    def __init__(self, source: Path | None = None, env: dict | None = None, data_dir: Path | None = None,
                 user: str | None = None, prefix: list[str] | None = None):
        self.prefix = prefix or []   # a command the daemon runs under, e.g. prlimit
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="hpd-rel-", dir="/tmp"))
        os.chmod(self.data_dir, 0o755)
        self.user = user   # run the daemon as this user and its own group only (root starts it)
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        self.env = {**os.environ, "HPCPREDICT_DATA_DIR": str(self.data_dir), "HPCPREDICT_DAEMON_LOG_LEVEL": "INFO",
                    "HPCPREDICT_DAEMON_METRICS": "127.0.0.1:0", **(env or {})}
        if source is not None:
            self.env["PYTHONPATH"] = f"{source}:{self.env.get('PYTHONPATH', '')}".rstrip(":")
        self.proc: subprocess.Popen | None = None
        self.info: dict = {}

    def start(self, timeout: float = 90.0) -> "Target":
        info_path = self.data_dir / "hpcpredictd.json"
        info_path.unlink(missing_ok=True)
        log = open(self.data_dir / "daemon.log", "ab")
        identity = {}
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            identity = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen([*self.prefix, sys.executable, "-m", "hpcpredict.daemon.server"], env=self.env,
                                     stdout=log, stderr=log, cwd="/", **identity)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited: {self.log()[-3000:]}")
            if info_path.exists():
                self.info = json.loads(info_path.read_text())
                self.channel = grpc.insecure_channel(f"unix:{self.info.get('socket', self.data_dir / 'hpcpredictd.sock')}",
                                                     options=[("grpc.max_send_message_length", 64 << 20)])
                self.stub = pb_grpc.PredictorStub(self.channel)
                self._wait_healthy(deadline)
                return self
            time.sleep(0.1)
        raise RuntimeError("daemon did not start")

    def _wait_healthy(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                self.stub.Predict(pb.JobRequest(job=pb.JobIdentity(user="probe")), timeout=5)
                return
            except grpc.RpcError:
                time.sleep(0.2)

    def log(self) -> str:
        return (self.data_dir / "daemon.log").read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.channel.close()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    # -- what is watched
    def status(self, key: str) -> int:
        """A ``/proc/PID/status`` value in KiB (VmRSS, VmHWM)."""
        with open(f"/proc/{self.proc.pid}/status") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith(key + ":"))

    def rss_mib(self) -> float:
        return round(self.status("VmRSS") / 1024, 1)

    def peak_rss_mib(self) -> float:
        return round(self.status("VmHWM") / 1024, 1)

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def store_mib(self) -> float:
        """The SQLite file and its WAL (the journals are preallocated: constant)."""
        return round(sum(p.stat().st_size for p in self.data_dir.glob("hpcpredict.sqlite*")
                         if not p.name.split(".")[-1].startswith("journal")) / 2**20, 2)

    def faults(self) -> set[str]:
        """Components with an active fault, from the Prometheus endpoint (no admin call needed)."""
        port = self.info.get("metrics_port")
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        return {line.split('component="')[1].split('"')[0] for line in text.splitlines()
                if line.startswith("hpcpredict_fault{") and line.rstrip().endswith(" 1.0")}

    def served_kinds(self) -> set[str]:
        """Model kinds being served, from the Prometheus endpoint."""
        port = self.info.get("metrics_port")
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        return {line.split('kind="')[1].split('"')[0] for line in text.splitlines()
                if line.startswith("hpcpredict_model_info{")}

    def model_loads(self) -> int:
        return self.log().count("hpcpredict.daemon.engine: serving ")


def probe_latency(target: Target, count: int = 200) -> dict:
    """Latency of small valid Predicts, one after another (ms)."""
    times = []
    request = pb.JobRequest(job=pb.JobIdentity(user="probe", application="lmp"), time_limit_s=3600,
                            resources=pb.Resources(nodes=1, ntasks=4))
    for _ in range(count):
        started = time.perf_counter()
        try:
            target.stub.Predict(request, timeout=30)
        except grpc.RpcError:
            pass
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50_ms": round(times[len(times) // 2], 2), "p99_ms": round(times[int(len(times) * 0.99) - 1], 2)}
