"""The one way the daemon and its commands run an external program (``sacct``, ``scontrol``,
``squeue``).

No shell, a timeout, the duration logged, and one error (:class:`~.errors.CommandError`)
that carries the command, its exit code and what it wrote. ``max_bytes`` bounds what is kept
of its output: a program that writes more is killed and refused, never read into memory whole
(the queue's ``squeue`` of a site with a million jobs). The Slurm hooks under
``slurm_plugin/`` keep their own runner: they run on the controller without this package.

>>> run_command(["printf", "abc"], timeout=5, max_bytes=3)
'abc'
>>> run_command(["printf", "abcd"], timeout=5, max_bytes=3)
Traceback (most recent call last):
...
hpcpredict.daemon.errors.CommandError: command failed: printf abcd: wrote more than 3 bytes
"""
from __future__ import annotations

import logging
import os
import selectors
import subprocess
import time
from typing import Mapping

from .errors import CommandError

logger = logging.getLogger(__name__)

_STDERR_KEPT = 4096        # of a bounded command's stderr: its last lines say what went wrong


def run_command(cmd: list[str], *, timeout: float, max_bytes: int | None = None,
                env: Mapping[str, str] | None = None, input: str | None = None) -> str:
    """Run ``cmd`` (no shell) and return its stdout; CommandError on failure, on timeout and
    when it writes more than ``max_bytes`` (None: no bound). ``env``: variables added to the
    daemon's environment (``SLURM_TIME_FORMAT``); ``input``: its stdin (a program of ours, whose
    output is bounded by what it is given: ``max_bytes`` is then None)."""
    started = time.monotonic()
    environment = dict(os.environ, **env) if env else None
    if max_bytes is None or input is not None:
        done = _run_whole(cmd, timeout, environment, input)
        stdout, stderr, returncode = done.stdout, done.stderr, done.returncode
    else:
        stdout, stderr, returncode = _run_bounded(cmd, timeout, max_bytes, environment)
    logger.info("%s: exit %d in %.2f s", " ".join(cmd), returncode, time.monotonic() - started)
    if returncode != 0:
        raise CommandError(cmd, returncode, stdout, stderr)
    return stdout


def _run_whole(cmd: list[str], timeout: float, environment, input: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              errors="replace", env=environment, input=input)
    except FileNotFoundError as error:
        raise CommandError(cmd, None, message=f"{cmd[0]} not found (is slurm-client installed?)") from error
    except subprocess.TimeoutExpired as error:
        raise CommandError(cmd, None, message=f"no answer within {timeout:.0f} s") from error


def _run_bounded(cmd: list[str], timeout: float, max_bytes: int, environment) -> tuple[str, str, int]:
    try:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=environment)
    except FileNotFoundError as error:
        raise CommandError(cmd, None, message=f"{cmd[0]} not found (is slurm-client installed?)") from error
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    why = ""
    assert process.stdout is not None and process.stderr is not None, "both are pipes"
    with process, selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, out)
        selector.register(process.stderr, selectors.EVENT_READ, err)
        while selector.get_map() and not why:
            left = deadline - time.monotonic()
            if left <= 0:
                why = f"no answer within {timeout:.0f} s"
                break
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if key.data is err and len(err) > 2 * _STDERR_KEPT:
                    del err[:-_STDERR_KEPT]
                if len(out) > max_bytes:
                    why = f"wrote more than {max_bytes} bytes"
                    break
        if why:
            process.kill()
            process.wait()
            raise CommandError(cmd, None, message=why)
        try:
            returncode = process.wait(max(0.001, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as error:
            process.kill()
            process.wait()
            raise CommandError(cmd, None, message=f"no answer within {timeout:.0f} s") from error
    return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), returncode
