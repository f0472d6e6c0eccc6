"""A job without --time on a fresh install (advise mode, a partition without MaxTime) on the real
22.05.8 cluster: its output says no --time was given, never a 365-day request (issue #40,
finding 7: the prolog read the unlimited limit as `you requested --time=8760:00:00` and the
refined estimate as `predicted runtime 365.0 d`)."""
from __future__ import annotations

from .harness import poll
from .test_policy_release import own_daemon
from .test_policy_soft import PROBE, submit


def test_a_job_without_time_is_told_so(cluster, daemon):
    fresh = own_daemon(daemon, "advise-no-time", HPCPREDICT_POLICY_MODE="advise")
    try:
        cluster.set_hook_socket(fresh.hook_socket)
        cluster.write_script("softprobe.sh", PROBE)
        job_id, stderr = submit(cluster, "notime", "-N1", "softprobe.sh", "1", output="notime-%j.out")
        assert cluster.job(job_id)["TimeLimit"] == "UNLIMITED"
        cluster.wait_done(job_id, timeout=120)
        output = cluster.jobs / f"notime-{job_id}.out"
        poll(output.exists, 30, "the job's output file")
        text = output.read_text()
        lines = [line for line in text.splitlines() if line.startswith("[hpcpredict] ")]
        assert lines, text
        assert "no --time given (partition default/unlimited)" in text, text
        assert "8760" not in text and "365.0 d" not in text and "you requested" not in text, text
    finally:
        cluster.set_hook_socket(daemon.hook_socket)
        fresh.stop()
