"""The real-Slurm replay's own bookkeeping (benchmarks/areas/slurm_replay.py), without a cluster:
the history it ingests, and how it scores slurmctld's job records."""
import time

from benchmarks.areas import slurm_replay
from hpcpredict.daemon.lab.history.sacct import read_sacct_csv
from hpcpredict.daemon.lab.history.traces import read_trace


def test_minutes_round_up_to_at_least_one():
    assert [slurm_replay.minutes(s) for s in (0.5, 60, 61, 3600)] == [1, 1, 2, 60]


def test_history_ended_before_the_window_and_reads_back_compressed(tmp_path):
    history, window = slurm_replay.select_window(read_trace(slurm_replay.TRACE), 18940, 20)
    assert len(window) == 20 and history
    assert max(r.end_time for r in history) <= window[0].submit_time
    origin = time.time()
    slurm_replay.write_history_csv(history, tmp_path / "h.csv", origin, window[0].submit_time, 60.0)
    records = read_sacct_csv((tmp_path / "h.csv").read_text())
    assert len(records) == len(history)
    assert all(r.end_time <= origin + 1e-3 for r in records)             # all ended before the replay
    assert records[-1].user == f"kth{history[-1].user}"
    assert abs(records[-1].runtime_s - history[-1].runtime_s / 60.0) < 1e-2
    assert records[-1].requested_time_s == 60 * slurm_replay.minutes(history[-1].requested_time_s / 60.0)


def test_score_counts_kills_only_under_a_lowered_limit(tmp_path):
    lines = [
        "JobId=1 JobState=COMPLETED TimeLimit=5 SubmitTime=2026-01-01T00:00:00 StartTime=2026-01-01T00:00:10 EndTime=2026-01-01T00:01:10",
        "JobId=2 JobState=TIMEOUT TimeLimit=2 SubmitTime=2026-01-01T00:00:00 StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T00:02:20",
        "JobId=3 JobState=TIMEOUT TimeLimit=3 SubmitTime=2026-01-01T00:00:00 StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T00:03:20",
    ]
    path = tmp_path / "jobcomp.txt"
    path.write_text("JobId=9 JobState=COMPLETED\n")
    offset = path.stat().st_size
    path.write_text(path.read_text() + "\n".join(lines) + "\n")
    rows = slurm_replay.parse_jobcomp(path, offset)
    assert sorted(rows) == ["1", "2", "3"]
    submitted = [{"job_id": str(i), "submitted_at": rows[str(i)] and slurm_replay._epoch("2026-01-01T00:00:00"),
                  "procs": 2, "runtime_s": 60.0, "limit_min": limit, "time_min_set": i == 2,
                  "time_limit_set": False, "fallback": False} for i, limit in ((1, 5), (2, 5), (3, 3))]
    submitted.append({"job_id": "4", "submitted_at": slurm_replay._epoch("2026-01-01T00:00:00"), "procs": 1,
                      "runtime_s": 60.0, "limit_min": 1, "time_min_set": False, "time_limit_set": False,
                      "fallback": False})      # never started: cancelled at the cut
    cut = slurm_replay._epoch("2026-01-01T00:05:00")
    scores = slurm_replay.score(submitted, rows, cut, compress=10.0, procs=4)
    assert scores["killed"] == 1 and scores["timeouts"] == 2        # job 3 hit its own --time
    assert scores["shortened"] == 1 and scores["unfinished"] == 1 and scores["started"] == 3
    assert scores["mean_wait_s"] == (100.0 + 0 + 0 + 3000.0) / 4      # trace seconds (x10)


def test_policy_names_say_the_daemon_mode():
    assert slurm_replay.parse_policy("user") == (None, None)
    assert slurm_replay.parse_policy("hpcpredict@0.3") == ("bound", 0.3)
    assert slurm_replay.parse_policy("hpcpredict-soft") == ("soft", None)


def test_the_simulator_replays_the_window_compressed_as_submitted():
    history, window = slurm_replay.select_window(read_trace(slurm_replay.TRACE), 300, 30)
    first = slurm_replay.compressed(window[0], window[0].submit_time, 60.0, "x")
    assert first.submit_time == 0 and first.requested_time_s == 60 * slurm_replay.minutes(window[0].requested_time_s / 60)
    sim = slurm_replay.simulate_window(history, window, 60.0, "24.11", 100, ["hpcpredict-soft", "user", "hpcpredict@0.3"])
    assert sorted(sim) == ["hpcpredict-soft", "user"]          # a bound policy is not modelled
    assert sim["user"]["n"] == 30 and sim["user"]["shortened"] == 0
    assert sim["hpcpredict-soft"]["killed"] == 0               # a soft --time-min never kills on 24.11
