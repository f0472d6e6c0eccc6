"""A Slurm release of a Debian suite in a debootstrapped root (``cluster/slurm-in-root.sh``): the
24.11 and 26.05 test clusters, with the API of harness.Cluster.

On a Debian 12 host each release runs in a root of the suite that ships it, built once into
``Release.root`` (``/var/tmp/hpcpredict-slurm-SERIES-root``): 24.11.5 from Debian 13 (trixie),
26.05.5 from forky (testing). Daemons, clients, job steps and the project's hooks
(job_submit.lua with the root's Lua 5.1, the prolog/epilog scripts with its Python 3) all run in
it. The host's real hpcpredictd is reached through its data directory, bind-mounted at the root's
``/run/hpcpredict`` (Unix sockets work across bind mounts); test users and SlurmUser have the
host's uids in the root, since the daemon knows callers by their kernel uid. On a host of the
suite itself there is no root: the host's own packages run (untested here).

Every Slurm command therefore goes through :meth:`RootCluster.run` (never the host's 22.05
``scontrol``); paths the tests read or write (``jobs``, logs) are host paths into the root.
Ports, runtime tree and the suite of each series are the script's (one owner); a release here
is its series, its root, its runtime tree and its lock.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hpcpredict.slurm_plugin import slurmjob

from .harness import CLUSTER, Daemon, poll, sbatch_result, scontrol_fields, write_hooks_conf, write_job_script

SCRIPT = CLUSTER / "slurm-in-root.sh"
# Short backfill cycles keep the scheduling tests to seconds (FINDINGS-style scenarios).
BASE_SCHEDULER_PARAMETERS = "bf_interval=2,bf_resolution=10"
SOFT_TIME_MIN = "time_min_as_soft_limit"
PATH = "PATH=/usr/sbin:/usr/bin:/sbin:/bin"


def host_suite() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    match = re.search(r"^VERSION_CODENAME=\"?([a-z]*)", text, re.M)
    return match.group(1) if match else ""


@dataclass(frozen=True)
class Release:
    """One Slurm release series of the test suite and the Debian suite that ships it."""
    series: str            # "24.11", "26.05": SERIES of slurm-in-root.sh
    suite: str             # the Debian suite whose packages it runs
    version: str           # the exact release the tests were written against (sinfo -V)

    @property
    def tag(self) -> str:
        return self.series.replace(".", "")

    @property
    def root(self) -> str:
        """The root on this host ("" = none: a host of the suite runs its own packages)."""
        if host_suite() == self.suite:
            return ""
        return os.environ.get(f"HPCPREDICT_TEST_SLURM_{self.tag}_ROOT", f"/var/tmp/hpcpredict-slurm-{self.series}-root")

    @property
    def slurm_dir(self) -> str:
        """The runtime tree, as seen inside the root."""
        return f"/srv/hpcpredict-slurm-{self.tag}" if self.root else f"/tmp/hpcpredict-slurm-{self.tag}-test"

    @property
    def lock(self) -> str:
        """One cluster of a release per machine (fixed directory and ports): a second run waits."""
        return f"/tmp/hpcpredict-slurm-{self.tag}-test.lock"


SLURM_2411 = Release("24.11", "trixie", "24.11.5")
SLURM_2605 = Release("26.05", "forky", "26.05.5")
RELEASES = {release.series: release for release in (SLURM_2411, SLURM_2605)}


def scheduler_parameters(time_min_as_soft_limit: bool, extra: str = "") -> str:
    options = ([SOFT_TIME_MIN] if time_min_as_soft_limit else []) + [BASE_SCHEDULER_PARAMETERS]
    return ",".join(options + ([extra] if extra else []))


def script_env(release: Release, daemon: Daemon | None = None, hooks_conf: Path | None = None,
               sched: str | None = None) -> dict:
    env = dict(os.environ, SERIES=release.series, ROOT=release.root, SLURM_DIR=release.slurm_dir, NODES="4",
               CPUS="4", TEST_USERS="alice bob carol", SLURM_USER="slurm", PYTHON=sys.executable)
    env["SCHED_PARAMS"] = sched or scheduler_parameters(True)
    if daemon is not None and release.root:
        env["DAEMON_DIR"] = str(daemon.data_dir)
    if hooks_conf is not None:
        env["HOOKS_CONF"] = str(hooks_conf)
    return env


def run_script(command: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=timeout)


def hook_socket_for(release: Release, daemon: Daemon) -> str:
    """The daemon's local socket as the hooks see it: through the bind mount in the root."""
    return "/run/hpcpredict/hook.sock" if release.root else daemon.hook_socket


class RootCluster:
    """A running cluster of a release: submit as a user, read jobs back, reconfigure hooks and the
    scheduler. Same methods as harness.Cluster, plus run(), cancel_all() and
    set_scheduler_parameters()."""

    def __init__(self, release: Release, daemon: Daemon | None, hooks_conf: dict, sched: str):
        self.release = release
        self.root = release.root
        self.daemon = daemon
        self.inner_dir = release.slurm_dir                   # as Slurm sees it
        self.dir = Path(self.root + self.inner_dir)          # as the tests see it
        self.conf = f"{self.inner_dir}/etc/slurm.conf"
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
        """Run a Slurm client (or any program) of the release's installation, e.g. run("squeue")."""
        return subprocess.run(self.command(list(args), user, cwd), capture_output=True, text=True, timeout=timeout)

    def client_wrappers(self, folder: Path) -> Path:
        """``folder/scontrol`` and ``folder/squeue``: host programs running the release's clients in
        the root, as a site's wrapper would, for a daemon on the host. Named for what they run, so
        the daemon finds ``scontrol -o show nodes`` beside ``scontrol show config`` (the cluster's
        size, which the forecast needs; a ``chroot ... scontrol`` command line hides it) and its
        squeue's SLURM_TIME_FORMAT reaches the root's squeue (``env -i`` would drop it)."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("scontrol", "squeue"):
            line = " ".join(self.command(['"SLURM_TIME_FORMAT=${SLURM_TIME_FORMAT:-standard}"', name]))
            path = folder / name
            path.write_text(f'#!/bin/sh\nexec {line} "$@"\n')
            path.chmod(0o755)
        return folder

    def sbatch(self, user: str, *args: str) -> tuple[str, str, str, float]:
        """Submit as ``user`` from the jobs dir; returns (job id, stdout, stderr, seconds)."""
        started = time.monotonic()
        done = self.run("sbatch", *args, user=user, cwd=f"{self.inner_dir}/jobs", timeout=60)
        return sbatch_result(done, time.monotonic() - started)

    def job(self, job_id: str) -> dict:
        """``scontrol show job``'s fields of a job a test submitted (see harness.scontrol_fields)."""
        return scontrol_fields(self.run("scontrol", "show", "job", job_id, timeout=10).stdout)

    def read_job(self, job_id: str, *, work_dir: bool = False) -> slurmjob.Job:
        """The job as the hooks read it, with the root's clients."""
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

    @contextmanager
    def hook_off(self):
        """The hook off (it would set its own --time-min on a scenario's jobs), on an empty queue;
        afterwards every job cancelled, the hook and time_min_as_soft_limit on again."""
        self.cancel_all()
        self.set_hook_setting("enabled", "false")
        try:
            yield self
        finally:
            self.cancel_all()
            self.set_hook_setting("enabled", "true")
            self.set_scheduler_parameters(time_min_as_soft_limit=True)

    def write_script(self, name: str, text: str) -> str:
        return write_job_script(self.jobs, name, text)

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
        done = run_script("restart-ctld", script_env(self.release, self.daemon, sched=wanted), timeout=120)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        self.scheduler_parameters = wanted
        shown = self.run("scontrol", "show", "config").stdout
        assert re.search(rf"^SchedulerParameters\s*=\s*{re.escape(wanted)}$", shown, re.M), shown

    def ctld_log(self) -> str:
        return (self.dir / "log" / "slurmctld.log").read_text(errors="replace")

    def hooks_log(self) -> str:
        path = self.dir / "log" / "hpcpredict-hooks.log"
        return path.read_text(errors="replace") if path.exists() else ""
