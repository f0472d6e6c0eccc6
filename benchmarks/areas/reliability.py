"""Reliability under attack: each finding before and after, then a soak with hostile clients.

    python -m benchmarks run reliability                        # attacks before/after + 10 min soak
    python -m benchmarks run reliability --soak-s 90            # a short soak
    python -m benchmarks run reliability --before ''            # this checkout only
    python -m benchmarks run reliability --only scripts hostlist --soak-s 0

Each attack runs on a fresh ``hpcpredictd`` (benchmarks/reliability/attacks.py), first on the
``--before`` commit's code (extracted with ``git archive``, nothing checked out) and then on
this checkout: RSS (and peak RSS), open descriptors, store growth, probe latency, fault
reports, file modes. The soak (benchmarks/reliability/soak.py) runs this checkout only: valid
Predict + ReportOutcome clients with hostile ones alongside for ``--soak-s`` seconds, RSS and
descriptors sampled, then kill -9 and a count of acknowledged outcomes lost.
"""
from __future__ import annotations

import argparse
import json
import shutil

from benchmarks.reliability import attacks
from benchmarks.reliability.soak import soak
from benchmarks.reliability.target import Target, source_of

DESCRIPTION = "attacks on bounds and faults, before/after, and a soak with hostile clients (RSS, fds, kill -9 losses)"

# name -> (function, needs a started target (True) or a factory (False), keyword arguments)
ATTACKS = {
    "scripts": (attacks.distinct_scripts, True),
    "environment": (attacks.big_environments, True),
    "stored": (attacks.stored_per_request, True),
    "hostlist": (attacks.padded_hostlist, True),
    "modes": (attacks.file_modes, True),
    "disk-full": (attacks.disk_full_faults, False),
    "models-dir": (attacks.deleted_models_dir, False),
    "publish": (attacks.publish_as_root, False),
    "flood": (attacks.predict_flood, True),
}


def _one(name: str, source) -> dict:
    function, started = ATTACKS[name]
    if not started:
        return function(lambda env, user=None: Target(source, env, user=user).start())
    target = Target(source).start()
    try:
        return function(target)
    except Exception as error:   # an attack that takes the daemon down is a result, not a crash of the run
        return {"error": f"{type(error).__name__}: {str(error)[:300]}", "daemon_alive": target.proc.poll() is None}
    finally:
        target.cleanup()


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run reliability", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="a4d2d4d", help="commit for the 'before' column ('' = skip; default a4d2d4d)")
    parser.add_argument("--only", nargs="*", choices=sorted(ATTACKS), help="attacks to run (default: all)")
    parser.add_argument("--soak-s", type=float, default=600.0, help="soak duration in seconds (0 = no soak)")
    options = parser.parse_args(args)
    names = options.only if options.only is not None else list(ATTACKS)
    sources = {"after": None}
    if options.before:
        sources = {"before": source_of(options.before), "after": None}
    table: dict = {}
    try:
        for name in names:
            for column, source in sources.items():
                table.setdefault(name, {})[column] = _one(name, source)
                print(json.dumps({"attack": name, column: table[name][column]})[:600], flush=True)
    finally:
        if sources.get("before") is not None:
            shutil.rmtree(sources["before"], ignore_errors=True)
    result: dict = {"before_commit": options.before, "attacks": table}
    if options.soak_s > 0:
        result["soak"] = soak(options.soak_s)
        print(json.dumps({k: v for k, v in result["soak"].items() if k != "samples"}), flush=True)
    result["headline"] = _headline(result)
    return result


def _headline(result: dict) -> dict:
    attacks_ = result["attacks"]
    line = {}

    def pick(name, key):
        row = attacks_.get(name, {})
        return {column: row[column].get(key) for column in ("before", "after") if column in row}

    if "scripts" in attacks_:
        line["rss_growth_mib_distinct_1mib_scripts"] = pick("scripts", "rss_growth_mib")
    if "stored" in attacks_:
        line["stored_kib_per_large_request"] = pick("stored", "stored_kib_per_request")
    if "hostlist" in attacks_:
        line["padded_hostlist_expand"] = pick("hostlist", "expand_outcome")
        line["padded_hostlist_seconds"] = pick("hostlist", "seconds")
        line["padded_hostlist_peak_rss_mib"] = pick("hostlist", "peak_rss_mib")
    if "flood" in attacks_:
        line["store_growth_mib_60s_predict_flood"] = pick("flood", "store_growth_mib")
        line["other_users_outcomes_stored_during_flood"] = pick("flood", "other_users_outcomes_stored")
    if "soak" in result:
        soak_ = result["soak"]
        line["soak"] = {"seconds": soak_["seconds"], "rss_mib": soak_["rss_mib"], "fds": soak_["fds"],
                        "lost_after_kill9": soak_["lost_after_kill9"],
                        "acknowledged_outcomes": soak_["acknowledged_outcomes"]}
    return line
