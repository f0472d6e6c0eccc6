"""The one way the daemon and its commands run an external program (``sacct``, ``scontrol``).

No shell, a timeout, the duration logged, and one error (:class:`~.errors.CommandError`)
that carries the command, its exit code and what it wrote. The Slurm hooks under
``slurm_plugin/`` keep their own runner: they run on the controller without this package.
"""
from __future__ import annotations

import logging
import subprocess
import time

from .errors import CommandError

logger = logging.getLogger(__name__)


def run_command(cmd: list[str], *, timeout: float) -> str:
    """Run ``cmd`` (no shell) and return its stdout; CommandError on failure or timeout."""
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              errors="replace")
    except FileNotFoundError as error:
        raise CommandError(cmd, None, message=f"{cmd[0]} not found (is slurm-client installed?)") from error
    except subprocess.TimeoutExpired as error:
        raise CommandError(cmd, None, message=f"no answer within {timeout:.0f} s") from error
    logger.info("%s: exit %d in %.2f s", " ".join(cmd), done.returncode, time.monotonic() - started)
    if done.returncode != 0:
        raise CommandError(cmd, done.returncode, done.stdout, done.stderr)
    return done.stdout
