"""The failure of #38 on the real Slurm 22.05.8: the admin adds ``time_min_as_soft_limit`` to
SchedulerParameters, as the README's main path says; 22.05 accepts the word silently and a
``--time-min`` stays a kill limit. Neither check may go soft on the word alone:

- the hook, given a soft ``--time-min`` by a daemon that wrongly believes the controller is a
  24.11.5 with the option, reads the release of the slurmctld running it and refuses; the job,
  which would have been backfilled on a 1-minute "soft" limit and killed at it, completes;
- a daemon in ``auto`` reading the controller's real ``scontrol show config`` only advises.

The scenario: L (6 of the 8 nodes, exclusive) runs, H (all 8) waits for it, X (2 nodes,
--time=10, runs 100 s) fits in front of H only on a 1-minute limit, which 22.05's backfill
would give it from a --time-min (and enforce): with the hook as it was before #38 (checking
the word only), X was told "set --time-min=00:01:00 as a soft limit ... never stopped before
your --time=00:10:00", started by backfill with TimeLimit 00:01:00 and ended TIMEOUT after
1:25 (measured on this cluster, 2026-12-02).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .harness import Daemon, poll
from .test_cluster_hooks import prediction
from .test_policy_2411 import PROBE, SHOW_CONFIG_2411, hook_line, seed_probe_history, submit

WHY = "Slurm 22.05.8 has no time_min_as_soft_limit (it came with 23.11.0): --time-min would be a kill limit"


def reconfigure(cluster, parameters: str) -> None:
    """SchedulerParameters of the running 22.05 controller, then the hook reloaded (it reads
    slurm.conf and the release when slurmctld loads it: a changed mtime)."""
    path = Path(cluster.conf)
    text = re.sub(r"^SchedulerParameters=.*$", f"SchedulerParameters={parameters}", path.read_text(), flags=re.M)
    path.write_text(text)
    done = subprocess.run(["scontrol", "reconfigure"], env=cluster.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    shown = subprocess.run(["scontrol", "show", "config"], env=cluster.env(), capture_output=True, text=True,
                           timeout=30).stdout
    assert f"SchedulerParameters     = {parameters}" in shown, shown


@pytest.fixture
def word_on_2205(cluster, daemon):
    """The 22.05 cluster with the word in SchedulerParameters; restored after."""
    cluster.write_script("softprobe.sh", PROBE)
    reconfigure(cluster, "bf_interval=5,time_min_as_soft_limit")
    yield cluster
    subprocess.run(["scancel", "-u", "alice"], env=cluster.env(), capture_output=True, timeout=30)
    reconfigure(cluster, "bf_interval=5")
    cluster.set_hook_socket(daemon.hook_socket)


def own_daemon(daemon, name: str, **env) -> Daemon:
    server = Daemon(daemon.data_dir / name)
    server.env.update(env)
    server.start()
    (daemon.data_dir / name).chmod(0o755)
    seed_probe_history(server)
    return server


def test_the_hook_refuses_a_soft_time_min_on_2205_and_the_job_completes(word_on_2205, daemon):
    cluster = word_on_2205
    # a daemon that believes the controller is a 24.11.5 with the option: it says soft
    wrong = own_daemon(daemon, "believes-2411", HPCPREDICT_POLICY_MODE="soft",
                       HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND=f"cat {SHOW_CONFIG_2411}")
    try:
        cluster.set_hook_socket(wrong.hook_socket)            # the hook reloads: reads the release
        large, _ = submit(cluster, "L", "-N6", "--exclusive", "--time=3", "--wrap", "sleep 80")
        poll(lambda: cluster.job(large).get("JobState") == "RUNNING", 30, "L to run")
        high, _ = submit(cluster, "H", "-N8", "--exclusive", "--time=2", "--wrap", "sleep 1")
        small, stderr = submit(cluster, "X", "-N2", "--exclusive", "--time=10", "softprobe.sh", "100")
        line = hook_line(stderr)
        row = prediction(wrong, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
        assert (row.policy_mode, row.applied_time_min_s) == ("soft", 60)     # the daemon did say soft
        assert f"no limit changed (soft --time-min refused: {WHY})" in line, line
        x = cluster.job(small)
        assert (x["TimeMin"], x["TimeLimit"]) == ("N/A", "00:10:00"), x         # the hook set nothing
        log = cluster.ctld_log()
        assert f"hpcpredict: soft --time-min refused: {WHY}" in log             # at load
        cluster.wait_done(small, timeout=400)
        x = cluster.job(small)
        assert x["JobState"] == "COMPLETED", x       # outlived the 1-minute "soft" value: not killed
        assert x["TimeLimit"] == "00:10:00", x
        assert cluster.job(high).get("JobState") in ("COMPLETED", None), cluster.job(high)
    finally:
        wrong.stop()


def test_a_daemon_reading_the_real_2205_configuration_with_the_word_advises(word_on_2205, daemon):
    cluster = word_on_2205
    live = own_daemon(daemon, "auto-2205", HPCPREDICT_POLICY_MODE="auto", SLURM_CONF=cluster.conf)
    try:
        status = poll(lambda: (lambda s: s if s.get("planning_rule") else None)(live.call("GetStatus", {})),
                      30, "the daemon to read the controller")
        assert (status["slurm_release"], status["planning_rule"], status["policy_mode"]) == ("22.05.8", "kill", "advise")
        assert status["policy_reason"] == WHY
        cluster.set_hook_socket(live.hook_socket)
        job_id, stderr = submit(cluster, "X", "-N2", "--time=10", "softprobe.sh", "1")
        line = hook_line(stderr)
        assert "advice only" in line, line
        assert cluster.job(job_id)["TimeMin"] == "N/A"
        cluster.wait_done(job_id, timeout=60)
    finally:
        live.stop()
