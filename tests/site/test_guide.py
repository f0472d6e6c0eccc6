"""contrib/slurm/ADMIN.md followed literally, as a new site admin would, on the real Slurm 22.05
test cluster: SlurmUser=slurm, the daemon under its own user ``hpcpredict`` (started without
systemd, as the guide's second way), jobs submitted by an ordinary user (alice).

The commands come from the guide's marked blocks (``<!-- guide: NAME -->``), so guide and test
cannot drift. Three things differ from a real site, and only these: the cluster's config
directory is ``$SLURM_TEST_DIR/etc`` instead of ``/etc/slurm`` (every ``/etc/slurm`` in the
guide and in the checkout's ``slurm.conf.snippet`` is rewritten to it), slurmctld is restarted
from its pid file instead of ``systemctl restart slurmctld`` (no systemd in the test machine),
and the hooks' ``slurm_conf`` setting names that slurm.conf (the guide's "$EDITOR" step).
The install is real: user, /opt/hpcpredict, /etc/hpcpredict, /var/lib/hpcpredict,
/run/hpcpredict, /usr/local/bin links; the guide's uninstall removes them all at the end.

It is real in a place of its own (tests/site/sandbox.py): a mount and pid namespace whose system
directories are overlays, so the host's own installation, its history and models and its
``hpcpredict`` user are never touched, and a host with an install gets its test all the same.
The test runs the guide on a host that has an install (made inside a namespace too, with its
user busy running a process) and checks that install came out untouched.

Needs root and the Debian packages of contrib/apt-packages.txt; takes the Slurm test lock
(tests/slurm/conftest.py). ``HPCPREDICT_GUIDE_TIMINGS=FILE`` writes the measured times there
(the ``site`` benchmark area reads them; no time is asserted).
"""
from __future__ import annotations

import fcntl
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..slurm.harness import APP_SCRIPT, CLUSTER, PORTS, SLURM_DIR, poll
from . import sandbox

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "contrib" / "slurm" / "ADMIN.md"
SLURM_ETC = SLURM_DIR / "etc"
SLURM_CONF = SLURM_ETC / "slurm.conf"
DAEMON_INFO = Path("/var/lib/hpcpredict/hpcpredictd.json")
HOOK_SOCKET = Path("/run/hpcpredict/hook.sock")
RESTART_SLURMCTLD = (f"kill $(cat {SLURM_DIR}/run/slurmctld.pid); "
                     f"while [ -e {SLURM_DIR}/run/slurmctld.pid ] && kill -0 $(cat {SLURM_DIR}/run/slurmctld.pid) "
                     f"2>/dev/null; do sleep 0.2; done; {SLURM_DIR}/sbin/slurmctld -f {SLURM_CONF}; "
                     "for i in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done")


def guide_blocks(text: str) -> dict[str, str]:
    """The guide's marked command blocks by name."""
    return {m.group(1): m.group(2) for m in re.finditer(r"<!-- guide: ([\w-]+) -->\n```sh\n(.*?)```", text, re.S)}


def on_test_cluster(commands: str) -> str:
    return commands.replace("/etc/slurm", str(SLURM_ETC)).replace("systemctl restart slurmctld", RESTART_SLURMCTLD)


def admin_env() -> dict:
    """Root's login shell on the controller: no test settings, slurm.conf found, /usr/local/bin on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCPREDICT_")}
    env.update(SLURM_CONF=str(SLURM_CONF), PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               HOME="/root")
    return env


CHECKOUT: Path | None = None


def sh(commands: str, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-euc", on_test_cluster(commands)], cwd=CHECKOUT or "/", env=admin_env(),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{commands}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    return done


def submit(user: str, *args: str) -> tuple[str, str]:
    done = subprocess.run(["runuser", "-u", user, "--", "env", f"SLURM_CONF={SLURM_CONF}", "sbatch", *args],
                          cwd=SLURM_DIR / "jobs", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return re.search(r"Submitted batch job (\d+)", done.stdout).group(1), done.stderr


def finished(job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=admin_env(), capture_output=True,
                         text=True, timeout=10).stdout.strip()
    return out in ("", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")


def status() -> dict:
    return json.loads(sh("hpcpredict status --json").stdout)


def cluster(script: str, **extra) -> subprocess.CompletedProcess:
    env = dict(os.environ, SLURM_TEST_DIR=str(SLURM_DIR), NODES="8", NODES_PER_SWITCH="4", ACCOUNTING="1",
               TEST_USERS="alice bob carol", SLURM_USER="slurm", **PORTS, **extra)
    return subprocess.run([str(CLUSTER / script)], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def slurm_lock():
    if os.geteuid() != 0:
        pytest.fail("the guide test needs root: it installs a site and runs Slurm")
    for program in ("sbatch", "runuser", "setpriv", "start-stop-daemon", "git", "lua5.1", "unshare"):
        assert shutil.which(program) or Path(f"/usr/sbin/{program}").exists(), f"{program} missing"
    with open("/tmp/hpcpredict-slurm-test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def test_admin_guide_leaves_the_host_and_its_install_alone(slurm_lock, tmp_path):
    """The guide below, in its sandbox, on a host with an install of its own that must survive."""
    cluster("stop-cluster.sh")      # one a crashed run left: inside, its processes are out of sight
    inner = f"{Path(__file__).relative_to(REPO)}::test_admin_guide_from_clone_to_suggestion_refresh_upgrade_uninstall"
    done = sandbox.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                        str(tmp_path / "inner"), inner], existing_install=True)
    output = f"--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert done.returncode == 0 and re.search(r"\b1 passed", done.stdout), output


@pytest.fixture
def in_its_sandbox():
    if os.environ.get(sandbox.MARK) != "1":
        pytest.skip("runs only in the sandbox test_admin_guide_leaves_the_host_and_its_install_alone makes")
    # Never over an existing install: the sandbox hid the host's; anything left means it did not.
    left = [path for path in sandbox.INSTALL_PATHS if os.path.lexists(path)]
    assert not left, f"refusing to install over an existing install: {left}"
    with pytest.raises(KeyError):
        pwd.getpwnam(sandbox.USER)


def test_admin_guide_from_clone_to_suggestion_refresh_upgrade_uninstall(in_its_sandbox, tmp_path):
    blocks = guide_blocks(GUIDE.read_text())
    assert {"install", "start-without-systemd", "check", "slurm", "first-history", "refresh", "upgrade",
            "uninstall"} <= set(blocks)
    timings: dict[str, float] = {}
    started = time.monotonic()
    # An existing Slurm: SlurmUser=slurm, its own demo hooks, accounting with a few finished jobs.
    cluster("stop-cluster.sh")
    up = cluster("start-cluster.sh")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    try:
        (SLURM_DIR / "jobs" / "hello.sh").write_text(APP_SCRIPT)
        (SLURM_DIR / "jobs" / "hello.sh").chmod(0o755)
        history = [submit("bob", "-t", "10", "-o", "/dev/null", "hello.sh", "x", "1")[0] for _ in range(4)]
        for job_id in history:
            poll(lambda: finished(job_id), 120, f"history job {job_id}")
        timings["cluster_ready_s"] = time.monotonic() - started

        # The guide, from the clone on.
        clone_at = time.monotonic()
        checkout = tmp_path / "hpcpredict"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(checkout)], check=True, timeout=300)
        global CHECKOUT
        CHECKOUT = checkout         # the guide's commands run in the checkout (its step 0: cd there)
        snippet = checkout / "contrib" / "slurm" / "slurm.conf.snippet"
        snippet.write_text(snippet.read_text().replace("/etc/slurm", str(SLURM_ETC)))
        sh(blocks["install"])
        assert "/var/log/slurm/hpcpredict-hooks.log " in Path("/etc/logrotate.d/hpcpredict-hooks").read_text()
        for command in ("hpcpredict", "hpcpredictd"):     # the man pages, written from the installed parsers
            manual = Path(f"/usr/local/share/man/man1/{command}.1").read_text()
            assert manual.startswith(f'.TH {command.upper()} "1"') and "usage" not in manual[:200], manual[:300]
        timings["install_s"] = time.monotonic() - clone_at
        # SlurmUser joins no group: the local socket is open to all, and the outcomes stored
        # below from the epilog (run as slurm) show its calls are accepted by uid.
        conf = SLURM_ETC / "hpcpredict" / "hpcpredict-hooks.conf"      # the guide's "$EDITOR" step
        conf.write_text(re.sub(r"(?m)^slurm_conf =.*$", f"slurm_conf = {SLURM_CONF}", conf.read_text()))

        sh(blocks["start-without-systemd"])
        poll(lambda: DAEMON_INFO.exists() and HOOK_SOCKET.exists(), 60, "hpcpredictd to listen")
        daemon_pid = int(Path("/run/hpcpredictd.pid").read_text())
        assert Path(f"/proc/{daemon_pid}").stat().st_uid == pwd.getpwnam("hpcpredict").pw_uid
        assert "hpcpredictd" in sh(blocks["check"]).stdout          # root reaches the site daemon, no options
        sh(blocks["slurm"])
        first = sh(blocks["first-history"])
        assert "published version" in first.stdout, first.stdout
        assert int(status()["jobs"]) >= len(history)

        # An ordinary user submits; the suggestion is at the top of the job's output.
        job_id, stderr = submit("alice", "-N", "2", "-t", "30", "-o", "guide-%j.out", "hello.sh", "x", "1")
        assert "hpcpredict: predicted runtime" in stderr, stderr
        poll(lambda: finished(job_id), 120, f"job {job_id}")
        output = SLURM_DIR / "jobs" / f"guide-{job_id}.out"
        poll(output.exists, 30, "the job's output file")
        assert output.read_text().startswith("[hpcpredict] "), output.read_text()[:500]
        timings["clone_to_first_suggestion_s"] = time.monotonic() - clone_at
        poll(lambda: int(status()["outcomes"]) >= 1, 90, "the job's outcome (EpilogSlurmctld as slurm)")

        # Refresh as root, then as the daemon's user: both publish what the daemon serves.
        for line in blocks["refresh"].strip().splitlines():
            done = sh(line)
            assert "published version" in done.stdout, done.stdout
            version = re.search(r"published version (\S+)", done.stdout).group(1)
            serving = {m["kind"]: m["version"] for m in status()["models"]}
            assert serving.get("walltime") == version, (line, serving, version)
        assert not status().get("faults"), status()["faults"]
        owner = pwd.getpwnam("hpcpredict").pw_uid
        strangers = [str(p) for p in Path("/var/lib/hpcpredict").rglob("*") if p.lstat().st_uid != owner]
        assert not strangers, f"files the daemon's user does not own: {strangers[:5]}"

        # Upgrade (the same install again), restart, still serving.
        sh(blocks["upgrade"])
        sh("start-stop-daemon --stop --pidfile /run/hpcpredictd.pid --retry TERM/30/KILL/5 --remove-pidfile")
        DAEMON_INFO.unlink(missing_ok=True)
        sh(blocks["start-without-systemd"])
        poll(lambda: DAEMON_INFO.exists() and HOOK_SOCKET.exists(), 60, "hpcpredictd to listen after the upgrade")
        assert any(m["kind"] == "walltime" for m in status()["models"])
        timings["total_s"] = time.monotonic() - started
    finally:
        cluster("stop-cluster.sh")
        sh(blocks["uninstall"])
        if os.environ.get("HPCPREDICT_GUIDE_TIMINGS"):
            Path(os.environ["HPCPREDICT_GUIDE_TIMINGS"]).write_text(json.dumps(timings, indent=2))
    for gone in ("/opt/hpcpredict", "/etc/hpcpredict", "/var/lib/hpcpredict", "/usr/local/bin/hpcpredict",
                 "/usr/local/share/man/man1/hpcpredict.1", "/etc/logrotate.d/hpcpredict-hooks",
                 str(SLURM_ETC / "hpcpredict")):
        assert not os.path.lexists(gone), gone
    with pytest.raises(KeyError):
        pwd.getpwnam("hpcpredict")
