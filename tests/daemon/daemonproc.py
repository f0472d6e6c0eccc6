"""Start the real hpcpredictd in a subprocess on a real Unix socket (shared by tests)."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


class DaemonProcess:
    def __init__(self, data_dir: Path, *, env: dict | None = None, config: Path | None = None,
                 user: str | None = None, open_files: int | None = None, prefix: tuple[str, ...] = ()):
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket = str(self.data_dir / "hpcpredictd.sock")
        # metrics on a free port: the fixed default would collide between daemons run side by side;
        # no host config file (tests/conftest.py sets the same for the session; this holds for any caller)
        self.env = {**os.environ, "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(self.data_dir),
                    "HPCPREDICT_DAEMON_METRICS": "127.0.0.1:0", **(env or {})}
        self.config = config
        self.user = user
        self.open_files = open_files   # RLIMIT_NOFILE (soft and hard) of the daemon, None = inherited
        self.prefix = list(prefix)      # runs the daemon, e.g. ("ip", "netns", "exec", NAME)
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir / "daemon.log"

    def start(self, timeout: float = 30.0) -> "DaemonProcess":
        info = self.data_dir / "hpcpredictd.json"
        if info.exists():
            info.unlink()
        argv = [*self.prefix, sys.executable, "-m", "hpcpredict.daemon.server", "--grpc-socket", self.socket]
        if self.config:
            argv += ["--config", str(self.config)]
        self._log = open(self.log_path, "ab")
        limit = self.open_files
        preexec = None if limit is None else (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
        self.proc = subprocess.Popen(argv, env=self.env, stdout=self._log, stderr=self._log, user=self.user,
                                     preexec_fn=preexec)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hpcpredictd exited with {self.proc.returncode}:\n{self.log()}")
            if info.exists() and self.healthy():
                self.info = json.loads(info.read_text())
                return self
            time.sleep(0.05)
        raise RuntimeError(f"hpcpredictd did not become healthy:\n{self.log()}")

    @property
    def hook_socket(self) -> str:
        return self.info["hook_socket"]

    def healthy(self) -> bool:
        try:
            with grpc.insecure_channel(f"unix:{self.socket}") as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
                return reply.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig=signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self._log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
