"""``[forecast] sbatch_line``: the start estimate on the sbatch line, looked up, never computed at Predict.

The daemon's service is built as hpcpredictd builds it (not started: no socket); its forecast
thread's refresh is called directly, on the real 22.05 squeue capture of tests/data/slurm printed
by stand-ins (as tests/daemon/test_when.py), and the real worker process computes the probes."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hpcpredict.daemon.config import ForecastConfig
from hpcpredict.daemon.forecast import probes
from hpcpredict.daemon.forecast.probes import PLANNED_EDGES_S, ProbeTable
from hpcpredict.daemon.forecast.queue import parse_squeue, snapshot_of
from hpcpredict.daemon.forecast.types import StartForecast
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.forecast.stand_ins import stand_in_daemon

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
PHRASE = "likely to start"




@pytest.fixture
def world(tmp_path):
    daemons = []

    def build(**forecast):
        (tmp_path / str(len(daemons))).mkdir()
        daemons.append(stand_in_daemon(tmp_path / str(len(daemons)), **{"runs": "8", **forecast}))
        return daemons[-1].service
    yield build
    for daemon in daemons:
        daemon.store.close()


def predict(service, ntasks: int = 4, time_limit_s: int = 7200) -> pb.Estimate:
    request = pb.JobRequest(job=pb.JobIdentity(user="ann", partition="debug"),
                            resources=pb.Resources(nodes=1, ntasks=ntasks), time_limit_s=time_limit_s)
    return service.call("Predict", request, 0)


def known_table(taken_s: float) -> ProbeTable:
    """Every class of the 32-CPU test cluster a distinct wait: (size index * 5 + length index) * 10 + 5 min."""
    sizes = probes.size_edges(32)
    starts = {}
    for i, cpus in enumerate(sizes):
        for j, planned in enumerate(PLANNED_EDGES_S):
            wait = ((i * 5 + j) * 10 + 5) * 60
            starts[(cpus, planned)] = StartForecast(probes.probe_id(cpus, planned), taken_s + wait,
                                                    taken_s + wait / 2, taken_s + 2 * wait, None, 8)
    return ProbeTable(taken_s, sizes, starts)


def with_table(service, table: ProbeTable) -> None:
    service.forecast._kept = replace(service.forecast.latest(), probes=table)


def test_off_by_default_the_line_is_unchanged_and_no_probe_is_forecast(world):
    assert ForecastConfig().sbatch_line is False
    service = world()
    before = predict(service).user_message
    service.forecast.refresh()
    kept = service.forecast.latest()
    assert kept.forecasts and kept.probes is None
    with_table(service, known_table(time.time()))     # even a table kept would not be read
    assert predict(service).user_message == before and PHRASE not in before


def test_on_the_refresh_forecasts_every_probe_and_the_line_carries_its_class(world):
    service = world(sbatch_line="true")
    plain = predict(service)
    assert PHRASE not in plain.user_message           # no table yet: nothing added
    service.forecast.refresh()
    table = service.forecast.latest().probes
    assert table is not None and table.sizes == (1, 8, 16, 32) and len(table.starts) == 4 * len(PLANNED_EDGES_S)
    real = predict(service)
    assert real.user_message.startswith(plain.user_message) and PHRASE in real.user_message
    assert "estimate for a job like this one: up to 8 CPUs, planned up to 4 h" in real.user_message
    # the table's own value for the class: 4 CPUs (class 8, index 1), --time=2 h (class 4 h, index 2)
    with_table(service, known_table(time.time()))
    line = predict(service, ntasks=4, time_limit_s=7200).user_message
    assert line.endswith("; likely to start in ~75 min (80%: 38 min - 2.5 h; the estimate for a job like this "
                         "one: up to 8 CPUs, planned up to 4 h)"), line
    # 1 CPU, 10 min: class (1, 10 min), 5 min
    assert "likely to start in ~5 min (80%: 3-10 min" in predict(service, ntasks=1, time_limit_s=600).user_message
    # the reply's fields are the same ones, only the message's text differs
    assert [f.name for f, _ in real.ListFields()] == [f.name for f, _ in plain.ListFields()]


def test_a_stale_table_or_a_forecast_turned_off_adds_nothing(world):
    service = world(sbatch_line="true", interval_s="60")
    base = predict(service).user_message
    service.forecast.refresh()
    with_table(service, known_table(time.time() - probes.STALE_INTERVALS * 60 - 5))
    assert predict(service).user_message == base
    with_table(service, known_table(time.time() - 60))
    assert PHRASE in predict(service).user_message
    # counted from when the refresh made the table (a slow refresh of an old read is still fresh)
    with_table(service, replace(known_table(time.time() - 600), made_s=time.time() - 60))
    assert PHRASE in predict(service).user_message
    with_table(service, replace(known_table(time.time() - 600), made_s=time.time() - 200))
    assert predict(service).user_message == base
    off = world(sbatch_line="true", enabled="false")
    assert PHRASE not in predict(off).user_message


def test_predict_never_computes_a_forecast_even_while_the_worker_blocks_or_fails(world):
    service = world(sbatch_line="true")
    service.forecast.refresh()
    with_table(service, known_table(time.time()))
    expected = predict(service).user_message
    keeper = service.forecast
    release, calls = threading.Event(), []

    def blocked(argv, **options):                 # squeue and the worker both hang here until released
        calls.append(argv[0])
        release.wait(120)
        raise RuntimeError("released")
    keeper._run = blocked
    refreshing = threading.Thread(target=keeper.refresh, daemon=True)
    refreshing.start()
    while not calls:
        time.sleep(0.01)
    answers = []
    asking = threading.Thread(target=lambda: answers.extend(predict(service).user_message for _ in range(5)),
                              daemon=True)
    asking.start()
    asking.join(60)
    try:
        assert answers == [expected] * 5 and refreshing.is_alive() and len(calls) == 1   # Predict ran nothing
    finally:
        release.set()
        refreshing.join(60)

    def failing(argv, **options):
        calls.append(argv[0])
        raise RuntimeError("the worker must not be asked at Predict")
    keeper._run = failing
    assert predict(service).user_message == expected and len(calls) == 1


def test_the_worker_forecasts_each_probe_alone_within_its_budget():
    jobs = parse_squeue((DATA / "squeue_forecast_22.05.txt").read_text())
    snapshot, _ = snapshot_of(jobs, taken_s=1796207263.0, total_cpus=32, planning_rule="kill", max_jobs=100,
                              belief_of=lambda job: None)
    grid = probes.probe_jobs(snapshot)
    pending = sum(1 for job in snapshot.jobs if job.start_s is None)
    assert len(grid) == 20 and {job.priority_rank for job in grid} == {pending}   # each last in the queue
    answers = probes.forecast_probes(snapshot, grid, runs=4, budget_s=60)
    alone = probes.simulate.forecast_starts(snapshot, runs=4, extra=grid[-1])[grid[-1].job_id]
    assert set(answers) == {job.job_id for job in grid} and answers[grid[-1].job_id] == alone
    ticks = iter([0.0, 0.0, 0.5, 2.0])             # the budget is read before each probe
    assert len(probes.forecast_probes(snapshot, grid, runs=4, budget_s=1.0, clock=lambda: next(ticks))) == 2
    table = ProbeTable.of(snapshot, answers)
    assert table.lookup(33, 600) is None                       # larger than the cluster: no class
    assert table.lookup(2, float("inf"))[:2] == (8, PLANNED_EDGES_S[-1])


def test_a_deep_queue_s_grid_is_covered_over_refreshes_each_entry_aged_by_its_own_refresh(world):
    """The budget cuts the grid (here to one probe a refresh): the next refresh goes on from there
    and keeps what it did not reach; an entry kept from long ago says nothing."""
    service = world(sbatch_line="true", interval_s="0.001")     # budget: half an interval, one probe
    keeper = service.forecast
    keeper.refresh()
    first = keeper.latest().probes
    assert len(first.starts) == 1 and first.resume_at == 1 and (1, 600.0) in first.starts
    keeper.refresh()
    second = keeper.latest().probes
    assert set(second.starts) == {(1, 600.0), (1, 3600.0)} and second.resume_at == 2
    assert second.entry_made_s((1, 600.0)) == first.made_s < second.entry_made_s((1, 3600.0))

    now = time.time()
    old = known_table(now)
    keys = list(old.starts)
    cut = {probes.probe_id(*key): old.starts[key] for key in keys[18:]}       # the last two of the grid only
    snapshot = keeper.latest().snapshot
    aged = replace(ProbeTable.of(snapshot, {probes.probe_id(*k): old.starts[k] for k in keys[:18]}, started_at=0,
                                 now=now - 1000), made_s=now - 1000)
    assert aged.resume_at == 18
    table = ProbeTable.of(snapshot, cut, previous=aged, started_at=18, now=now)
    assert table.resume_at == 0 and len(table.starts) == 20
    assert table.entry_made_s(keys[0]) == now - 1000 and table.entry_made_s(keys[19]) == now
    assert probes.sbatch_phrase(table, 1, 600, now=now, max_age_s=180) == ""              # kept, too old
    assert PHRASE in probes.sbatch_phrase(table, 32, 86400 * 2, now=now, max_age_s=180)   # made just now
