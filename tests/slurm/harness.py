"""Harness of tests/slurm: a real hpcpredictd, the real Slurm test cluster, broken sockets.

The session fixtures (conftest.py) start (once) a real ``hpcpredictd`` on Unix sockets in a temp dir, then
the cluster of ``tests/slurm/cluster/start-cluster.sh`` (munged, MariaDB + slurmdbd,
slurmctld, 8 slurmd) with the project's own hooks installed: ``job_submit.lua``,
``prolog_slurmctld.py``, ``task_prolog.sh``/``.py``, ``epilog_slurmctld.py`` and their
``hpcpredict-hooks.conf``. Everything is stopped at the end (``stop-cluster.sh`` signals
only the pids it started). Needs root (slurmd, runuser) and the Debian packages in
``contrib/apt-packages.txt``.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import hpcpredict.slurm_plugin as slurm_plugin
from hpcpredict.slurm_plugin import hookclient, slurmjob

HERE = Path(__file__).resolve().parent
CLUSTER = HERE / "cluster"
PLUGIN = Path(slurm_plugin.__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
SLURM_DIR = Path(os.environ.get("HPCPREDICT_TEST_SLURM_DIR", "/tmp/hpcpredict-slurm-test"))
PORTS = {"CTLD_PORT": "26817", "SLURMD_PORT_BASE": "27001", "DBD_PORT": "26819", "MYSQL_PORT": "23306"}
HOOK_FILES = ("hookclient.py", "slurmjob.py", "features_file.py", "task_prolog.py", "task_epilog.py")

APP_SCRIPT = """#!/bin/bash
# a stand-in application: one line per rank, then a short sleep
echo "rank $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME steps=$2"
sleep "${HELLO_SLEEP:-1}"
"""


def poll(predicate, timeout: float, what: str, interval: float = 0.2):
    """Call ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def write_job_script(jobs: Path, name: str, text: str) -> str:
    """An executable job script ``name`` in the jobs directory; returns its name."""
    path = jobs / name
    path.write_text(text)
    path.chmod(0o755)
    return name


def sbatch_result(done: subprocess.CompletedProcess, took: float) -> tuple[str, str, str, float]:
    """(job id, stdout, stderr, seconds) of a finished sbatch that must have succeeded."""
    assert done.returncode == 0, f"sbatch failed ({done.returncode}): {done.stderr}"
    match = re.search(r"Submitted batch job (\d+)", done.stdout)
    assert match, done.stdout
    return match.group(1), done.stdout, done.stderr, took


class Daemon:
    """A real hpcpredictd process on Unix sockets under ``data_dir``."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.hook_socket = str(data_dir / "hook.sock")
        self.socket = str(data_dir / "hpcpredictd.sock")
        self.process: subprocess.Popen | None = None
        # The 22.05 test cluster has no time_min_as_soft_limit: its tests run the opt-in kill-limit
        # mode, today's policy (the default, auto, would only advise there).
        self.env = dict(os.environ, HPCPREDICT_DATA_DIR=str(data_dir), HPCPREDICT_DAEMON_METRICS="",
                        HPCPREDICT_MODELS_BUNDLED="false", HPCPREDICT_POLICY_MODE="bound")

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        info = self.data_dir / "hpcpredictd.json"
        info.unlink(missing_ok=True)
        log = open(self.data_dir / "daemon.log", "ab")
        self.process = subprocess.Popen([str(VENV_BIN / "hpcpredictd")], env=self.env, stdout=log, stderr=log)
        poll(lambda: (info.exists() and os.path.exists(self.hook_socket)) or self.process.poll() is not None,
             60, "hpcpredictd to listen")
        assert self.process.poll() is None, (self.data_dir / "daemon.log").read_text()[-2000:]

    def died(self) -> str:
        """How the daemon ended when it was not stopped here ("" while it runs): a silent death
        (a signal such as SIGBUS leaves no line in its log) is then named in the failure."""
        if self.process is None or self.process.poll() is None:
            return ""
        status = self.process.returncode
        how = f"signal {signal.Signals(-status).name}" if status < 0 else f"status {status}"
        return f"hpcpredictd exited on its own ({how}); its log ends:\n" + \
            (self.data_dir / "daemon.log").read_text(errors="replace")[-1500:]

    def stop(self) -> None:
        death = self.died()
        if death:
            with open(self.data_dir / "daemon.log", "a") as log:
                log.write(f"[harness] {death.splitlines()[0]}\n")
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(VENV_BIN / "hpcpredict"), "--socket", self.hook_socket, *args], env=self.cli_env(),
                              capture_output=True, text=True, timeout=timeout)

    def cli_env(self) -> dict:
        return dict(self.env, SLURM_CONF=str(SLURM_DIR / "etc" / "slurm.conf"))

    def call(self, method: str, request: dict) -> dict:
        try:
            return hookclient.call(method, request, socket_path=self.hook_socket, timeout=10)
        except hookclient.HookError as error:
            death = self.died()
            if death:
                raise AssertionError(death) from error
            raise


class FakeHookServer:
    """A real Unix socket that misbehaves: ``hang`` accepts and never answers, ``garbage``
    answers a line that is not JSON, ``reply`` answers every request with ``reply`` (bytes, one
    line) and keeps the request lines in ``received``. Stands in for a broken daemon (the
    fail-open tests) and for replies the real daemon cannot produce (absurd estimates)."""

    def __init__(self, path: str, mode: str, reply: bytes = b""):
        self.path, self.mode, self.reply = path, mode, reply
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(path):
            os.unlink(path)
        self.listener.bind(path)
        os.chmod(path, 0o666)
        self.listener.listen(64)
        self.held: list[socket.socket] = []
        self.received: list[bytes] = []
        self.accepted = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.mode == "garbage":
                conn.recv(1 << 20)
                conn.sendall(b"\x00\xff this is not JSON {{{\n")
                conn.close()
            elif self.mode == "reply":
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()
            else:
                self.held.append(conn)  # never answer, never close

    def _answer(self, conn: socket.socket) -> None:
        data = b""
        conn.settimeout(5)
        try:
            while not data.endswith(b"\n"):
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
            self.received.append(data)
            conn.sendall(self.reply.rstrip(b"\n") + b"\n")
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()
        if os.path.exists(self.path):
            os.unlink(self.path)


class Cluster:
    """The running test cluster: submit as a user, read jobs back, reconfigure the hooks."""

    def __init__(self, daemon: Daemon, hooks_conf: dict):
        self.dir = SLURM_DIR
        self.daemon = daemon
        self.conf = str(SLURM_DIR / "etc" / "slurm.conf")
        self.jobs = SLURM_DIR / "jobs"
        self.hooks_conf = dict(hooks_conf)
        self._bump = 0

    def env(self) -> dict:
        return dict(os.environ, SLURM_CONF=self.conf)

    def sbatch(self, user: str, *args: str) -> tuple[str, str, str, float]:
        """Submit as ``user`` from the jobs dir; returns (job id, stdout, stderr, seconds)."""
        cmd = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.conf}", "sbatch", *args]
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=self.jobs, capture_output=True, text=True, timeout=60)
        return sbatch_result(done, time.monotonic() - started)

    def job(self, job_id: str) -> dict:
        """``scontrol show job``'s fields of a job a test submitted (never one with a hostile
        name: the hooks read jobs with ``slurmjob.read_job``; see :meth:`read_job`)."""
        text = subprocess.run(["scontrol", "show", "job", job_id], env=self.env(), capture_output=True,
                              text=True, timeout=10).stdout
        return scontrol_fields(text)

    def read_job(self, job_id: str, *, work_dir: bool = False) -> slurmjob.Job:
        """The job as the hooks read it."""
        settings = dict(hookclient.DEFAULTS, slurm_conf=self.conf)
        return slurmjob.read_job(hookclient.slurm_runner(settings), job_id, work_dir=work_dir)

    def wait_done(self, job_id: str, timeout: float = 90) -> None:
        def gone():
            out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=self.env(), capture_output=True,
                                 text=True, timeout=10).stdout.strip()
            return out in ("", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")
        poll(gone, timeout, f"job {job_id} to finish", 0.3)

    def write_script(self, name: str, text: str) -> str:
        return write_job_script(self.jobs, name, text)

    def set_hook_setting(self, key: str, value: str) -> None:
        """Change one hook setting; the prolog/epilog scripts read it at their next run."""
        self.hooks_conf[key] = value
        write_hooks_conf(SLURM_DIR / "etc" / "hpcpredict-hooks.conf", self.hooks_conf)

    def set_hook_socket(self, path: str) -> None:
        """Point job_submit.lua at another socket: rewrite its settings and bump its mtime,
        which makes slurmctld reload the script (and so re-read the settings)."""
        self.hooks_conf["hook_socket"] = path
        write_hooks_conf(SLURM_DIR / "etc" / "hpcpredict-hooks.conf", self.hooks_conf)
        lua = SLURM_DIR / "etc" / "job_submit.lua"
        self._bump += 1
        stamp = time.time() + self._bump
        os.utime(lua, (stamp, stamp))

    def ctld_log(self) -> str:
        return (SLURM_DIR / "log" / "slurmctld.log").read_text(errors="replace")

    def hooks_log(self) -> str:
        path = SLURM_DIR / "log" / "hpcpredict-hooks.log"
        return path.read_text(errors="replace") if path.exists() else ""


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")
_WHOLE_LINE_KEYS = ("AdminComment", "Comment", "Command", "WorkDir", "StdErr", "StdIn", "StdOut")


def scontrol_fields(text: str) -> dict:
    """``scontrol show job`` text -> {Key: first value}: for tests reading their own benign jobs
    only (a job name can hold "Key=value" text, which is why the hooks never parse this)."""
    fields: dict = {}
    for line in text.splitlines():
        line = line.strip()
        key = line.split("=", 1)[0]
        if key in _WHOLE_LINE_KEYS:
            fields.setdefault(key, line[len(key) + 1:].strip())
            continue
        matches = list(_KEY.finditer(line))
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
            fields.setdefault(match.group(1), line[match.end():end].strip())
    return fields


def write_hooks_conf(path: Path, values: dict) -> None:
    text = "# hpcpredict-hooks.conf written by tests/slurm/conftest.py\n"
    text += "".join(f"{key} = {value}\n" for key, value in values.items())
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.chmod(0o644)
    os.replace(temporary, path)


def cluster_env(staging: Path) -> dict:
    env = dict(os.environ, SLURM_TEST_DIR=str(SLURM_DIR), NODES="8", NODES_PER_SWITCH="4", ACCOUNTING="1",
               TEST_USERS="alice bob carol", **PORTS)
    env.update(JOB_SUBMIT_LUA=str(PLUGIN / "job_submit.lua"),
               PROLOG_SLURMCTLD=str(PLUGIN / "prolog_slurmctld.py"),
               EPILOG_SLURMCTLD=str(PLUGIN / "epilog_slurmctld.py"),
               TASK_PROLOG=str(PLUGIN / "task_prolog.sh"),
               TASK_EPILOG=str(PLUGIN / "task_epilog.sh"),
               HOOK_FILES=" ".join([*(str(PLUGIN / name) for name in HOOK_FILES),
                                    str(staging / "hpcpredict-hooks.conf")]))
    return env


