"""Shared pieces of the robustness tests: a real daemon, its admin view, its metrics, a tmpfs."""
from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

import grpc
import pytest

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc
from tests.daemon.daemonproc import DaemonProcess


from tests.daemon.conftest import world_dir  # noqa: F401  (the same world-traversable data dir)


def job(user="alice", app="lmp", time_limit_s=3600, nodes=2, ntasks=8, script=b""):
    return pb.JobRequest(job=pb.JobIdentity(user=user, application=app, job_name="run"),
                         resources=pb.Resources(nodes=nodes, ntasks=ntasks), time_limit_s=time_limit_s,
                         script=script)


def outcome(job_id: str, prediction_id: str = "", elapsed_s: float = 600.0, user: str = "alice"):
    return pb.Outcome(job_id=job_id, prediction_id=prediction_id, elapsed_s=elapsed_s, state="COMPLETED",
                      end_time=1_700_000_000, request=job(user=user))


class Client:
    """gRPC stubs of one daemon (a trusted tool: the tests run as root), its status and metrics."""

    def __init__(self, daemon: DaemonProcess):
        self.daemon = daemon
        self._public = grpc.insecure_channel(f"unix:{daemon.socket}")
        self.stub = pb_grpc.PredictorStub(self._public)
        self.admin = self.stub

    def faults(self) -> dict[str, str]:
        status = self.admin.GetStatus(pb.StatusRequest(), timeout=10)
        return dict(fault.split(": ", 1) for fault in status.faults)

    def metric_faults(self) -> set[str]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.daemon.info['metrics_port']}/metrics",
                                      timeout=10).read().decode()
        return {line.split('component="')[1].split('"')[0] for line in text.splitlines()
                if line.startswith("hpcpredict_fault{") and line.rstrip().endswith(" 1.0")}

    def journal_rows(self) -> float:
        """The hpcpredict_prediction_journal_rows gauge: predictions waiting for the store."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.daemon.info['metrics_port']}/metrics",
                                      timeout=10).read().decode()
        return next(float(line.split()[1]) for line in text.splitlines()
                    if line.startswith("hpcpredict_prediction_journal_rows "))

    def close(self) -> None:
        self._public.close()


def start(data_dir: Path, **env) -> tuple[DaemonProcess, Client]:
    # min_free_mib 0: these daemons' stores sit on a 4 MiB tmpfs to meet a real full disk, not the cap
    daemon = DaemonProcess(data_dir, env={"HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HPCPREDICT_STORE_MIN_FREE_MIB": "0",
                                          **env}).start()
    return daemon, Client(daemon)


@pytest.fixture
def tmpfs(world_dir):
    """A 4 MiB tmpfs (a real small file system: really fills up, really goes read-only)."""
    mount_point = world_dir / "small-fs"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs CAP_SYS_ADMIN): {result.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
