"""The scheduling replay (daemon/scheduling/easy.py) predicts what real Slurm 22.05, 24.11 and 26.05 backfill do.

Six whole-node jobs with known sleep runtimes, submitted together to the 8-node test cluster
(sched/backfill, bf_interval=5): a 4-node job runs, an 8-node job waits for it (the head, its
reservation at the running job's limit), and four 2-node jobs arrive behind it, three with a
``--time-min`` below their ``--time``. The replay, given the same submit times, must predict
the order in which Slurm starts the jobs, the limit each job ran under and which job Slurm
kills at its lowered limit. On 22.05 a job backfill starts on its ``--time-min`` runs under
the ``--time-min`` itself (``comp_time_limit = time_min`` in backfill.c), even one whose full
``--time`` would have fitted before the reservation (job E): the replay's ``slurm="22.05"``.
Every job gives ``--time-min`` (equal to ``--time`` where it has none) so the hook leaves all
of them alone. Takes about 3 minutes: limits are whole minutes.
"""
from __future__ import annotations

import subprocess
from datetime import datetime

import pytest

from hpcpredict.daemon.scheduling.easy import simulate
from hpcpredict.daemon.scheduling.jobs import SimJob
from hpcpredict.slurm_plugin.slurmjob import slurm_duration_s

from .harness import poll

SLEEPER = "#!/bin/bash\n# a job that runs for exactly $1 seconds\nsleep \"$1\"\n"
NODES = 8
# name, nodes, --time (min), --time-min (min), sleep (s), in submission order
JOBS = [
    ("A", 4, 3, 3, 150),    # runs at once; its limit sets the head's reservation
    ("B", 8, 2, 2, 10),     # the head: waits for all 8 nodes
    ("C", 2, 10, 1, 20),    # backfilled on its time_min, limit lowered to 1 min, completes
    ("D", 2, 10, 10, 5),    # no time_min below its limit: would delay B, waits
    ("E", 2, 2, 1, 50),     # would fit with its own 2 min, still runs under its 1 min: completes
    ("F", 2, 10, 1, 170),   # backfilled when C ends, limit lowered to 1 min, killed there
]


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()     # slurmctld prints local time


def _idle(cluster) -> bool:
    env = cluster.env()
    queue = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=10)
    states = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=env, capture_output=True, text=True, timeout=10)
    nodes = dict(line.split() for line in states.stdout.splitlines() if line.strip())  # one row per node and partition
    if queue.stdout.strip():
        # jobs other tests left (held ones never end): this test needs the whole cluster
        subprocess.run(["scancel", *queue.stdout.split()], env=env, capture_output=True, timeout=10)
        return False
    return queue.returncode == 0 and len(nodes) == NODES and all(state == "idle" for state in nodes.values())


def test_replay_predicts_slurm_backfill_order_lowered_limits_and_kills(cluster):
    cluster.write_script("sleeper.sh", SLEEPER)
    poll(lambda: _idle(cluster), 300, "an idle test cluster (no job queued, 8 idle nodes)", 1.0)
    ids = {}
    for name, nodes, limit, time_min, sleep in JOBS:
        ids[name], _, _, _ = cluster.sbatch("carol", "-N", str(nodes), "--exclusive", "-J", f"replay-{name}",
                                           "-t", str(limit), "--time-min", str(time_min), "-o", "/dev/null",
                                           "sleeper.sh", str(sleep))

    def finished():
        states = {name: cluster.job(job_id).get("JobState") for name, job_id in ids.items()}
        return states if all(s in ("COMPLETED", "TIMEOUT", "FAILED", "CANCELLED") for s in states.values()) else None

    states = poll(finished, 420, "the replay jobs to finish", 2.0)
    slurm = {name: cluster.job(job_id) for name, job_id in ids.items()}
    assert set(states.values()) <= {"COMPLETED", "TIMEOUT"}, states

    jobs = [SimJob(seq, name, _epoch(slurm[name]["SubmitTime"]), nodes, float(sleep), limit * 60.0,
                   limit * 60.0, time_min * 60.0)
            for seq, (name, nodes, limit, time_min, sleep) in enumerate(JOBS)]
    predicted = {o.job.job_id: o for o in simulate(jobs, procs=NODES, slurm="22.05")}

    slurm_order = sorted(ids, key=lambda n: (_epoch(slurm[n]["StartTime"]), int(ids[n])))
    predicted_order = sorted(ids, key=lambda n: (predicted[n].start_s, predicted[n].job.seq))
    limits = {n: (slurm_duration_s(slurm[n]["TimeLimit"]), int(predicted[n].limit_s)) for n in ids}
    kills = {n: (states[n] == "TIMEOUT", predicted[n].killed) for n in ids}
    detail = f"slurm {slurm_order} vs replay {predicted_order}; (slurm, replay) limits {limits}, kills {kills}"

    assert slurm_order == predicted_order == ["A", "C", "E", "F", "B", "D"], detail
    assert all(real == replayed for real, replayed in limits.values()), detail
    assert limits["C"] == limits["E"] == limits["F"] == (60, 60), detail     # lowered to the time_min
    assert all(real == replayed for real, replayed in kills.values()), detail
    assert [n for n in ids if kills[n][0]] == ["F"], detail


# Slurm 24.11 and 26.05 (the cluster_2411 and cluster_2605 fixtures: 4 whole nodes, bf_interval=2,
# bf_resolution=10), the scenario of FINDINGS.md S3/S4 (/work/shared/slurm-24.11/, -26.05/)
# shortened: L runs, H (all 4 nodes) waits for it, X fits before H's reservation only on its
# 1-min --time-min, and the probe Y (no --time-min) arrives once X runs.
# name, nodes, --time (min), --time-min (min, 0 = none), sleep (s)
def scenario(x_sleep: int) -> list[tuple[str, int, int, int, int]]:
    return [
        ("L", 2, 2, 0, 90),         # H's reservation at its planned end, 120 s
        ("H", 4, 2, 0, 1),          # the head
        ("X", 2, 10, 1, x_sleep),   # backfilled on its time_min; outlives it
        ("Y", 2, 5, 0, 60),         # fits in front of H only if H is planned at X's hard end
    ]


# With time_min_as_soft_limit X keeps its 10 min. 24.11 (the hard-end rule): from the next pass
# H is planned at X's hard end, so Y starts in front of H when L ends, and H waits for Y. 26.05
# (25.05.4+: X planned at its soft end, then halfway to its hard end at every pass): H is planned
# at most (X's hard end - now) / 2 away, too soon for Y's 5 minutes, so Y stays behind H, and H
# starts as X ends; X outlives L's planned end (130 s > 120 s), so H starts late by X's overrun
# only. Without the option X runs under a 1-min limit (24.11: its time_min; 26.05: the whole
# minutes left before H's reservation) and is killed; H keeps its reservation at L's end and Y
# runs after H. release -> (X's sleep, {soft: (start order, limits, kills)})
EXPECTED = {
    "24.11": (100, {True: (["L", "X", "Y", "H"], {"X": 600}, []),
                    False: (["L", "X", "H", "Y"], {"X": 60}, ["X"])}),
    "26.05": (130, {True: (["L", "X", "H", "Y"], {"X": 600}, []),
                    False: (["L", "X", "H", "Y"], {"X": 60}, ["X"])}),
}
# How far a real start may be from the replay's, after both are shifted to L's start: backfill
# runs every 2 s (bf_interval) and jobs start on the next pass after an end.
START_TOLERANCE_S = 8


def _idle_root(cluster) -> bool:
    queue = cluster.run("squeue", "-h", "-o", "%A").stdout.split()
    if queue:
        cluster.run("scancel", *queue)
        return False
    states = cluster.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split("\n")
    return all(line.split()[1] == "idle" for line in states if line.strip())


@pytest.fixture
def quiet_root(root_cluster):
    """Each release's cluster with the hook off (it would set its own --time-min on the jobs)."""
    with root_cluster.hook_off() as cluster:
        yield cluster


@pytest.mark.parametrize("soft", [True, False], ids=["time_min_as_soft_limit", "without-option"])
def test_replay_predicts_slurm_with_and_without_the_soft_option(quiet_root, soft):
    """The replay's ``slurm=<release>`` (``soft_limit`` as the cluster) predicts the start order,
    the limit every job runs under and the kills of a real 24.11 and 26.05; on 24.11 the soft job
    moving H's reservation to its hard end is what lets Y in front of H, on 26.05 Y stays behind
    H. With the option, every job's start is also the replay's within START_TOLERANCE_S (time-outs
    are noticed up to 30 s late, so not without it). About 3 minutes per run."""
    cluster = quiet_root
    release = cluster.release.series
    x_sleep, expected = EXPECTED[release]
    jobs_spec = scenario(x_sleep)
    cluster.set_scheduler_parameters(time_min_as_soft_limit=soft)
    poll(lambda: _idle_root(cluster), 120, f"an idle {release} cluster", 1.0)
    ids = {}

    def submit(name, nodes, limit, time_min, sleep):
        extra = ["--time-min", str(time_min)] if time_min else []
        ids[name] = cluster.sbatch("alice", "-J", f"replay-{name}", "-N", str(nodes), "-t", str(limit), *extra,
                                   "-o", "/dev/null", "--wrap", f"sleep {sleep}")[0]

    submit(*jobs_spec[0])
    poll(lambda: cluster.state(ids["L"]) == "RUNNING", 30, "L to run")
    submit(*jobs_spec[1])
    submit(*jobs_spec[2])
    poll(lambda: cluster.state(ids["X"]) == "RUNNING", 30, "X to start")
    submit(*jobs_spec[3])

    def finished():
        states = {name: cluster.state(job_id) for name, job_id in ids.items()}
        return states if all(s in ("COMPLETED", "TIMEOUT", "FAILED", "CANCELLED") for s in states.values()) else None

    states = poll(finished, 600, f"the {release} replay jobs to finish", 2.0)
    slurm = {name: cluster.job(job_id) for name, job_id in ids.items()}
    assert set(states.values()) <= {"COMPLETED", "TIMEOUT"}, states

    jobs = [SimJob(seq, name, _epoch(slurm[name]["SubmitTime"]), nodes, float(sleep), limit * 60.0, limit * 60.0,
                   time_min * 60.0) for seq, (name, nodes, limit, time_min, sleep) in enumerate(jobs_spec)]
    predicted = {o.job.job_id: o for o in simulate(jobs, procs=4, resolution_s=10, slurm=release, soft_limit=soft)}

    slurm_order = sorted(ids, key=lambda n: (_epoch(slurm[n]["StartTime"]), int(ids[n])))
    predicted_order = sorted(ids, key=lambda n: (predicted[n].start_s, predicted[n].job.seq))
    limits = {n: (slurm_duration_s(slurm[n]["TimeLimit"]), int(predicted[n].limit_s)) for n in ids}
    kills = {n: (states[n] == "TIMEOUT", predicted[n].killed) for n in ids}
    origin = (_epoch(slurm["L"]["StartTime"]), predicted["L"].start_s)
    starts = {n: (round(_epoch(slurm[n]["StartTime"]) - origin[0]), round(predicted[n].start_s - origin[1]))
              for n in ids}
    detail = (f"slurm {slurm_order} vs replay {predicted_order}; (slurm, replay) limits {limits}, kills {kills}, "
              f"starts after L's {starts}")

    order, limit_of, killed = expected[soft]
    assert slurm_order == predicted_order == order, detail
    # 25.05.3+ without the option lowers X's limit to the whole minutes before H's reservation
    # (_reset_job_time_limit). That reservation lies within seconds of a minute boundary from X's
    # start (L's end, 119 s after it), so the count is 1 or 2 minutes by where Slurm's reservation
    # begins on its bf_resolution grid: measured 60 s in one run, 120 s in another, where the
    # replay (reservation rounded down to the grid) says 60 s. Not yet explained: one minute of
    # slack here only, the kill and the order must still match.
    slack = {"X": 60} if release == "26.05" and not soft else {}
    assert all(replayed <= real <= replayed + slack.get(n, 0) for n, (real, replayed) in limits.items()), detail
    assert all(limits[n][1] == seconds and limits[n][0] <= seconds + slack.get(n, 0)
               for n, seconds in limit_of.items()), detail
    assert all(real == replayed for real, replayed in kills.values()), detail
    assert [n for n in ids if kills[n][0]] == killed, detail
    if soft:
        assert all(abs(real - replayed) <= START_TOLERANCE_S for real, replayed in starts.values()), detail
    if soft and release == "26.05":
        # H waited only for X's overrun of L's planned end (FINDINGS: 38 s late, where 24.11 made
        # it wait for Y too): it started as X ended
        x_end = round(_epoch(slurm["X"]["EndTime"]) - origin[0])
        assert 0 <= starts["H"][0] - x_end <= START_TOLERANCE_S, (x_end, detail)
