"""The Slurm 24.11 test cluster (``cluster/cluster-2411.sh``): the same API as harness.Cluster.

On a Debian 12 host Slurm 24.11 (Debian 13 packages) runs in a trixie root built once into
``ROOT`` (``/var/tmp/hpcpredict-slurm-24.11-root``); daemons, clients, job steps and the
project's hooks (job_submit.lua with the root's Lua 5.1, the prolog/epilog scripts with its
Python 3.13) all run in it. The host's real hpcpredictd is reached through its data directory,
bind-mounted at the root's ``/run/hpcpredict`` (Unix sockets work across bind mounts); test
users and SlurmUser have the host's uids in the root, since the daemon knows callers by their
kernel uid. On a Debian 13 host there is no root: the host's own 24.11 runs (untested here).

Every Slurm command therefore goes through :meth:`Cluster2411.run` (never the host's 22.05
``scontrol``); paths the tests read or write (``jobs``, logs) are host paths into the root.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from hpcpredict.slurm_plugin import slurmjob

from .harness import CLUSTER, Daemon, poll, scontrol_fields, write_hooks_conf

SCRIPT = CLUSTER / "cluster-2411.sh"
LOCK = "/tmp/hpcpredict-slurm-2411-test.lock"    # the 22.05 cluster's is another: other ports and dirs


def debian_major() -> int:
    try:
        return int(Path("/etc/debian_version").read_text().split(".")[0])
    except (OSError, ValueError):
        return 0


# "" = no root: Debian 13's own Slurm 24.11 on the host
ROOT = "" if debian_major() >= 13 else os.environ.get("HPCPREDICT_TEST_SLURM_2411_ROOT",
                                                       "/var/tmp/hpcpredict-slurm-24.11-root")
SLURM_DIR_2411 = "/srv/hpcpredict-slurm-2411" if ROOT else "/tmp/hpcpredict-slurm-2411-test"   # inside ROOT
PORTS_2411 = {"CTLD_PORT": "28817", "SLURMD_PORT_BASE": "29001"}
# Short backfill cycles keep the scheduling tests to seconds (FINDINGS-style scenarios).
BASE_SCHEDULER_PARAMETERS = "bf_interval=2,bf_resolution=10"
SOFT_TIME_MIN = "time_min_as_soft_limit"
PATH = "PATH=/usr/sbin:/usr/bin:/sbin:/bin"


def scheduler_parameters(time_min_as_soft_limit: bool, extra: str = "") -> str:
    options = ([SOFT_TIME_MIN] if time_min_as_soft_limit else []) + [BASE_SCHEDULER_PARAMETERS]
    return ",".join(options + ([extra] if extra else []))


def script_env(daemon: Daemon | None = None, hooks_conf: Path | None = None, sched: str | None = None) -> dict:
    env = dict(os.environ, ROOT=ROOT, SLURM_DIR=SLURM_DIR_2411, NODES="4", CPUS="4",
               TEST_USERS="alice bob carol", SLURM_USER="slurm", PYTHON=sys.executable, **PORTS_2411)
    env["SCHED_PARAMS"] = sched or scheduler_parameters(True)
    if daemon is not None and ROOT:
        env["DAEMON_DIR"] = str(daemon.data_dir)
    if hooks_conf is not None:
        env["HOOKS_CONF"] = str(hooks_conf)
    return env


def run_script(command: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=timeout)


def hook_socket_for(daemon: Daemon) -> str:
    """The daemon's hook socket as the hooks see it: through the bind mount in the root."""
    return "/run/hpcpredict/hook.sock" if ROOT else daemon.hook_socket


class Cluster2411:
    """The running 24.11 cluster: submit as a user, read jobs back, reconfigure hooks and the
    scheduler. Same methods as harness.Cluster, plus run(), cancel_all() and
    set_scheduler_parameters()."""

    def __init__(self, daemon: Daemon, hooks_conf: dict, sched: str):
        self.root = ROOT
        self.daemon = daemon
        self.inner_dir = SLURM_DIR_2411                      # as Slurm sees it
        self.dir = Path(ROOT + SLURM_DIR_2411)               # as the tests see it
        self.conf = f"{SLURM_DIR_2411}/etc/slurm.conf"
        self.jobs = self.dir / "jobs"
        self.hooks_conf = dict(hooks_conf)
        self.scheduler_parameters = sched
        self._bump = 0

    def command(self, args, user: str | None = None, cwd: str | None = None) -> list[str]:
        """``args`` as a command line run in the root (as ``user``, from ``cwd`` inside it)."""
        if user is not None:
            args = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.conf}", *args]
        prefix = ["chroot", self.root] if self.root else []
        return [*prefix, "/usr/bin/env", "-i", *(["-C", cwd] if cwd else []), PATH, "LANG=C.UTF-8",
                f"SLURM_CONF={self.conf}", *args]

    def run(self, *args: str, user: str | None = None, cwd: str | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a Slurm client (or any program) of the 24.11 installation, e.g. run("squeue")."""
        return subprocess.run(self.command(list(args), user, cwd), capture_output=True, text=True, timeout=timeout)

    def sbatch(self, user: str, *args: str) -> tuple[str, str, str, float]:
        """Submit as ``user`` from the jobs dir; returns (job id, stdout, stderr, seconds)."""
        started = time.monotonic()
        done = self.run("sbatch", *args, user=user, cwd=f"{self.inner_dir}/jobs", timeout=60)
        took = time.monotonic() - started
        assert done.returncode == 0, f"sbatch failed ({done.returncode}): {done.stderr}"
        match = re.search(r"Submitted batch job (\d+)", done.stdout)
        assert match, done.stdout
        return match.group(1), done.stdout, done.stderr, took

    def job(self, job_id: str) -> dict:
        """``scontrol show job``'s fields of a job a test submitted (see harness.scontrol_fields)."""
        return scontrol_fields(self.run("scontrol", "show", "job", job_id, timeout=10).stdout)

    def read_job(self, job_id: str, *, work_dir: bool = False) -> slurmjob.Job:
        """The job as the hooks read it, with the root's 24.11 clients."""
        def run(args, environment):
            done = subprocess.run(self.command([*(f"{k}={v}" for k, v in environment.items()), *args]),
                                  capture_output=True, timeout=30)
            if done.returncode != 0:
                raise RuntimeError(done.stderr.decode(errors="replace"))
            return done.stdout
        return slurmjob.read_job(run, job_id, work_dir=work_dir)

    def state(self, job_id: str) -> str:
        return self.job(job_id).get("JobState", "")

    def wait_done(self, job_id: str, timeout: float = 90) -> None:
        def gone():
            out = self.run("squeue", "-h", "-j", job_id, "-o", "%T", timeout=10).stdout.strip()
            return out in ("", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")
        poll(gone, timeout, f"job {job_id} to finish", 0.3)

    def cancel_all(self) -> None:
        """Cancel every job and wait until none is left running or pending."""
        ids = self.run("squeue", "-h", "-o", "%A").stdout.split()
        if ids:
            self.run("scancel", *ids)
        poll(lambda: not self.run("squeue", "-h", "-t", "PD,R,CG,CF", "-o", "%A").stdout.strip(), 60,
             "every job to end")

    def write_script(self, name: str, text: str) -> str:
        path = self.jobs / name
        path.write_text(text)
        path.chmod(0o755)
        return name

    def set_hook_setting(self, key: str, value: str) -> None:
        """Change one hook setting, for every hook: the prolog/epilog scripts read it at their
        next run; job_submit.lua re-reads it because its mtime is bumped."""
        self.hooks_conf[key] = value
        etc = self.dir / "etc"
        for path in (etc / "hpcpredict-hooks.conf", etc / "hpcpredict" / "hpcpredict-hooks.conf"):
            write_hooks_conf(path, self.hooks_conf)
        lua = etc / "job_submit.lua"
        self._bump += 1
        stamp = time.time() + self._bump
        os.utime(lua, (stamp, stamp))

    def set_hook_socket(self, path: str) -> None:
        """Point the hooks at another socket (a path as seen inside the root)."""
        self.set_hook_setting("hook_socket", path)

    def set_scheduler_parameters(self, *, time_min_as_soft_limit: bool, extra: str = "") -> None:
        """Restart slurmctld with SchedulerParameters = [time_min_as_soft_limit,]bf_interval=2,
        bf_resolution=10[,extra] (nothing to do when unchanged). Jobs and state are kept; the
        slurmds register again before this returns."""
        wanted = scheduler_parameters(time_min_as_soft_limit, extra)
        if wanted == self.scheduler_parameters:
            return
        done = run_script("restart-ctld", script_env(self.daemon, sched=wanted), timeout=120)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        self.scheduler_parameters = wanted
        shown = self.run("scontrol", "show", "config").stdout
        assert re.search(rf"^SchedulerParameters\s*=\s*{re.escape(wanted)}$", shown, re.M), shown

    def ctld_log(self) -> str:
        return (self.dir / "log" / "slurmctld.log").read_text(errors="replace")

    def hooks_log(self) -> str:
        path = self.dir / "log" / "hpcpredict-hooks.log"
        return path.read_text(errors="replace") if path.exists() else ""
