"""Which build is running: the release version and the commit it was built from.

``hpcpredict --version``, ``hpcpredictd --version`` and ``hpcpredict status`` print it, so an
admin can tell two installs of the same release apart (the version alone was 0.1.0 at every
commit). The commit comes from, in order:

1. ``build.json`` beside this module, written by ``setup.py``'s ``build_py`` when the wheel is
   built (``git rev-parse HEAD`` of the tree built, ``+dirty`` when it had uncommitted changes);
2. for a checkout run in place (the editable install: no ``build.json``), git in this module's
   own folder, read once;
3. otherwise ``unknown``, with why: a build from a tree without git metadata says so rather
   than guess.
"""
from __future__ import annotations

import argparse
import functools
import json
import subprocess
from pathlib import Path

from . import __version__

BUILD_FILE = "build.json"
UNKNOWN = "unknown"


def git_commit(folder: Path) -> str:
    """The commit checked out at ``folder`` (``+dirty`` with uncommitted changes to tracked
    files), or "" when it is not in a git work tree or git is missing."""
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+dirty" if dirty else "") if len(head) == 40 else ""


@functools.lru_cache(maxsize=1)
def build() -> dict[str, str]:
    """``{"version", "commit", "source"}``: source says where the commit was read
    (``wheel``: recorded at build time; ``checkout``: git now; ``none``)."""
    here = Path(__file__).resolve().parent
    try:
        recorded = json.loads((here / BUILD_FILE).read_text(encoding="utf-8"))
        commit = str(recorded.get("commit") or "")
        return {"version": __version__, "commit": commit or f"{UNKNOWN} (built from a tree without git metadata)",
                "source": "wheel"}
    except (OSError, ValueError, AttributeError):
        pass
    commit = git_commit(here)
    if commit:
        return {"version": __version__, "commit": commit, "source": "checkout"}
    return {"version": __version__, "commit": f"{UNKNOWN} (no {BUILD_FILE}, and git names no commit here)", "source": "none"}


def version_line(prog: str) -> str:
    """What ``--version`` prints."""
    info = build()
    return f"{prog} {info['version']} (commit {info['commit']})"


class VersionAction(argparse.Action):
    """``--version``: prints :func:`version_line` when used, not when the parser is built
    (reading the commit may run git, which no other command should wait for)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version and the commit of this build, then exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line(parser.prog))
        parser.exit()
