"""Kills that cost what they cost: a job killed by a limit below its request is resubmitted
with the user's request, and its wait and slowdown run from its first submission to its final
end. On a hand-made queue whose schedule is known, a kill followed by a resubmission costs more
than no kill; on random queues every job's work is eventually done in full."""
import random

import pytest

from hpcpredict.daemon.scheduling.easy import simulate as replay
from hpcpredict.daemon.lab.scheduling.scores import summarize
from hpcpredict.daemon.lab.scheduling.workload import NO_REQUEST_LIMIT_S, SimJob

from .test_easy import BLOCKED, KILL_MODES, SLURM_22_05, by_id, job, random_queue


def simulate(jobs, procs, **options):
    """Where --time-min kills (Slurm 22.05 unless a test says otherwise)."""
    return replay(jobs, procs, **{**SLURM_22_05, **options})

# BLOCKED: A holds 2 of 4 processors until 600 s, B needs all 4 (head, shadow 600 s).
# C (900 s of work, request 3600 s) arrives at 2 s; D (100 s, request 500 s) at 3 s.
C = job(2, 2, 2, 900, 3600)
D = job(3, 3, 2, 100, 500)
C_TIME_MIN = job(2, 2, 2, 900, 3600, time_min=120)


def test_killed_job_is_resubmitted_at_its_kill_with_the_users_request():
    outcomes = simulate(BLOCKED + [C_TIME_MIN, D], procs=4, resubmit_killed=True)
    first = [o for o in outcomes if o.job.job_id == "j2" and o.job.retry_of < 0][0]
    retry = [o for o in outcomes if o.job.retry_of == 2][0]
    # backfilled on its 2 min time_min, killed at 122 s: it held D's processors for nothing
    assert (first.start_s, first.end_s, first.killed) == (2, 122, True)
    assert (retry.job.submit_s, retry.job.limit_s, retry.job.time_min_s) == (122, 3600, 0)
    # the retry cannot backfill (122 + 3600 s passes the reservation): it runs after B
    assert (retry.start_s, retry.end_s, retry.killed) == (660, 1560, False)
    assert by_id(outcomes)["j3"].start_s == 660      # D waited behind the lost run


def test_kill_and_resubmission_cost_more_than_no_kill_and_more_than_the_default_scores():
    no_kill = summarize(simulate(BLOCKED + [C, D], procs=4), procs=4)
    resubmitted = summarize(simulate(BLOCKED + [C_TIME_MIN, D], procs=4, resubmit_killed=True), procs=4)
    served = summarize(simulate(BLOCKED + [C_TIME_MIN, D], procs=4), procs=4)
    assert no_kill["killed"] == 0 and resubmitted["killed"] == served["killed"] == 1
    # no kill: C waits 658 s, D backfills at once; killed and resubmitted: C's wait holds its
    # first 0 s, its 120 s lost run and the retry's 538 s (658 s), and D waits 657 s.
    assert no_kill["mean_wait_s"] == pytest.approx((0 + 599 + 658 + 0) / 4)
    assert resubmitted["mean_wait_s"] == pytest.approx((0 + 599 + 658 + 657) / 4)
    assert resubmitted["mean_bounded_slowdown"] > no_kill["mean_bounded_slowdown"]
    # counted as served, the kill looked free (C done at 122 s after a 120 s run)
    assert served["mean_bounded_slowdown"] < resubmitted["mean_bounded_slowdown"]
    assert resubmitted["n"] == served["n"] == 4
    # the lost run kept the machine busy: more processor-seconds over a span that ends as late
    assert resubmitted["utilization"] > no_kill["utilization"]
    assert resubmitted["killed_node_hours"] == pytest.approx(2 * 120 / 3600)


def test_without_a_kill_resubmission_changes_nothing():
    queue = BLOCKED + [C, D]
    assert summarize(simulate(queue, procs=4, resubmit_killed=True), procs=4) == \
        summarize(simulate(queue, procs=4), procs=4)


def test_a_kill_at_the_users_own_request_is_not_resubmitted():
    """A job whose work exceeds its request is killed there as in the trace: no retry (or a
    replay would resubmit it for ever)."""
    outcomes = simulate([job(0, 0, 1, 900, 600)], procs=2, resubmit_killed=True)
    assert len(outcomes) == 1 and outcomes[0].killed


def test_a_job_without_request_is_resubmitted_with_the_partitions_limit():
    killed = SimJob(0, "x", 0, 1, 900, 0.0, 600.0)     # a limit we set where the user gave none
    outcomes = simulate([killed], procs=2, resubmit_killed=True)
    assert [(o.start_s, o.limit_s, o.killed) for o in outcomes] == [(0, 600, True), (600, NO_REQUEST_LIMIT_S, False)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mode", KILL_MODES)
def test_every_job_is_done_in_full_once_and_the_machine_is_never_overcommitted(seed, mode):
    queue = random_queue(random.Random(seed), 300, 8, time_min_share=0.8)
    outcomes = simulate(queue, procs=8, **mode, resubmit_killed=True)
    killed = [o for o in outcomes if o.killed]
    assert killed and all(o.job.retry_of < 0 for o in killed)
    done = {o.job.retry_of if o.job.retry_of >= 0 else o.job.seq: o for o in outcomes if not o.killed}
    assert len(outcomes) == 300 + len(killed) and len(done) == 300
    assert all(o.end_s - o.start_s == o.job.work_s for o in done.values())
    used, events = 0, sorted([(o.start_s, o.job.procs) for o in outcomes] + [(o.end_s, -o.job.procs) for o in outcomes],
                             key=lambda e: (e[0], e[1]))
    for _, delta in events:
        used += delta
        assert used <= 8
    scores = summarize(outcomes, procs=8)
    assert scores["n"] == 300 and scores["killed"] == len(killed)
