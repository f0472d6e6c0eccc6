"""The lean client the Slurm prolog/epilog scripts use to reach hpcpredictd.

Standard library only (``socket`` + ``json``), so a hook script starts in ~20 ms instead of the
~90 ms a grpc import costs, and it runs under the system ``/usr/bin/python3`` without the
project's virtualenv. It speaks the daemon's local socket (see
``hpcpredict.daemon.listeners.local_socket``): one JSON line out, one JSON line back.

This module is also the one place the hook scripts run Slurm commands (:func:`run_command`),
and it reads the hooks' shared settings file ``hpcpredict-hooks.conf`` (``key = value`` lines,
the same file ``job_submit.lua`` reads) from the directory the scripts are installed in.

Example::

    >>> settings = load_settings("/nonexistent")          # defaults when no file
    >>> settings["hook_socket"]
    '/run/hpcpredict/hook.sock'
    >>> call("Predict", {"job": {"user": "alice"}}, socket_path="/nonexistent.sock", timeout=0.1)
    Traceback (most recent call last):
    ...
    hookclient.HookError: connect /nonexistent.sock: [Errno 2] No such file or directory
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time

SETTINGS_FILE = "hpcpredict-hooks.conf"

#: Settings of the prolog/epilog scripts with their defaults (job_submit.lua has its own
#: copy of the keys it uses). Every key can be set in hpcpredict-hooks.conf.
DEFAULTS = {
    "hook_socket": "/run/hpcpredict/hook.sock",
    "slurm_conf": "",               # "" = Slurm's default; PrologSlurmctld has no SLURM_CONF
    "slurm_bin": "/usr/bin",        # where scontrol/squeue/sacct live (the prologs have no PATH)
    "prolog_budget_s": "2.0",       # hook call budget in PrologSlurmctld / EpilogSlurmctld
    "prolog_adjust_time_limit": "false",  # let the daemon lower a time limit the hook set (it decides, we apply)
    "max_time_limit_s": "31622400", # site cap (366 days); an estimate above it changes nothing
    "outcome_wait_s": "30",         # how long the epilog waits for sacct's final state (0 = never)
    "outcome_retry_s": "120",       # how long the epilog retries while the daemon is unreachable
    "enabled": "true",              # false: the submit hook and PrologSlurmctld do nothing (the off switch)
    "task_prolog_enabled": "true",
    "features_enabled": "true",     # TaskProlog exports HPCPREDICT_FEATURES_FILE, the epilog relays it
    "features_dir": "",             # "" = the job's working directory; else a shared directory
    "features_max_bytes": "65536",  # the epilog reads at most this much of a job's features file
    "features_max_lines": "1000",   # ... and at most this many lines
    "log_file": "",                 # "" = stderr (slurmctld logs it)
}


class HookError(Exception):
    """The daemon could not be reached or refused the call."""


class HookRefused(HookError):
    """The daemon answered and refused the request (bad input): retrying will not help."""


def load_settings(directory: str | None = None) -> dict:
    """DEFAULTS overridden by ``hpcpredict-hooks.conf`` in ``directory`` (default: this file's)."""
    settings = dict(DEFAULTS)
    path = os.path.join(directory or os.path.dirname(os.path.abspath(__file__)), SETTINGS_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if not line or line.startswith("#") or "=" not in line:
                    continue
                key, value = (part.strip() for part in line.split("=", 1))
                settings[key] = value
    except FileNotFoundError:
        pass
    return settings


def flag(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def call(method: str, request: dict, *, socket_path: str, timeout: float = 2.0) -> dict:
    """Send one request line, return the decoded ``response`` object; :class:`HookError` else."""
    deadline = time.monotonic() + timeout
    line = json.dumps({"method": method, "request": request}, separators=(",", ":")).encode() + b"\n"
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        try:
            conn.connect(socket_path)
        except OSError as error:
            raise HookError(f"connect {socket_path}: {error}") from error
        try:
            conn.sendall(line)
            chunks = []
            while True:
                conn.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
        except socket.timeout as error:
            raise HookError(f"no answer from {socket_path} within {timeout:.1f} s") from error
        except OSError as error:
            raise HookError(f"talking to {socket_path}: {error}") from error
    finally:
        conn.close()
    try:
        reply = json.loads(b"".join(chunks))
    except ValueError as error:
        raise HookError(f"bad reply from {socket_path}: {error}") from error
    if not isinstance(reply, dict) or reply.get("ok") is not True:
        raise HookRefused(f"daemon refused {method}: {reply.get('error') if isinstance(reply, dict) else reply!r}")
    response = reply.get("response")
    if not isinstance(response, dict):
        raise HookError(f"bad reply from {socket_path}: no response object")
    return response


def slurm_env(settings: dict) -> dict:
    """Environment for Slurm commands run from a prolog (which gets no PATH, no SLURM_CONF)."""
    env = dict(os.environ)
    env["PATH"] = f"{settings['slurm_bin']}:/usr/sbin:/usr/bin:/sbin:/bin"
    if settings.get("slurm_conf"):
        env["SLURM_CONF"] = settings["slurm_conf"]
    return env


def run_command(args: list[str], settings: dict, *, timeout: float = 10.0, stdin: bytes | None = None,
                environment: dict | None = None) -> bytes:
    """Run a Slurm command (no shell), return its stdout; :class:`HookError` on any failure.
    ``environment``: variables added for this command (e.g. SLURM_TIME_FORMAT)."""
    import subprocess  # only the scripts that run commands pay for this import (~15 ms)

    program = args[0] if os.path.isabs(args[0]) else os.path.join(settings["slurm_bin"], args[0])
    try:
        done = subprocess.run([program, *args[1:]], input=stdin, capture_output=True, timeout=timeout,
                              env={**slurm_env(settings), **(environment or {})}, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HookError(f"{' '.join(args)}: {error}") from error
    if done.returncode != 0:
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise HookError(f"{' '.join(args)}: {last[0]}")
    return done.stdout


def slurm_runner(settings: dict, *, timeout: float = 10.0):
    """``run(args, environment) -> stdout``: how ``slurmjob.read_job`` runs Slurm commands."""
    return lambda args, environment: run_command(args, settings, timeout=timeout, environment=environment)


def log(settings: dict, hook: str, message: str) -> None:
    """One line to ``log_file`` (or stderr, which slurmctld/slurmd log) - never raises. A line
    the file refuses (the hook's user may not write it) goes to stderr with the reason, so it
    lands in slurmctld's/slurmd's log instead of being lost."""
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {hook} job {os.environ.get('SLURM_JOB_ID', '?')}: {message}\n"
    path = settings.get("log_file")
    if path:
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(line)
            return
        except OSError as error:
            line = f"{line.rstrip()} (not written to log_file {path}: {error.strerror or error})\n"
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
