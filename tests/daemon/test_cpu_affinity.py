"""[daemon] cpu_affinity pins the daemon and every thread it runs; a bad value is refused clearly."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.daemonproc import DaemonProcess
from hpcpredict.daemon.errors import ConfigError
from hpcpredict.daemon.server import parse_cpu_list, pin_to_cpus


def _allowed(pid: int, tid: str) -> str:
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list")


def test_cpu_lists_parse():
    assert parse_cpu_list("0,2-3") == {0, 2, 3}
    assert parse_cpu_list(" 1 ") == {1}
    assert parse_cpu_list([2, 0]) == {0, 2}
    assert parse_cpu_list("") == set()
    assert parse_cpu_list("auto") == {max(os.sched_getaffinity(0))}
    with pytest.raises(ConfigError, match="cpu_affinity: not a CPU list"):
        pin_to_cpus("one")


def test_daemon_threads_are_pinned(world_dir):
    cpu = max(os.sched_getaffinity(0))
    with DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_CPU_AFFINITY": str(cpu)}) as daemon:
        pid = daemon.proc.pid
        threads = os.listdir(f"/proc/{pid}/task")
        assert len(threads) > 3                       # gRPC, workers, local socket, metrics...
        assert {_allowed(pid, tid) for tid in threads} == {str(cpu)}


def test_unusable_cpu_is_a_clear_startup_error(world_dir):
    env = {**os.environ, "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_CPU_AFFINITY": "4096"}
    result = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.server", "--socket", str(world_dir / "s.sock")],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("hpcpredictd: [daemon] cpu_affinity: cannot pin to CPUs [4096]")
