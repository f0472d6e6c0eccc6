"""`hpcpredict predict` says what sbatch will do (issue #40, finding 3), on the real 22.05.8 cluster.

The user names no partition or account; sbatch runs the job in the default partition under the
user's DefaultAccount, and the hook sends both. The daemon reads them from Slurm itself
(policy/slurm_defaults.py: `scontrol -o show partition`, `sacctmgr show user`), so:

- with ``[policy] accounts = ["research"]`` (alice's DefaultAccount) predict is decided in the
  mode sbatch gets (here ``bound``), not "limits left as submitted";
- with ``[policy] partitions = ["short"]`` (MaxTime=3 minutes) and runs of 4+ minutes, neither
  predict nor the sbatch line suggests more than 00:03:00, and both say the partition's limit.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from hpcpredict.daemon.policy.slurm_defaults import parse_default_accounts, parse_partitions

from .harness import VENV_BIN, poll
from .test_cluster_hooks import prediction
from .test_policy_release import own_daemon
from .test_policy_soft import PROBE, hook_line, seed_probe_history, submit


def predict(cluster, daemon, *args: str) -> tuple[dict, str]:
    script = Path(cluster.jobs) / cluster.write_script("softprobe.sh", PROBE)
    done = subprocess.run([str(VENV_BIN / "hpcpredict"), "--socket", daemon.hook_socket, "predict", str(script),
                           *args, "--user", "alice", "--json"],
                          env=daemon.cli_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def read_slurm(daemon) -> None:
    """Until the daemon has read the partitions: a predict without -p names the default one."""
    poll(lambda: daemon.call("Predict", {"job": {"user": "alice"}, "time_limit_s": 600}).get("policy_mode") == "bound",
         60, "the daemon to read the partitions and alice's default account")


def test_the_real_outputs_parse(cluster):
    partitions = parse_partitions(subprocess.run(["scontrol", "-o", "show", "partition"], env=cluster.env(),
                                                 capture_output=True, text=True, timeout=30).stdout)
    assert {name: (p.default, p.max_time_s) for name, p in partitions.items()} == \
        {"debug": (True, 0), "short": (False, 180)}
    accounts = parse_default_accounts(subprocess.run(
        ["sacctmgr", "-nP", "show", "user", "format=User,DefaultAccount"], env=cluster.env(), capture_output=True,
        text=True, timeout=30).stdout)
    assert accounts["alice"] == "research", accounts


def test_predict_is_decided_as_the_submission_under_an_account_scope(cluster, daemon):
    scoped = own_daemon(daemon, "accounts", HPCPREDICT_POLICY_ACCOUNTS="research", SLURM_CONF=cluster.conf)
    try:
        read_slurm(scoped)
        answer, _ = predict(cluster, scoped, "-N2", "-t", "10")
        assert answer["policy_mode"] == "bound", answer
        assert not any("limits left as submitted" in line for line in answer["explanation"]), answer
        cluster.set_hook_socket(scoped.hook_socket)
        job_id, stderr = submit(cluster, "softprobe", "-N2", "--time=10", "softprobe.sh", "1")
        line = hook_line(stderr)
        row = prediction(scoped, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
        assert row.policy_mode == answer["policy_mode"], (row, line)
        assert (row.decided_time_min_s or 0) == answer["apply_time_min_s"], (row, answer, line)
        cluster.wait_done(job_id, timeout=60)
    finally:
        cluster.set_hook_socket(daemon.hook_socket)
        scoped.stop()


def test_the_suggestion_stays_within_the_partitions_max_time(cluster, daemon):
    scoped = own_daemon(daemon, "short", HPCPREDICT_POLICY_PARTITIONS="short", SLURM_CONF=cluster.conf)
    try:
        seed_probe_history(scoped, runtimes=(250.0, 260.0, 270.0))
        poll(lambda: scoped.call("Predict", {"job": {"user": "alice", "partition": "short"}}).get(
            "suggested_time_limit_s") == 180, 60, "the daemon to read short's MaxTime")
        answer, _ = predict(cluster, scoped, "-N2", "-p", "short")
        assert answer["suggested_time_limit_s"] == 180, answer
        said = [line for line in answer["explanation"] if "capped at 00:03:00" in line]
        assert said and "the most partition short allows" in said[0], answer["explanation"]
        cluster.set_hook_socket(scoped.hook_socket)
        job_id, stderr = submit(cluster, "softprobe", "-N2", "-p", "short", "softprobe.sh", "1")
        line = hook_line(stderr)
        assert "00:04:00" not in line and "00:05:00" not in line, line
        cluster.wait_done(job_id, timeout=60)
    finally:
        cluster.set_hook_socket(daemon.hook_socket)
        scoped.stop()
