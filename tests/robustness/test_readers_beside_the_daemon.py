"""Another process opening the store while the daemon writes to it (an admin's CLI, a report,
a backup script) must not take the daemon down.

SQLite in WAL mode keeps its index in ``<store>-shm``, mapped into every process that has the
store open. Each such process holds a read lock on one byte of that file; the first process to
open the store finds no such lock and resets the file (truncates it). POSIX locks belong to the
process and inode, so closing *any* descriptor of the file drops them: the daemon once opened
and closed ``-shm`` to fix its mode after SQLite had opened it, lost that lock, and the next
process to open the store truncated the file under the daemon's mapping. The daemon died of
SIGBUS, silently (no traceback, no kernel log line), in the middle of a call.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

from hpcpredict.slurm_plugin import hookclient
from tests.daemon.daemonproc import DaemonProcess

SHM_DEAD_MAN_BYTE = 128   # SQLite's unix VFS: the byte of -shm every process with the store open read-locks


def _posix_locks(path: str, pid: int) -> list[str]:
    """The lines of /proc/locks that ``pid`` holds on ``path``."""
    info = os.stat(path)
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with open("/proc/locks") as handle:
        return [line for line in handle if f" {pid} {inode} " in line]


def _report(socket_path: str, job_id: str) -> dict:
    request = {"job": {"user": "alice", "job_name": "run", "account": "research", "partition": "debug"},
               "resources": {"nodes": 1}, "time_limit_s": 600}
    return hookclient.call("ReportOutcome", {"job_id": job_id, "state": "COMPLETED", "start_time": 1_700_000_000,
                                             "end_time": 1_700_000_100, "elapsed_s": 100.0, "request": request},
                           socket_path=socket_path, timeout=10)


def test_the_daemon_keeps_its_lock_on_the_shared_index(world_dir):
    daemon = DaemonProcess(world_dir).start()
    try:
        store = str(world_dir / "hpcpredict.sqlite")
        _report(daemon.hook_socket, "lock-0")
        held = [line.split() for line in _posix_locks(store + "-shm", daemon.proc.pid)]
        assert [(kind, start) for _, _, _, kind, _, _, start, _ in held] == [("READ", str(SHM_DEAD_MAN_BYTE))], \
            f"locks of the daemon on {store}-shm: {held}"
    finally:
        daemon.stop()


READER = textwrap.dedent("""
    import sys, time
    from hpcpredict.daemon.store import SQLiteStore
    deadline = time.monotonic() + float(sys.argv[2])
    opened = 0
    while time.monotonic() < deadline:
        store = SQLiteStore(sys.argv[1])   # as the CLI and the tests open it
        store.close()
        opened += 1
    print(opened)
""")


def test_a_process_opening_the_store_does_not_kill_the_daemon(world_dir):
    """Outcomes stream in while another process opens and closes the store as fast as it can;
    the daemon stays up and stores every outcome."""
    daemon = DaemonProcess(world_dir).start()
    acknowledged, errors = [], []
    stop = threading.Event()

    def write(stream: int) -> None:
        number = 0
        while not stop.is_set():
            try:
                acknowledged.append(_report(daemon.hook_socket, f"s{stream}-{number}")["stored"])
            except hookclient.HookError as error:
                errors.append(str(error))
                return
            number += 1

    writers = [threading.Thread(target=write, args=(stream,)) for stream in range(4)]
    try:
        for writer in writers:
            writer.start()
        reader = subprocess.run([sys.executable, "-c", READER, str(world_dir / "hpcpredict.sqlite"), "4"],
                                capture_output=True, text=True, timeout=120)
        stop.set()
        for writer in writers:
            writer.join(30)
        assert reader.returncode == 0, reader.stderr[-2000:]
        assert daemon.proc.poll() is None, \
            f"hpcpredictd exited with {daemon.proc.returncode} while another process opened its store"
        assert not errors, errors[:3]
        assert int(reader.stdout) > 100 and len(acknowledged) > 100 and all(acknowledged)
    finally:
        stop.set()
        daemon.stop()
