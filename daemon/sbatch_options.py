"""sbatch options, from the command line and from a script's ``#SBATCH`` lines.

Only what prediction needs is interpreted (size, time, names, distribution); sbatch's other
options are accepted and ignored, as sbatch itself would accept them, and a word that is no
sbatch option (a typo: ``--tme``) is named in ``SbatchOptions.warnings``, since the answer was
made without it. Command-line options override the script's directives, as in sbatch.

>>> opts = parse_sbatch(b"#!/bin/bash\\n#SBATCH -N 2 --ntasks-per-node=4\\n#SBATCH -t 1:30:00\\nsrun ./a.out\\n", ["-J", "x"])
>>> (opts.nodes, opts.ntasks, opts.time_limit_s, opts.job_name)
(2, 8, 5400, 'x')
>>> parse_sbatch(b"#!/bin/sh\n", ["--mem=4G", "-o", "out", "--tme=1:00:00"]).warnings
['--tme=1:00:00 is not an sbatch option: ignored (predicted without it)']
"""
from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

from .errors import InvalidRequest
from .timefmt import parse_slurm_time


@dataclass
class SbatchOptions:
    nodes: int = 0
    ntasks: int = 0
    ntasks_per_node: int = 0
    cpus_per_task: int = 0
    time_limit_s: int = 0
    job_name: str = ""
    partition: str = ""
    account: str = ""
    qos: str = ""
    distribution: str = ""
    gpus: int = 0
    ignored: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


#: sbatch's options (22.05.8's ``sbatch --help``, tests/data/slurm/sbatch_help_22.05.8.txt, and
#: the man page's options it does not list): a word among them is sbatch's, read or not.
SBATCH_LONG = frozenset("""
account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container
contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency
distribution error exclude exclusive export export-file extra-node-info get-user-env gid gpu-bind gpu-freq gpus
gpus-per-node gpus-per-socket gpus-per-task gres gres-flags help hint hold ignore-pbs input job-name
kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network
nice no-kill no-requeue nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node
ntasks-per-socket open-mode output overcommit oversubscribe parsable partition power priority profile propagate
qos quiet reboot requeue reservation signal sockets-per-node spread-job switches test-only thread-spec
threads-per-core time time-min tmp tres-per-task uid usage use-min-nodes verbose version wait wait-all-nodes
wckey wrap x11 extra export-file
""".split())
SBATCH_SHORT = frozenset("ACDFGHJLMNOQSVWabcdehikmnopqstvwx")


def _not_sbatch(word: str) -> bool:
    """Whether ``word`` (an option-looking word predict did not read) is no sbatch option."""
    if word.startswith("--"):
        return word[2:].split("=", 1)[0] not in SBATCH_LONG
    return not (len(word) >= 2 and word[1] in SBATCH_SHORT)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InvalidRequest("sbatch options", message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(add_help=False, allow_abbrev=False)
    parser.add_argument("-N", "--nodes")
    parser.add_argument("-n", "--ntasks", type=int)
    parser.add_argument("--ntasks-per-node", type=int)
    parser.add_argument("-c", "--cpus-per-task", type=int)
    parser.add_argument("-t", "--time")
    parser.add_argument("-J", "--job-name")
    parser.add_argument("-p", "--partition")
    parser.add_argument("-A", "--account")
    parser.add_argument("-q", "--qos")
    parser.add_argument("-m", "--distribution")
    parser.add_argument("-G", "--gpus")
    return parser


MAX_WARNINGS = 8


def shown_word(word: str) -> str:
    return word if len(word) <= 60 else word[:57] + "..."


def directives(script: bytes) -> list[str]:
    """The ``#SBATCH`` arguments, read as sbatch does: until the first command line."""
    words: list[str] = []
    for raw in script.splitlines()[1:2000]:
        line = raw.decode("utf-8", "replace").strip()
        if not line or (line.startswith("#") and not line.startswith("#SBATCH")):
            continue
        if not line.startswith("#SBATCH"):
            break
        try:
            words.extend(shlex.split(line[len("#SBATCH"):], comments=True))
        except ValueError:
            words.extend(line[len("#SBATCH"):].split())
    return words


def parse_sbatch(script: bytes, argv: list[str] | tuple[str, ...] = ()) -> SbatchOptions:
    parser = _parser()
    values, ignored = parser.parse_known_args(directives(script))
    cli, ignored_cli = parser.parse_known_args(list(argv))
    for key, value in vars(cli).items():
        if value is not None:
            setattr(values, key, value)
    opts = SbatchOptions(ignored=[w for w in ignored + ignored_cli if w.startswith("-")])
    opts.warnings = [f"{shown_word(word)} is not an sbatch option: ignored (predicted without it)"
                     for word in opts.ignored if word != "-" and _not_sbatch(word)][:MAX_WARNINGS]
    if values.nodes:
        first = str(values.nodes).split("-")[0]
        if not first.isdigit() or int(first) <= 0:
            raise InvalidRequest("--nodes", f"not a node count: {values.nodes!r}")
        opts.nodes = int(first)
    opts.ntasks = values.ntasks or 0
    opts.ntasks_per_node = values.ntasks_per_node or 0
    opts.cpus_per_task = values.cpus_per_task or 0
    if values.time:
        opts.time_limit_s = parse_slurm_time(values.time, "--time")
    opts.job_name = values.job_name or ""
    opts.partition = values.partition or ""
    opts.account = values.account or ""
    opts.qos = values.qos or ""
    opts.distribution = (values.distribution or "").split(",")[0]
    if values.gpus:
        tail = str(values.gpus).split(":")[-1]
        opts.gpus = int(tail) if tail.isdigit() else 0
    if not opts.ntasks and opts.nodes and opts.ntasks_per_node:
        opts.ntasks = opts.nodes * opts.ntasks_per_node
    for name in ("ntasks", "ntasks_per_node", "cpus_per_task"):
        if getattr(opts, name) < 0:
            raise InvalidRequest(f"--{name.replace('_', '-')}", "must be positive")
    return opts
