"""Starting small: `[policy] partitions`, `accounts` and `opt_out_users` leave the limits of jobs
outside them as submitted (the job is still predicted and told), through the real service."""
from __future__ import annotations

import pytest

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.lab.refresh import train_and_publish
from hpcpredict.daemon.server import Daemon
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb


@pytest.fixture
def service(world_dir):
    config = load_config(None, environ={
        "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_DAEMON_HOOK_SOCKET": "",
        "HOME": str(world_dir), "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_POLICY_PARTITIONS": "batch,long",
        "HPCPREDICT_POLICY_MODE": "bound", "HPCPREDICT_POLICY_ACCOUNTS": "phys", "HPCPREDICT_POLICY_OPT_OUT_USERS": "carl"})
    daemon = Daemon(config)
    daemon.service.reload()
    yield daemon
    daemon.store.close()


def request(user="ann", partition="batch", account="phys"):
    return pb.JobRequest(job=pb.JobIdentity(user=user, application="lmp", partition=partition, account=account),
                         resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=36000)


@pytest.mark.parametrize("user, partition, account, reason", [
    ("ann", "debug", "phys", "partition debug is not in [policy] partitions"),
    ("ann", "batch,debug", "phys", "partition debug is not in [policy] partitions"),
    ("ann", "", "phys", "partition (none named) is not in [policy] partitions"),
    ("ann", "batch", "chem", "account chem is not in [policy] accounts"),
    ("carl", "batch", "phys", "carl opted out ([policy] opt_out_users)"),
])
def test_limits_change_only_inside_the_scope(service, user, partition, account, reason):
    daemon, service = service, service.service
    for who in {user, "ann"}:
        # a history a walltime model calibrates its bound on (bound mode sets none from recent runs alone)
        for number, elapsed in enumerate((1800.0, 2400.0, 3000.0) * 25):
            start = 1_700_000_000 + number * 86400
            service.call("ReportOutcome", pb.Outcome(job_id=f"{who}{number}", elapsed_s=elapsed, state="COMPLETED",
                                                     submit_time=start, start_time=start, end_time=start + int(elapsed),
                                                     request=request(who, partition, account)), 0)
    daemon.store.flush()
    train_and_publish(daemon.config)
    service.reload()
    inside = service.call("Predict", request("ann", "batch,long", "phys"), 0)
    assert not inside.fallback and inside.suggested_time_min_s > 0, inside
    outside = service.call("Predict", request(user, partition, account), 0)
    assert not outside.fallback and outside.runtime_s > 0
    assert outside.suggested_time_min_s == 0 and outside.apply_time_min_s == 0 and outside.apply_time_limit_s == 0
    assert outside.policy_mode == "advise"
    assert f"limits left as submitted: {reason}" in outside.explanation
