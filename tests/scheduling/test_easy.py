"""The EASY backfilling replay on hand-made queues whose schedule is known, per Slurm release,
and its safety properties on random queues: where ``--time-min`` is a kill limit the head's
reservation is never delayed by a backfilled job, a limit equal to the work never kills; where
it is soft (``time_min_as_soft_limit``) a running soft job holds the reservation to its hard
end, as measured on Slurm 24.11.5 (/work/shared/slurm-24.11/FINDINGS.md, runs S1-S4), or from
25.05.4 on to its soft end and then halfway to its hard end, as measured on 26.05.5
(/work/shared/slurm-26.05/FINDINGS.md, section 1); releases are parsed as numbers."""
import dataclasses
import doctest
import importlib
import random

import pytest

from hpcpredict.daemon.lab.scheduling import policies
from hpcpredict.daemon.scheduling import easy
from hpcpredict.daemon.scheduling.easy import simulate
from hpcpredict.daemon.scheduling.jobs import SimJob

# The --time-min semantics replayed (easy.py): a kill limit ...
SLURM_22_05 = {"slurm": "22.05"}                             # ... given to every backfill start
ANY_START = {"slurm": "24.11", "soft_limit": False}          # ... given to every start
RESERVATION = {"slurm": "25.05.3", "soft_limit": False}      # ... lowered to the room before the reservation
SOFT = {"slurm": "24.11"}                                    # time_min_as_soft_limit: never kills; hard end
HALFWAY = {"slurm": "26.05"}                                 # ... planned at the soft end, then halfway
KILL_MODES = [SLURM_22_05, ANY_START, RESERVATION]
SOFT_MODES = [SOFT, HALFWAY]


def job(seq, submit, procs, work, limit, time_min=0.0, request=None):
    return SimJob(seq, f"j{seq}", submit, procs, work, limit if request is None else request, limit, time_min)


def by_id(outcomes):
    return {o.job.job_id: o for o in outcomes}


# A holds half the machine until 600 s; B needs all of it (the head, shadow time 600 s);
# C arrives on the free half.
BLOCKED = [job(0, 0, 2, 600, 600), job(1, 1, 4, 60, 600)]


@pytest.mark.parametrize("mode, limit", [(SLURM_22_05, 120), (RESERVATION, 540)])
def test_job_with_time_min_is_backfilled_with_its_limit_lowered_and_killed_there(mode, limit):
    outcomes = by_id(simulate(BLOCKED + [job(2, 2, 2, 900, 3600, time_min=120)], procs=4, **mode))
    c = outcomes["j2"]
    # Slurm 22.05: the time_min itself; later Slurm: the whole minutes left before the
    # reservation, (600 - 2) // 60 = 9 min.
    assert (c.start_s, c.limit_s, c.backfilled, c.lowered) == (2, limit, True, True)
    assert c.killed and c.end_s == 2 + limit
    assert outcomes["j1"].start_s == 600          # the head starts at its shadow time


@pytest.mark.parametrize("mode, limit", [(SLURM_22_05, 120), (RESERVATION, 540)])
def test_job_that_fits_within_its_lowered_limit_completes(mode, limit):
    c = by_id(simulate(BLOCKED + [job(2, 2, 2, 100, 3600, time_min=120)], procs=4, **mode))["j2"]
    assert (c.start_s, c.limit_s, c.killed, c.end_s) == (2, limit, False, 102)


@pytest.mark.parametrize("mode", KILL_MODES + SOFT_MODES)
def test_without_time_min_the_same_job_waits_behind_the_head(mode):
    outcomes = by_id(simulate(BLOCKED + [job(2, 2, 2, 900, 3600)], procs=4, **mode))
    assert outcomes["j2"].start_s == 600 + 60 and not outcomes["j2"].backfilled
    assert not any(o.killed for o in outcomes.values())


@pytest.mark.parametrize("mode", KILL_MODES + SOFT_MODES)
def test_time_min_too_long_for_the_hole_does_not_start(mode):
    outcomes = by_id(simulate(BLOCKED + [job(2, 2, 2, 900, 3600, time_min=600)], procs=4, **mode))
    assert outcomes["j2"].start_s > 600


@pytest.mark.parametrize("mode, limit", [(SLURM_22_05, 60), (RESERVATION, 7200)])
def test_job_on_extra_processors(mode, limit):
    """The head needs 3 of 4 processors: one is extra at the shadow time. Later Slurm keeps
    the full limit there (no reservation overlapped); 22.05 still gives the time_min."""
    queue = [job(0, 0, 3, 600, 600), job(1, 1, 3, 60, 600), job(2, 2, 1, 5000, 7200, time_min=60)]
    d = by_id(simulate(queue, procs=4, **mode))["j2"]
    assert (d.start_s, d.limit_s, d.killed, d.backfilled) == (2, limit, limit < 5000, True)


def test_slurm_22_05_gives_time_min_even_where_the_full_limit_fits():
    c = by_id(simulate(BLOCKED + [job(2, 2, 2, 400, 500, time_min=120)], procs=4, **SLURM_22_05))["j2"]
    assert (c.start_s, c.limit_s, c.killed) == (2, 120, True)
    c = by_id(simulate(BLOCKED + [job(2, 2, 2, 400, 500, time_min=120)], procs=4, **RESERVATION))["j2"]
    assert (c.start_s, c.limit_s, c.killed) == (2, 500, False)


@pytest.mark.parametrize("mode, limit", [(SLURM_22_05, 3600), (RESERVATION, 3600), (ANY_START, 60), (SOFT, 3600),
                                         (HALFWAY, 3600)])
def test_main_scheduler_never_lowers_a_limit_unless_every_start_is_a_backfill(mode, limit):
    """24.11 without the option: the backfill thread starts even a lone job on an idle
    cluster and gives it its time_min (FINDINGS S7b)."""
    d = by_id(simulate([job(0, 0, 2, 50, 3600, time_min=60)], procs=4, **mode))["j0"]
    assert (d.limit_s, d.backfilled, d.killed) == (limit, False, False)


def test_reservation_starts_on_the_backfill_resolution():
    # A ends by its limit at 610 s: Slurm's reservation starts at 600 s (rounded down), so
    # a job ending at 605 s conflicts with it; with resolution 0 (plain EASY) it fits.
    queue = [job(0, 0, 2, 610, 610), job(1, 1, 4, 60, 600), job(2, 5, 2, 600, 600)]
    assert by_id(simulate(queue, procs=4))["j2"].start_s > 5
    assert by_id(simulate(queue, procs=4, resolution_s=0))["j2"].start_s == 5


@pytest.mark.parametrize("mode", SOFT_MODES)
def test_soft_time_min_never_kills_and_can_delay_the_head(mode):
    outcomes = by_id(simulate(BLOCKED + [job(2, 2, 2, 900, 3600, time_min=120)], procs=4, **mode))
    c = outcomes["j2"]
    assert (c.start_s, c.limit_s, c.killed, c.end_s) == (2, 3600, False, 902)
    assert outcomes["j1"].start_s == 902        # planned on 2 min, ran 15: the head waited


# FINDINGS section 2, on 4 whole nodes, bf_resolution 10 s, times from L's start: L (2 nodes,
# --time=2, runs 115 s), H (4 nodes, --time=2, 30 s: the head, reserved at L's end), X (2
# nodes, --time=10 --time-min=1, runs 150 s), and in S3/S4 the probe Y (2 nodes, --time=5, no
# --time-min, runs 200 s) submitted once X runs.
L, H = job(0, 0, 2, 115, 120), job(1, 1, 4, 30, 120)
X, Y = job(2, 2, 2, 150, 600, time_min=60), job(3, 3, 2, 200, 300)


def test_soft_job_moves_the_reservation_to_its_hard_end_and_backfill_fills_the_window():
    """S3 (24.11.5 with time_min_as_soft_limit): X starts on its time_min and keeps its 10 min;
    from the next pass H is planned at X's hard end (602 s), so when L ends at 115 s Y (5 min)
    fits in front of H and starts (Slurm: 116 s); H starts when Y ends (Slurm: 316 s). Were X
    planned at its soft end (62 s) or halfway to its hard end, H's reservation would stay at
    L's end and Y would wait behind H."""
    outcomes = by_id(simulate([L, H, X, Y], procs=4, resolution_s=10, **SOFT))
    x, y, h = outcomes["j2"], outcomes["j3"], outcomes["j1"]
    assert (x.start_s, x.limit_s, x.killed, x.end_s, x.backfilled) == (2, 600, False, 152, True)
    assert (y.start_s, y.backfilled) == (115, True)
    assert h.start_s == y.end_s == 315


@pytest.mark.parametrize("mode", SOFT_MODES)
def test_soft_job_alone_delays_the_head_by_its_overrun_only(mode):
    """S1 (24.11.5) and 26.05.5 without Y: H waits only for X's real end (Slurm: 153 s, 1 s after X)."""
    outcomes = by_id(simulate([L, H, X], procs=4, resolution_s=10, **mode))
    assert outcomes["j2"].end_s == outcomes["j1"].start_s == 152


@pytest.mark.parametrize("slurm", ["25.05.4", "25.11", "26.05", "26.05.5"])
def test_halfway_rule_keeps_the_reservation_and_the_probe_waits_behind_the_head(slurm):
    """26.05.5 (FINDINGS 26.05 section 1, PROBE=1): X is planned at its soft end (62 s), so H's
    reservation stays at L's end; once X's soft end has passed, at halfway to X's hard end
    ((115 + 602) / 2 when L ends): Y's 5 min do not fit in front of H. H starts when X ends
    (Slurm: 153 s, 38 s late, where 24.11.5 made it 316 s), Y when H ends (Slurm: 184 s)."""
    outcomes = by_id(simulate([L, H, X, Y], procs=4, resolution_s=10, slurm=slurm))
    x, y, h = outcomes["j2"], outcomes["j3"], outcomes["j1"]
    assert (x.start_s, x.limit_s, x.killed, x.end_s, x.backfilled) == (2, 600, False, 152, True)
    assert h.start_s == x.end_s == 152 and h.start_s - 115 == 37
    assert (y.start_s, y.backfilled) == (h.end_s, False) == (182, False)


def recorded_shadows(monkeypatch, resolution=None):
    """(now, head's shadow) of every reservation the replay computes, unrounded."""
    shadows = []
    reservation = easy._Machine._reservation

    def recording(machine, head, now):
        exact = easy._Machine(machine.procs, 0, machine.mode)
        exact.free, exact.running = machine.free, machine.running
        shadows.append((now, reservation(exact, head, now)[0]))
        return reservation(machine, head, now)

    monkeypatch.setattr(easy._Machine, "_reservation", recording)
    return shadows


def test_halfway_rule_replans_the_head_as_time_passes(monkeypatch):
    """26.05.5: H's planned start was L's hard end (120 s) while X was within its soft limit,
    then moved 1 s for every 2 s: 360 s at 119 s, 369 s at 136 s, i.e. (now + 602) / 2. The
    replay plans where processors are free to backfill: at X's submission (L's end), and when
    L ends, halfway from then to X's hard end; under 24.11's rule X's hard end itself."""
    shadows = recorded_shadows(monkeypatch)
    simulate([L, H, X, Y], procs=4, resolution_s=10, **HALFWAY)
    assert shadows == [(2, 120), (115, (115 + 602) / 2)]
    shadows.clear()
    simulate([L, H, X, Y], procs=4, resolution_s=10, **SOFT)
    assert shadows == [(2, 120), (115, 602)]


def test_halfway_rule_passes_again_right_after_a_soft_end():
    """Under the halfway rule a reservation bound by a soft job's soft end jumps later once that
    end has passed; the replay passes at that second, as Slurm's next backfill pass would, and
    starts what fits then. S (2 of 6 processors, --time-min 100 s of 2000 s) binds the head's
    reservation at 100 s; J (400 s) fits only after the jump, at 101 s. Under 24.11's rule S is
    planned at 2000 s from the start and J starts at once."""
    queue = [job(0, 0, 2, 50, 50), job(1, 0, 2, 1900, 2000, time_min=100), job(2, 1, 6, 60, 600),
             job(3, 2, 2, 400, 400)]
    assert by_id(simulate(queue, procs=6, resolution_s=10, **HALFWAY))["j3"].start_s == 101
    assert by_id(simulate(queue, procs=6, resolution_s=10, **SOFT))["j3"].start_s == 2


@pytest.mark.parametrize("mode, killed_at", [(SLURM_22_05, 62), (ANY_START, 62)])
def test_without_the_option_the_same_job_is_killed_and_the_reservation_holds(mode, killed_at):
    """S2/S4 (22.05-like): X runs under its 1-min time_min and is killed (Slurm notices up to
    30 s late: 86 s); H starts at L's end, Y after H (Slurm: 146 s)."""
    outcomes = by_id(simulate([L, H, X, Y], procs=4, resolution_s=10, **mode))
    x, h, y = outcomes["j2"], outcomes["j1"], outcomes["j3"]
    assert (x.limit_s, x.killed, x.end_s) == (60, True, killed_at)
    assert h.start_s == 115 and y.start_s == h.end_s == 145


@pytest.mark.parametrize("slurm", ["22.05", "23.02", "23.02.7"])
def test_the_option_word_is_ignored_before_23_11(slurm):
    """slurmctld before 23.11 accepts time_min_as_soft_limit silently: --time-min kills."""
    queue = [L, H, X, Y]
    assert easy.semantics(slurm, soft_limit=True) == easy.semantics(slurm) == "backfill-time-min"
    assert simulate(queue, procs=4, resolution_s=10, slurm=slurm, soft_limit=True) \
        == simulate(queue, procs=4, resolution_s=10, slurm="22.05")


@pytest.mark.parametrize("slurm, soft, expected", [
    ("22.05", None, "backfill-time-min"), ("23.02", None, "backfill-time-min"),
    ("23.11", None, "hard_end"), ("23.11", False, "any-time-min"), ("24.11", None, "hard_end"),
    ("24.11.5", False, "any-time-min"), ("25.05", None, "hard_end"), ("25.05", False, "any-time-min"),
    ("25.05.2", False, "any-time-min"), ("25.05.3", None, "hard_end"), ("25.05.3", False, "reservation"),
    ("25.05.4", None, "soft_then_halfway"), ("25.05.4", False, "reservation"), ("25.11", None, "soft_then_halfway"),
    ("26.05", None, "soft_then_halfway"), ("26.05.5", True, "soft_then_halfway"), ("26.05.5", False, "reservation"),
])
def test_release_numbers_map_to_their_semantics(slurm, soft, expected):
    """A missing patch level is .0: 25.05 is 25.05.0 (hard end; the time_min reset of ticket
    23350 until 25.05.3); the halfway rule from 25.05.4 (and 25.11.0) on."""
    assert easy.semantics(slurm, soft) == expected
    assert easy.planning_rule(slurm, soft) == (expected if expected in easy.PLANNING_RULES else None)


def random_queue(rng, n, procs, time_min_share=0.5):
    jobs, submit = [], 0.0
    for seq in range(n):
        submit += rng.expovariate(1 / 120)
        work = rng.choice([5, 60, 300, 1200, 3600, 7000])
        request = rng.choice([600, 3600, 7200, 14400])
        work = min(work, request)
        time_min = rng.choice([60, 300, 1800]) if rng.random() < time_min_share else 0.0
        jobs.append(SimJob(seq, str(seq), round(submit), rng.randint(1, procs), work, request, request,
                           time_min if time_min < request else 0.0))
    return jobs


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("resolution", [0, 60])
@pytest.mark.parametrize("mode", KILL_MODES)
def test_head_reservation_is_never_delayed_by_backfill(seed, resolution, mode, monkeypatch):
    """Where --time-min is a kill limit, every job starts no later than the shadow time it was
    given when it first became the head of the queue (running jobs only end earlier than their
    limits, backfilled jobs end before the reservation or use extra processors)."""
    first_shadow: dict[int, float] = {}
    reservation = easy._Machine._reservation

    def recording(machine, head, now):
        exact = easy._Machine(machine.procs, 0, machine.mode)
        exact.free, exact.running = machine.free, machine.running
        first_shadow.setdefault(head.seq, reservation(exact, head, now)[0])
        return reservation(machine, head, now)

    monkeypatch.setattr(easy._Machine, "_reservation", recording)
    rng = random.Random(seed)
    outcomes = simulate(random_queue(rng, 400, 16), procs=16, resolution_s=resolution, **mode)
    assert len(outcomes) == 400 and len(first_shadow) > 50
    late = [(o.job.seq, o.start_s, first_shadow[o.job.seq]) for o in outcomes
            if o.job.seq in first_shadow and o.start_s > first_shadow[o.job.seq]]
    assert late == []
    assert sum(o.lowered for o in outcomes) > 0 and sum(o.backfilled for o in outcomes) > 0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", SOFT_MODES)
def test_soft_limit_never_kills_and_can_delay_a_head(seed, mode, monkeypatch):
    """With the option nothing is killed below its request, and the head's first shadow is no
    longer a promise: soft jobs overrunning their time_min delay some heads (S1)."""
    first_shadow: dict[int, float] = {}
    reservation = easy._Machine._reservation

    def recording(machine, head, now):
        first_shadow.setdefault(head.seq, reservation(machine, head, now)[0])
        return reservation(machine, head, now)

    monkeypatch.setattr(easy._Machine, "_reservation", recording)
    outcomes = simulate(random_queue(random.Random(seed), 400, 16, time_min_share=0.8), procs=16, resolution_s=0,
                        **mode)
    assert not any(o.killed for o in outcomes if o.job.work_s <= o.job.request_s)
    assert not any(o.lowered for o in outcomes)
    assert any(o.start_s > first_shadow[o.job.seq] for o in outcomes if o.job.seq in first_shadow)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", KILL_MODES + SOFT_MODES)
def test_oracle_never_kills(seed, mode):
    queue = random_queue(random.Random(seed), 300, 8)
    oracle = [policies.oracle(j, None, policies.replay_facts("22.05")) for j in queue]
    outcomes = simulate(oracle, procs=8, **mode)
    assert not any(o.killed for o in outcomes)
    assert all(o.end_s - o.start_s == o.job.work_s or o.job.work_s < 1 for o in outcomes)


@pytest.mark.parametrize("mode", KILL_MODES + SOFT_MODES)
def test_machine_never_overcommitted(mode):
    outcomes = simulate(random_queue(random.Random(9), 300, 8), procs=8, **mode)
    events = sorted([(o.start_s, o.job.procs) for o in outcomes] + [(o.end_s, -o.job.procs) for o in outcomes],
                    key=lambda e: (e[0], e[1]))
    used = 0
    for _, delta in events:
        used += delta
        assert used <= 8


@pytest.mark.parametrize("bad", [dataclasses.replace(job(0, 0, 5, 1, 1)), dataclasses.replace(job(0, 0, 0, 1, 1))])
def test_job_that_cannot_fit_is_refused(bad):
    with pytest.raises(ValueError, match="processors"):
        simulate([bad], procs=4)


@pytest.mark.parametrize("bad", ["latest", "24", "24.11.x", "24.13", "2411", "", " 24.11.5.1"])
def test_malformed_release_is_refused(bad):
    with pytest.raises(ValueError, match="a Slurm release number"):
        simulate(BLOCKED, procs=4, slurm=bad)


@pytest.mark.parametrize("name", ["scheduling.easy", "lab.scheduling.workload", "lab.scheduling.scores",
                                  "lab.scheduling.replay", "lab.scheduling.hindsight"])
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.daemon.{name}")
    failures, tried = doctest.testmod(module)
    assert tried > 0 and failures == 0
