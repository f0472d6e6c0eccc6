"""`hpcpredict predict JOB_SCRIPT [sbatch options]`: ask the daemon about one job."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict", help="predict a job script's runtime (asks the daemon)",
        description="Predict the runtime of JOB_SCRIPT as if submitted with the given sbatch options, "
                    "e.g. `hpcpredict predict job.sh -N 4 -t 2:00:00`. On a host without the daemon's local socket "
                    "(a login or compute node) it asks the controller's daemon at [client] remote "
                    "($HPCPREDICT_CLIENT_REMOTE), named by this host's munged.")
    add_job_arguments(parser, "script", "JOB_SCRIPT", sbatch_help="sbatch-style options, e.g. -N 4 -t 2:00:00")
    parser.set_defaults(handler=_predict)


def add_job_arguments(parser, dest: str, metavar: str, *, sbatch_help: str) -> None:
    """The job (``dest``: a job script), our own options and the sbatch options after it: the
    arguments of every command that asks about a job script as sbatch would submit it (``predict``,
    ``when``); :func:`split_own_options` and :func:`job_script_request` read them."""
    parser.add_argument(dest, metavar=metavar)
    _add_own_options(parser)
    parser.add_argument("sbatch", nargs=argparse.REMAINDER, metavar="SBATCH_OPTIONS", help=sbatch_help)


def _add_own_options(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the Estimate as JSON")
    parser.add_argument("--user", help="predict as this user (default: you)")
    parser.add_argument("--app", help="application key (default: from the script's launch line)")
    parser.add_argument("--risk", type=float, default=0.0, help="target P(job outlives the suggested limit)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the daemon")


def split_own_options(args) -> list[str]:
    """Options of ours given after JOB_SCRIPT land in the sbatch remainder: take them back.

    None of ours is an sbatch option, so whatever is left is passed to the sbatch parser.
    """
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _add_own_options(own)
    given, rest = own.parse_known_args([a for a in args.sbatch if a != "--"])
    defaults = vars(own.parse_args([]))
    for key, value in vars(given).items():
        if value != defaults[key]:
            setattr(args, key, value)
    return rest


#: What of a script is sent: job_submit.lua's max_script_bytes, so the answer is the one sbatch
#: would get, and the line stays within the local socket's limit for users ([daemon] user_line_bytes).
SENT_SCRIPT_BYTES = 65536


def build_request(script: bytes, sbatch_argv, *, user: str, app: str = "", risk: float = 0.0):
    from ..sbatch_options import parse_sbatch
    from ...proto.v1 import hpcpredict_pb2 as pb

    opts = parse_sbatch(script, sbatch_argv)
    sent = script[:SENT_SCRIPT_BYTES]
    return pb.JobRequest(
        job=pb.JobIdentity(user=user, account=opts.account, partition=opts.partition, job_name=opts.job_name,
                           application=app, qos=opts.qos),
        resources=pb.Resources(nodes=opts.nodes, ntasks=opts.ntasks, ntasks_per_node=opts.ntasks_per_node,
                               cpus_per_task=opts.cpus_per_task, distribution=opts.distribution, gpus=opts.gpus),
        time_limit_s=opts.time_limit_s, script=sent, script_bytes=len(script) if len(script) > len(sent) else 0,
        risk=risk), opts


def job_script_request(path: str, sbatch: list[str], args):
    """(the JobRequest, the sbatch options parsed) of the job script at ``path`` submitted with
    ``sbatch`` (what :func:`split_own_options` left), as ``args.user`` (default: you) with
    ``args.app`` and ``args.risk``."""
    import getpass

    from ..errors import HpcPredictError

    try:
        with open(path, "rb") as handle:
            script = handle.read(4 << 20)
    except OSError as error:
        raise HpcPredictError(f"cannot read job script {path}: {error.strerror}") from error
    return build_request(script, sbatch, user=args.user or getpass.getuser(), app=args.app or "", risk=args.risk)


def _predict(args) -> int:
    import sys

    from .common import config_of, estimate_lines, message_dict, print_json, print_lines
    from ..client import user_client

    request, opts = job_script_request(args.script, split_own_options(args), args)
    config = config_of(args)
    with user_client(args.socket, config, timeout=args.timeout) as client:
        estimate = client.predict(request)
    for warning in opts.warnings:
        print_lines([f"warning: {warning}"], file=sys.stderr)
    if args.json:   # the Estimate's keys, and what of the command line the answer was made without
        print_json({**message_dict(estimate), "warnings": list(opts.warnings)})
    else:
        print_lines(estimate_lines(estimate, opts.time_limit_s))
    return 0
