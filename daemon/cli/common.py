"""Pieces every CLI command shares: config, socket, privileges, printing an Estimate."""
from __future__ import annotations

import json
import contextlib
import os
import pwd
import re
import sys

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.json_format import MessageToDict
from rich.console import Console

from ..client import SITE_SOCKET, reload_models, resolve_socket
from ..config import load_config
from ..errors import DaemonUnavailable, HpcPredictError
from ..timefmt import human, human_range, slurm_time


def config_of(args):
    return load_config(args.config)


def run_as_data_owner(config) -> None:
    """For a command that writes the daemon's store or models (ingest, train, publish,
    refresh): run by root on a data_dir another user owns (the daemon's), continue as that
    user, so every file it creates is the daemon's to read and write: a root cron line cannot
    leave a store or a model the daemon cannot open. Anyone else: nothing changes."""
    if os.geteuid() != 0:
        return
    try:
        owner = os.stat(config.data_dir).st_uid
    except OSError:
        return
    if owner == 0:
        return
    entry = pwd.getpwuid(owner)
    os.initgroups(entry.pw_name, entry.pw_gid)
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    os.umask(0o007)
    print(f"note: running as {entry.pw_name}, the owner of {config.data_dir}", file=sys.stderr)


@contextlib.contextmanager
def changing_models(config, what: str):
    """Around a command that changes the models the daemon serves (publish, rollback): a
    permission the caller lacks is one line saying who may, not a traceback."""
    try:
        yield
    except PermissionError as error:
        try:
            owner = pwd.getpwuid(os.stat(config.data_dir).st_uid).pw_name
        except (OSError, KeyError):
            owner = "the daemon's user"
        who = "root" if owner == "root" else f"root or {owner}"
        raise HpcPredictError(f"{what}: permission denied in {config.models.dir} ({error.strerror}): it changes "
                              f"the models the daemon serves; run it as {who}") from None


def socket_of(args, config) -> str:
    """The local socket an admin command talks to. On a host that reaches the daemon only
    remotely (``[client] remote`` set, no local socket: a login or compute node) it is not a
    missing socket that is wrong but the host: admin commands run on the daemon's host."""
    if not args.socket and not os.environ.get("HPCPREDICT_SOCKET") and config.client.remote:
        local = config.daemon.hook_socket
        if not (local and os.path.exists(local)) and not os.path.exists(SITE_SOCKET):
            command = getattr(args, "command", None) or "this command"
            raise DaemonUnavailable(
                f"{command} is an admin command: it runs on the daemon's host (the controller), not here. "
                f"This host reaches the daemon only remotely ([client] remote = {config.client.remote}), "
                f"which answers `hpcpredict predict` alone; log in to the controller, or pass --socket PATH")
    return resolve_socket(args.socket, config)


def shown(value) -> str:
    r"""``value`` as text safe to print on a terminal: every character that is not printable
    (C0/C1 controls such as ESC and CSI, DEL, bidirectional overrides, line breaks) is written
    as its Python escape (``\x1b``, ``\u202e``, ``\n``). Job names, applications, user names,
    paths and error messages come from users: raw, an escape sequence in one could clear an
    admin's terminal, retitle it or hide text. Every printer of such text uses this.

    >>> print(shown("lmp\x1b[2J\x1b]0;pwned\x07"), shown("a\u202eb\n"), shown("plain text"))
    lmp\x1b[2J\x1b]0;pwned\x07 a\u202eb\n plain text
    """
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def print_lines(lines, file=None) -> None:
    """Print ``lines`` (each one line of output), each through :func:`shown`."""
    print("\n".join(shown(line) for line in lines), file=file)


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def output_console():
    """A rich Console for stdout: on a terminal its width; piped or redirected, wide enough
    that no table is wrapped (rich would otherwise assume 80 columns)."""
    return Console() if sys.stdout.isatty() else Console(width=500)


def message_dict(message) -> dict:
    """A protobuf message for ``--json``: the .proto's field names, every field, and 64-bit
    integers (counts) as JSON numbers, not the strings protobuf's JSON mapping writes; so are
    the counts in a model's metadata (a string map: ``{"jobs": "28481"}`` -> ``{"jobs": 28481}``)."""
    return _counts_as_numbers(_int64_as_numbers(message, MessageToDict(message, preserving_proto_field_name=True,
                                                                       always_print_fields_with_no_presence=True)))


_COUNT = re.compile(r"-?[0-9]{1,18}")


def _counts_as_numbers(data):
    if isinstance(data, list):
        return [_counts_as_numbers(value) for value in data]
    if not isinstance(data, dict):
        return data
    out = {key: _counts_as_numbers(value) for key, value in data.items()}
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        out["metadata"] = {key: int(value) if isinstance(value, str) and _COUNT.fullmatch(value) else value
                           for key, value in metadata.items()}
    return out


def _int64_as_numbers(message, data: dict) -> dict:
    wide = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
            FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64}
    for field in message.DESCRIPTOR.fields:
        if field.name not in data:
            continue
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
        if field.type in wide:
            data[field.name] = [int(v) for v in data[field.name]] if repeated else int(data[field.name])
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not field.message_type.GetOptions().map_entry:
            value = getattr(message, field.name)
            data[field.name] = ([_int64_as_numbers(m, d) for m, d in zip(value, data[field.name])] if repeated
                                else _int64_as_numbers(value, data[field.name]))
    return data


def estimate_lines(estimate, requested_s: int = 0) -> list[str]:
    """An Estimate as a person reads it."""
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


def reload_daemon(socket_path: str, published=None) -> int:
    """Ask a running daemon to reload and say so on stderr; the command's exit status.

    With ``published`` (the Artifact just published) the daemon must then serve that version:
    a daemon that refused or failed to load it (an unreadable file, a checksum) fails the
    command (1), with the daemon's reason. No daemon running is not a failure (0): it loads the
    model when it starts."""
    try:
        reply = reload_models(socket_path)
    except HpcPredictError as error:
        print(shown(f"note: daemon not reloaded ({error}); run `hpcpredict reload` once it runs"), file=sys.stderr)
        return 0
    for refusal in reply.errors:
        print(shown(f"refused by the daemon: {refusal}"), file=sys.stderr)
    if published is not None and not any((m.kind, m.key, m.version) == (published.kind, published.key, published.version)
                                         for m in reply.models):
        print(f"error: the daemon does not serve the published {published.kind} model {published.key} "
              f"version {published.version}", file=sys.stderr)
        return 1
    if reply.errors:
        return 1
    if published is not None:
        print(f"daemon reloaded: it serves {published.kind} model {published.key} version {published.version}",
              file=sys.stderr)
    else:
        print("daemon reloaded: the new history is in use", file=sys.stderr)
    return 0
