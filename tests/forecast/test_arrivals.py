"""The forecast's arrivals model (issue #41): later submissions drawn from the recent ones.

Never from after the picture, bounded, deterministic per seed; a queue where a later job
backfills into the window Slurm's limits leave gets a later, wider forecast; the replay's
snapshots carry only submissions made before them; the daemon's memory of what it saw appear
is bounded; the worker's wire carries it."""
import math
import random

import pytest

from hpcpredict.daemon.errors import InvalidRequest
from hpcpredict.daemon.forecast import QueuedJob, QueueSnapshot, RuntimeBelief
from hpcpredict.daemon.forecast import worker
from hpcpredict.daemon.forecast.recent import RecentSubmissions
from hpcpredict.daemon.forecast.simulate import (ARRIVAL_BLOCK_S, ARRIVAL_HORIZON_S, ARRIVAL_WINDOW_S, MAX_ARRIVALS,
                                                 MAX_RECENT, draw_arrivals, forecast_start, forecast_starts)

NOW = 1_000_020.0
DAY = 24 * 3600.0


def job(job_id, cpus, limit, submit, belief=None, start=None, rank=0, user="ann"):
    return QueuedJob(job_id, user, "batch", cpus, limit, None, submit, start, rank, belief)


def test_arrivals_never_come_from_after_the_picture_and_keep_each_jobs_shape():
    rng = random.Random(1)
    before = [job(f"b{i}", 1 + i % 3, 600.0, NOW - rng.uniform(0, DAY)) for i in range(200)]
    after = [job(f"late{i}", 4, 900.0, NOW + rng.uniform(1, DAY)) for i in range(50)]
    seen = set()
    for seed in range(20):
        for at, arrival in draw_arrivals(before + after, NOW - DAY, NOW, random.Random(seed)):
            assert NOW < at < NOW + ARRIVAL_HORIZON_S
            assert arrival.submit_s <= NOW and not arrival.job_id.startswith("late")
            seen.add(arrival.job_id)
    assert len(seen) > 150                      # the bootstrap does draw from the whole window
    # and the forecast refuses a recent job from after the picture outright
    picture = QueueSnapshot(NOW, 4, "hard_end", (job("p", 4, 600.0, NOW - 10),), recent=tuple(after[:1]),
                            recent_from_s=NOW - DAY)
    with pytest.raises(InvalidRequest, match="after the picture"):
        forecast_starts(picture)


def test_arrivals_keep_their_offset_in_the_block_and_only_the_watched_span_counts():
    # one job 100 s into the last hour's block; watched for one hour only: every run draws that block
    recent = [job("x", 1, 60.0, NOW - ARRIVAL_BLOCK_S + 100)]
    arrivals = draw_arrivals(recent, NOW - ARRIVAL_BLOCK_S, NOW, random.Random(0))
    assert [at - NOW for at, _ in arrivals[:3]] == [100, 100 + ARRIVAL_BLOCK_S, 100 + 2 * ARRIVAL_BLOCK_S]
    assert len(arrivals) == ARRIVAL_HORIZON_S // ARRIVAL_BLOCK_S
    assert draw_arrivals(recent, None, NOW, random.Random(0)) == []       # not watched: none
    assert draw_arrivals(recent, NOW, NOW, random.Random(0)) == []        # watched since now: none
    # a span shorter than a block is its own block: 20 minutes watched, the job 5 minutes in
    short = draw_arrivals([job("y", 1, 60.0, NOW - 900)], NOW - 1200, NOW, random.Random(0))
    assert [at - NOW for at, _ in short[:2]] == [300, 1500]


def test_arrivals_are_bounded_and_deterministic_per_seed():
    rng = random.Random(2)
    crowd = [job(f"c{i}", 1, 60.0, NOW - rng.uniform(0, DAY)) for i in range(MAX_RECENT)]
    once = draw_arrivals(crowd, NOW - DAY, NOW, random.Random(7))
    assert len(once) == MAX_ARRIVALS
    assert once == draw_arrivals(crowd, NOW - DAY, NOW, random.Random(7))
    assert once != draw_arrivals(crowd, NOW - DAY, NOW, random.Random(8))
    picture = QueueSnapshot(NOW, 4, "hard_end", (job("p", 4, 600.0, NOW - 10),),
                            recent=tuple(crowd) + (job("one-more", 1, 60.0, NOW - 5),), recent_from_s=NOW - DAY)
    with pytest.raises(InvalidRequest, match=f"more than the {MAX_RECENT}"):
        forecast_starts(picture)


def _backfill_window_queue(recent, recent_from_s):
    # R holds 2 of 4 CPUs, planned to its 1000 s limit but ending at +200 (believed exactly); the
    # head P needs all 4: reserved at R's limit, it really starts at +200. A 2-CPU, 600 s job
    # submitted at +100 fits before that reservation: it backfills and P starts only at +700.
    return QueueSnapshot(NOW, 4, "hard_end",
                         (job("r", 2, 1000.0, NOW - 60, RuntimeBelief(260.0, 0.0), start=NOW - 60),
                          job("p", 4, 1000.0, NOW - 30, RuntimeBelief(500.0, 0.0))),
                         recent=tuple(recent), recent_from_s=recent_from_s)


def test_a_later_job_that_backfills_ahead_delays_and_widens_the_forecast():
    certain = RuntimeBelief(600.0, 0.0)
    without = forecast_starts(_backfill_window_queue((), None))["p"]
    assert without.low80_start_s == without.median_start_s == without.high80_start_s == NOW + 200
    # every hour of the last day had such a job 100 s in: every run has one at +100
    hourly = [job(f"h{k}", 2, 600.0, NOW - (k + 1) * ARRIVAL_BLOCK_S + 100, certain) for k in range(24)]
    always = forecast_starts(_backfill_window_queue(hourly, NOW - DAY))["p"]
    assert always.low80_start_s == always.median_start_s == always.high80_start_s == NOW + 700
    assert always.slurm_start_s == without.slurm_start_s            # Slurm's method models no arrival
    # every other hour: about half the runs have it, the interval spans both outcomes
    some = forecast_starts(_backfill_window_queue(hourly[::2], NOW - DAY), runs=64)["p"]
    assert some.low80_start_s == NOW + 200 and some.high80_start_s == NOW + 700
    # a job submitted only after the picture would change nothing: it is refused, never drawn
    assert forecast_start(_backfill_window_queue(hourly, NOW - DAY), "p") == always


def test_the_replays_snapshots_carry_only_earlier_submissions(monkeypatch):
    from hpcpredict.daemon.lab.scheduling import forecast as lab
    from hpcpredict.daemon.records import JobRecord
    trace = [JobRecord(str(i), f"u{i % 3}", 120.0 * i, runtime_s=900.0, requested_time_s=3600.0,
                       requested_procs=2, end_time=120.0 * i + 900.0) for i in range(60)]
    pictures = []
    real = lab.forecast_start

    def spy(snapshot, job_id, **options):
        pictures.append(snapshot)
        return real(snapshot, job_id, **options)

    monkeypatch.setattr(lab, "forecast_start", spy)
    scores = lab.evaluate_forecast(trace, procs=4, runs=4)
    assert scores["n"] > 10 and scores["arrivals"] is True and pictures
    for picture in pictures:
        assert picture.recent and picture.recent_from_s == 0.0      # the trace begins at 0, within a day
        assert all(j.submit_s <= picture.taken_s for j in picture.recent)
        # every earlier submission is there (the window is a day, the trace two hours)
        assert len(picture.recent) == sum(1 for r in trace if r.submit_time <= picture.taken_s)
    pictures.clear()
    assert lab.evaluate_forecast(trace, procs=4, runs=4, arrivals=False)["arrivals"] is False
    assert all(not p.recent and p.recent_from_s is None for p in pictures)


def _picture(at, *jobs):
    return QueueSnapshot(at, 8, "hard_end", tuple(jobs))


def test_the_daemons_memory_of_new_submissions_is_bounded_by_age_and_count():
    seen = RecentSubmissions(window_s=3600.0, max_jobs=3)
    assert seen.observe(_picture(0.0, job("1", 1, 60.0, -50.0)), {"1"}).recent == ()
    # "2" is new; "1" is not (there at the first read); "3" claims a submit before watching began
    later = seen.observe(_picture(30.0, job("1", 1, 60.0, -50.0), job("2", 1, 60.0, 20.0, start=25.0),
                                  job("3", 1, 60.0, -10.0)), {"1", "2", "3"})
    assert [j.job_id for j in later.recent] == ["2"] and later.recent_from_s == 0.0
    assert later.recent[0].start_s is None          # remembered as a submission, not as running
    # gone from the queue, still remembered; at most 3, the oldest dropped and the span moved on
    more = seen.observe(_picture(90.0, *(job(str(i), 1, 60.0, 40.0 + i) for i in range(4, 8))),
                        {str(i) for i in range(4, 8)})
    assert [j.job_id for j in more.recent] == ["5", "6", "7"] and more.recent_from_s == 45.0
    # older than the window: forgotten
    assert seen.observe(_picture(3700.0), set()).recent == ()


def test_the_workers_wire_carries_the_recent_submissions():
    picture = _backfill_window_queue([job("h", 2, 600.0, NOW - 3500, RuntimeBelief(600.0, 0.0))], NOW - DAY)
    snapshot, runs, extra = worker.decode_request(worker.encode(picture, 8))
    assert snapshot == picture and runs == 8 and extra is None
    # a request from before the model (no recent keys) still decodes: no arrivals
    old = worker.encode(QueueSnapshot(NOW, 4, "hard_end", picture.jobs), 8).replace(', "recent": [], "recent_from_s": null', "")
    assert "recent" not in old
    assert worker.decode_request(old)[0] == QueueSnapshot(NOW, 4, "hard_end", picture.jobs)



# ---------------------------------------------------------------- the interval's calibration
from hpcpredict.daemon.forecast import StartForecast  # noqa: E402
from hpcpredict.daemon.forecast.calibration import MIN_SCORES, FirstForecasts, IntervalCalibration  # noqa: E402


def _too_narrow(rng, taken):
    # the runs say wait 1000 s, interval 800-1200 s; the truth is log-normal around it, far wider
    forecast = StartForecast("j", taken + 1000.0, taken + 800.0, taken + 1200.0, None, 32)
    return forecast, taken + 1000.0 * math.exp(rng.gauss(0.0, 0.8))


def test_calibration_brings_a_too_narrow_interval_to_80_percent_and_needs_enough_scores():
    rng = random.Random(4)
    calibration = IntervalCalibration()
    forecast, _ = _too_narrow(rng, 0.0)
    for _ in range(MIN_SCORES - 1):
        earlier, start = _too_narrow(rng, 0.0)
        calibration.add(earlier, taken_s=0.0, start_s=start)
    assert calibration.adjust(forecast, 0.0) == forecast             # too few: as the runs give it
    for _ in range(1000):
        earlier, start = _too_narrow(rng, 0.0)
        calibration.add(earlier, taken_s=0.0, start_s=start)
    fresh = [_too_narrow(rng, 5e5) for _ in range(2000)]
    raw = sum(f.low80_start_s <= s <= f.high80_start_s for f, s in fresh) / len(fresh)
    adjusted = [calibration.adjust(f, 5e5) for f, _ in fresh]
    covered = sum(a.low80_start_s <= s <= a.high80_start_s for a, (_, s) in zip(adjusted, fresh)) / len(fresh)
    assert raw < 0.3 and 0.75 <= covered <= 0.85
    assert all(a.median_start_s == f.median_start_s and a.low80_start_s >= 5e5 for a, (f, _) in zip(adjusted, fresh))


def test_the_replays_calibration_uses_only_starts_before_each_forecast():
    from hpcpredict.daemon.lab.scheduling.forecast import calibrated
    rng = random.Random(5)
    rows = []
    for i in range(400):
        forecast, start = _too_narrow(rng, 100.0 * i)
        rows.append((100.0 * i, start, forecast))
    once = calibrated(rows)
    # change every start that comes after t = 20,000 s: the forecasts made before then are the same
    changed = [(now, start if start <= 20_000 else start + 1e6, f) for now, start, f in rows]
    again = calibrated(changed)
    early = [i for i, (now, _, _) in enumerate(rows) if now <= 20_000]
    assert early and all(once[i][2] == again[i][2] for i in early)
    assert once[-1][2] != again[-1][2]                   # and the later ones did learn from them


def test_the_daemons_first_forecasts_are_scored_once_their_job_runs():
    first = FirstForecasts(IntervalCalibration(min_scores=1))
    pend = job("p", 1, 600.0, NOW - 10)
    f0 = StartForecast("p", NOW + 100, NOW + 50, NOW + 150, None, 32)
    assert first.observe(QueueSnapshot(NOW, 4, "hard_end", (pend,)), {"p": f0}) == {"p": f0}
    # a later read's forecast of it is not its first: still scored against f0 (start at +1100: 1000 s late)
    later = StartForecast("p", NOW + 400, NOW + 390, NOW + 410, None, 32)
    first.observe(QueueSnapshot(NOW + 300, 4, "hard_end", (pend,)), {"p": later})
    assert len(first.calibration) == 0
    ran = QueueSnapshot(NOW + 1200, 4, "hard_end", (job("p", 1, 600.0, NOW - 10, start=NOW + 1100),
                                                   job("q", 1, 600.0, NOW + 1000)))
    fq = StartForecast("q", NOW + 1300, NOW + 1250, NOW + 1350, None, 32)
    out = first.observe(ran, {"q": fq})
    assert len(first.calibration) == 1
    # f0's start was (1100 - 150) / 100 = 9.5 waits past its high end: q's high end moves 9.5 x 100 s
    assert out["q"].high80_start_s == NOW + 1350 + 950 and out["q"].median_start_s == fq.median_start_s
    first.observe(QueueSnapshot(NOW + 1300, 4, "hard_end", ()), {})
    assert len(first.calibration) == 1 and first._first == {}      # gone from the queue: forgotten


def test_the_engine_submits_arrivals_at_the_tail_and_stops_once_the_picture_has_started():
    from hpcpredict.daemon.scheduling import SimJob, Started, run_forward
    r = Started(SimJob(9, "r", NOW - 60, 2, 260.0, 1000.0, 1000.0), NOW - 60, 1000.0)   # ends at +200
    p = SimJob(0, "p", NOW, 4, 300.0, 600.0, 600.0)
    early = SimJob(1, "+0", NOW + 10, 2, 100.0, 200.0, 200.0)      # fits before p's reservation: backfills
    later = SimJob(2, "+1", NOW + 5000, 2, 100.0, 200.0, 200.0)    # after p started: never run
    outcomes = run_forward(NOW, [r], [p], 4, "hard_end", arrivals=[later, early])
    assert [(o.job.job_id, o.start_s, o.backfilled) for o in outcomes] == [("+0", NOW + 10, True), ("p", NOW + 200, False)]
    with pytest.raises(ValueError, match="submitted after"):
        run_forward(NOW, [], [p], 4, "hard_end", arrivals=[SimJob(1, "+0", NOW, 2, 100.0, 200.0, 200.0)])


def test_the_keeper_sends_what_it_saw_appear_to_the_forecasts_process():
    # the real worker process; squeue is a stand-in printing two reads: job 11 appears at the second
    import time
    from types import SimpleNamespace
    from hpcpredict.daemon.commands import run_command
    from hpcpredict.daemon.config import ForecastConfig
    from hpcpredict.daemon.forecast.keeper import ForecastKeeper
    now = int(time.time())
    first = f"10|RUNNING|ann|batch|4|1:00:00|0:00|{now - 600}|{now - 500}|4294901759|\n"
    reads, requests = [], []

    def run(argv, **options):
        if options.get("input") is not None:
            requests.append(worker.decode_request(options["input"])[0])
            return run_command(argv, **options)
        reads.append(time.time())
        if len(reads) == 1:
            return first
        # submitted between the two reads (whole seconds, as squeue prints them)
        return first + f"11|PENDING|bob|batch|4|30:00|0:00|{int(time.time())}|0|4294901758|\n"

    keeper = ForecastKeeper(ForecastConfig(), facts=lambda: SimpleNamespace(total_cpus=4, rule="hard_end", why=""),
                            belief_of=lambda job: None, run=run)
    keeper.refresh()
    time.sleep(1.1)
    keeper.refresh()
    assert keeper.error == "" and [r.recent for r in requests][0] == ()
    assert [j.job_id for j in requests[1].recent] == ["11"] and requests[1].recent_from_s == requests[0].taken_s
    assert "11" in keeper.latest().forecasts
