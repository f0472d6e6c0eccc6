"""Pieces every CLI command shares: config, socket, printing an Estimate."""
from __future__ import annotations

import json
import os
import sys


def config_of(args):
    from ..config import load_config

    return load_config(args.config)


def writer_config_of(args):
    """The config of a command that writes the daemon's store or models (ingest, train,
    publish, refresh). Run by root on a data_dir another user owns (the daemon's), the command
    continues as that user, so every file it creates is the daemon's to read and write: a root
    cron line cannot leave a store or a model the daemon cannot open."""
    config = config_of(args)
    if os.geteuid() == 0:
        try:
            owner = os.stat(config.data_dir).st_uid
        except OSError:
            owner = 0
        if owner != 0:
            import pwd

            entry = pwd.getpwuid(owner)
            os.initgroups(entry.pw_name, entry.pw_gid)
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            os.umask(0o007)
            print(f"note: running as {entry.pw_name}, the owner of {config.data_dir}", file=sys.stderr)
    return config


def socket_of(args, config) -> str:
    from ..client import resolve_socket

    return resolve_socket(args.socket, config)


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def estimate_lines(estimate, requested_s: int = 0) -> list[str]:
    """An Estimate as a person reads it."""
    from ..timefmt import human, human_range, slurm_time

    lines = []
    head = f"Predicted runtime: {human(estimate.runtime_s)}"
    interval = estimate.interval
    if interval.high_s > interval.low_s > 0:
        cover = f" {interval.coverage:.0%} interval" if interval.coverage else " range of recent runs"
        head += f"  ({human_range(interval.low_s, interval.high_s)},{cover})"
    lines.append(head)
    if requested_s:
        lines.append(f"You requested:     {slurm_time(requested_s)}")
    lines.append(f"Suggested --time:  {slurm_time(estimate.suggested_time_limit_s)}"
                 f"   (P(run longer) about {estimate.risk:.0%})")
    if estimate.suggested_time_min_s:
        effect = ("a soft limit: planned with, never stopped before --time" if estimate.policy_mode == "soft"
                  else "backfill may lower --time to this")
        lines.append(f"Suggested --time-min: {slurm_time(estimate.suggested_time_min_s)}   ({effect})")
    if estimate.HasField("comm_time_s"):
        lines.append(f"Communication time: {human(estimate.comm_time_s)} (class {estimate.feature_class} features)")
    if estimate.node_advice:
        lines.append("Node-count advice:  nodes   runtime   node-hours  efficiency")
        for row in estimate.node_advice:
            mark = "  <- recommended" if row.recommended else ""
            lines.append(f"                    {row.nodes:5d}  {human(row.runtime_s):>9}  {row.node_hours:10.3g}"
                         f"  {row.efficiency:9.0%}{mark}")
    model = f"{estimate.model_name} {estimate.model_version}".strip()
    lines.append(f"Model: {model}{' (fallback: no trained model for this job)' if estimate.fallback else ''}"
                 f"; application: {estimate.application or '?'}")
    for text in estimate.explanation:
        lines.append(f"  - {text}")
    if estimate.prediction_id:
        lines.append(f"Prediction id: {estimate.prediction_id}")
    return lines


def ask_reload(socket_path: str):
    """ReloadModels over the local socket (an admin call); returns the ReloadReply, raises HpcPredictError."""
    from ..client import admin_client
    from ...proto.v1 import hpcpredict_pb2 as pb

    with admin_client(socket_path) as client:
        return client.call("ReloadModels", pb.ReloadRequest())


def reload_daemon(socket_path: str, published=None) -> int:
    """Ask a running daemon to reload and say so on stderr; the command's exit status.

    With ``published`` (the Artifact just published) the daemon must then serve that version:
    a daemon that refused or failed to load it (an unreadable file, a checksum) fails the
    command (1), with the daemon's reason. No daemon running is not a failure (0): it loads the
    model when it starts."""
    import sys

    from ..errors import HpcPredictError

    try:
        reply = ask_reload(socket_path)
    except HpcPredictError as error:
        print(f"note: daemon not reloaded ({error}); run `hpcpredict reload` once it runs", file=sys.stderr)
        return 0
    for error in reply.errors:
        print(f"refused by the daemon: {error}", file=sys.stderr)
    if published is not None and not any((m.kind, m.key, m.version) == (published.kind, published.key, published.version)
                                         for m in reply.models):
        print(f"error: the daemon does not serve the published {published.kind} model {published.key} "
              f"version {published.version}", file=sys.stderr)
        return 1
    if reply.errors:
        return 1
    print("daemon reloaded: the new history is in use", file=sys.stderr)
    return 0
