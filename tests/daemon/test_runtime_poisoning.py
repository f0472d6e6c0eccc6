"""Issue 39, finding 2: one user cannot poison another's runtime model through a shared
application name. Any job can claim ``#HPCPREDICT app=NAME``; today ``train-runtime
--from-store`` pooled every user's runs of it and published without a check, and a third user
with no runs got a ``--time-min`` (bound mode: a kill limit) from the attacker's short runs.

The victim's runs are the real LAMMPS melt sweep (tests/data/runtime/lammps_melt.csv, 429 runs)
at 600x the steps (``steps`` and the runtime scaled together: 1-17 min, so the limits are
minutes, as on a cluster); the attacker reports 2-second runs of a third of his configurations.
Every run reaches the store through ReportOutcome as the epilog sends it (root, the job's user
from slurmctld); the model is trained with the CLI and served by a real daemon answering Predict
in bound mode.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from hpcpredict.daemon.cli.main import main
from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.registry import ModelRegistry
from hpcpredict.daemon.server import Daemon
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

DATA = Path(__file__).resolve().parents[1] / "data" / "runtime" / "lammps_melt.csv"
INPUTS = ("x", "y", "z", "steps", "cutoff", "skin", "temp", "newton")
SCALE = 600
APP = "melt"
ROOT = 0


def victim_runs() -> list[tuple[dict, float]]:
    runs = []
    with DATA.open() as handle:
        for row in csv.DictReader(handle):
            inputs = {name: (row[name] == "on" if name == "newton" else float(row[name])) for name in INPUTS}
            inputs["steps"] *= SCALE
            runs.append((inputs, float(row["runtime_s"]) * SCALE))
    return runs


def request(user: str, inputs: dict, time_limit_s: int = 4 * 3600) -> pb.JobRequest:
    job = pb.JobRequest(job=pb.JobIdentity(user=user, application=APP, partition="batch"),
                        resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=time_limit_s)
    for name, value in inputs.items():
        job.inputs[name].CopyFrom(pb.Value(flag=value) if isinstance(value, bool) else pb.Value(number=value))
    return job


def report(service, user: str, runs, first_id: int) -> None:
    """The runs' outcomes as the epilog reports them (root; the user is the job's, from Slurm)."""
    for number, (inputs, runtime) in enumerate(runs):
        start = 1_700_000_000 + (first_id + number) * 60
        outcome = pb.Outcome(job_id=str(first_id + number), state="COMPLETED", elapsed_s=runtime, submit_time=start,
                             start_time=start, end_time=start + int(runtime) + 1,
                             request=request(user, inputs))
        assert service.call("ReportOutcome", outcome, ROOT).stored


@pytest.fixture
def site(world_dir, monkeypatch):
    environ = {"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
               "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir), "HPCPREDICT_MODELS_BUNDLED": "false",
               "HPCPREDICT_POLICY_MODE": "bound"}
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    daemon = Daemon(load_config(None, environ=environ))
    daemon.service.reload()
    yield daemon
    daemon.store.close()


def train(daemon, capsys, *extra) -> tuple[int, str]:
    daemon.store.flush()
    capsys.readouterr()
    code = main(["train-runtime", "--from-store", "--application", APP, "--learner", "log-linear", "--no-reload",
                 *extra])
    out = capsys.readouterr()
    daemon.service.reload()
    return code, out.out + out.err


def predict(daemon, user: str, inputs: dict) -> pb.Estimate:
    return daemon.service.call("Predict", request(user, inputs), ROOT)


def pooled_cv_mape(daemon) -> float | None:
    path = ModelRegistry(daemon.config.models.dir).current("runtime").model_path / APP / "inputs.json"
    return json.loads(path.read_text())["metadata"]["cv_mape"] if path.exists() else None


def own_cv_mape(daemon, user: str) -> float:
    path = ModelRegistry(daemon.config.models.dir).current("runtime").model_path / APP / "users" / user / "inputs.json"
    return json.loads(path.read_text())["metadata"]["cv_mape"]


def attack(runs) -> list[tuple[dict, float]]:
    rng = np.random.default_rng(0)
    return [(runs[i][0], 2.0) for i in rng.choice(len(runs), size=len(runs) // 3, replace=False)]


def test_short_runs_under_the_victims_application_name_never_set_a_third_users_limit(site, capsys):
    """The issue's run: the victim alone, then the attacker's short runs; the third user, who
    has no runs of the application, is never given a --time-min from either."""
    runs = victim_runs()
    probe = max(runs, key=lambda run: run[1])[0]        # the victim's longest configuration
    report(site.service, "vic", runs, 1)
    assert train(site, capsys)[0] == 0
    before = predict(site, "vic", probe)
    assert before.model_name.startswith("runtime-log-linear/melt/users/vic/")
    assert predict(site, "tom", probe).apply_time_min_s == 0       # one user's runs decide nobody else's jobs
    cv_before = own_cv_mape(site, "vic")

    report(site.service, "eve", attack(runs), 10_000)
    code, out = train(site, capsys)
    assert code == 0, out
    assert "eve kept out of the pooled model" in out and "vic kept out of the pooled model" in out
    after = predict(site, "vic", probe)
    assert after.runtime_s == pytest.approx(before.runtime_s, rel=1e-6)   # his own runs only
    assert own_cv_mape(site, "vic") == pytest.approx(cv_before)
    assert pooled_cv_mape(site) is None                                   # no pool: the runs disagree
    tom = predict(site, "tom", probe)
    assert tom.apply_time_min_s == 0 and not tom.model_name.startswith("runtime-"), tom.model_name
    eve = predict(site, "eve", probe)                                     # her runs decide her jobs
    assert eve.model_name.startswith("runtime-log-linear/melt/users/eve/") and eve.runtime_s < 60


def test_with_a_pool_of_agreeing_users_the_attackers_runs_do_not_reach_it(site, capsys):
    """Two users share the sweep (their runs agree: a pooled model serves the third user); the
    attacker's runs are kept out and the third user's --time-min does not move."""
    runs = victim_runs()
    probe = max(runs, key=lambda run: run[1])[0]
    report(site.service, "vic", runs[0::2], 1)
    report(site.service, "amy", runs[1::2], 5_000)
    assert train(site, capsys)[0] == 0
    tom_before = predict(site, "tom", probe)
    assert tom_before.model_name.startswith("runtime-log-linear/melt/inputs ") and tom_before.apply_time_min_s > 0
    cv_before = pooled_cv_mape(site)

    report(site.service, "eve", attack(runs), 10_000)
    code, out = train(site, capsys)
    assert code == 0, out
    assert "pooled model of the users amy, vic" in out and "eve kept out of the pooled model" in out
    assert pooled_cv_mape(site) == pytest.approx(cv_before)
    tom_after = predict(site, "tom", probe)
    assert tom_after.apply_time_min_s == tom_before.apply_time_min_s
    assert predict(site, "vic", probe).runtime_s == pytest.approx(tom_before.runtime_s, rel=1e-6)


def test_the_admins_pool_of_every_user_is_refused_when_worse_than_the_serving_model(site, capsys):
    """`--pool all` (the admin vouches for every user's runs) with the attacker's runs in: the
    model's cross-validated error is far worse than the serving one's, so it is not published
    (both errors named) and the third user's limit stays; --force publishes it deliberately."""
    runs = victim_runs()
    probe = max(runs, key=lambda run: run[1])[0]
    report(site.service, "vic", runs[0::2], 1)
    report(site.service, "amy", runs[1::2], 5_000)
    assert train(site, capsys, "--pool", "all")[0] == 0
    serving = ModelRegistry(site.config.models.dir).current("runtime").version
    tom_before = predict(site, "tom", probe).apply_time_min_s
    cv_before = pooled_cv_mape(site)

    report(site.service, "eve", attack(runs), 10_000)
    code, out = train(site, capsys, "--pool", "all")
    assert code == 1
    assert "not published: the new model is worse than the serving one" in out
    assert f"the serving model's {100 * cv_before:.1f} %" in out and "--force" in out
    assert ModelRegistry(site.config.models.dir).current("runtime").version == serving
    assert predict(site, "tom", probe).apply_time_min_s == tom_before

    code, out = train(site, capsys, "--pool", "all", "--force")
    assert code == 0 and "published although worse (--force)" in out
    assert ModelRegistry(site.config.models.dir).current("runtime").version != serving
