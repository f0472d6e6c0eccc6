"""The local (hook) socket of this tree against an earlier revision's, interleaved A/B.

    python -m benchmarks run hook_ab [--baseline REV] [--rates 500 1000] [--rounds 3] [--seconds 8]
                                     [--env NAME=VALUE ...] [--transport hook|grpc]

Two ``hpcpredictd`` processes, phases interleaved (benchmarks/load/interleaved.py): ``current``
runs this tree, ``baseline`` the package as it was at ``REV`` (``git archive``, put first on
PYTHONPATH). Latency counts from each request's due time, as in the ``hook`` area. ``--env``
sets the same configuration on both daemons, e.g. soft mode with a controller that has the option:
``--env HPCPREDICT_POLICY_MODE=soft "HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND=cat
tests/data/slurm/show_config_24.11.5.txt"`` (a real 24.11.5 configuration: the release counts too). ``--transport grpc`` compares the gRPC path the
same way (the ``grpc`` area measures one tree only).
"""
from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from benchmarks.load.interleaved import interleaved_ab
from benchmarks.load.world import REPO

DESCRIPTION = "local (hook) socket of this tree vs an earlier revision, open loop, interleaved A/B"
#: the last revision with the thread-per-connection hook socket
BASELINE = "a4d2d4d"


def export(revision: str, into: Path) -> Path:
    """The package tree at ``revision`` as ``into/hpcpredict`` (compiled protobuf modules included)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", revision], check=True,
                             capture_output=True).stdout
    package = into / "hpcpredict"
    package.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(package)   # our own repository's archive
    return into


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run hook_ab")
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--env", nargs="+", default=[], metavar="NAME=VALUE",
                        help="environment (HPCPREDICT_* settings) of both daemons")
    parser.add_argument("--transport", choices=("hook", "grpc"), default="hook")
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.env)
    base = Path(tempfile.mkdtemp(prefix="hpd-hook-ab-"))
    settings = {"current": dict(env),
                "baseline": {**env, "PYTHONPATH": str(export(args.baseline, base / "baseline-src"))}}
    try:
        return {"baseline": args.baseline, "env": env, "transport": args.transport,
                **interleaved_ab(settings, args.rates, args.rounds, args.seconds, transport=args.transport)}
    finally:
        shutil.rmtree(base, ignore_errors=True)
