"""What Slurm fills in for a job that names no partition or account, and each partition's limits.

``sbatch`` without ``-p`` runs in the partition flagged ``Default=YES``, without ``-A`` under the
user's ``DefaultAccount``, and without ``--time`` under the partition's ``DefaultTime`` (else its
``MaxTime``); no ``--time`` may exceed ``MaxTime``. The submission hook reads all of it from
slurmctld (``part_list``, ``job_desc.default_account``); a ``hpcpredict predict`` request carries
only what the user typed. So that ``[policy] partitions``/``accounts`` (:mod:`.scope`) and the
partition's MaxTime decide for ``predict`` exactly as for the real submission, the daemon reads
them too, off the request path, and :meth:`SlurmDefaults.complete` fills what a request leaves
empty (never what it gives: the hook's values win):

- ``scontrol -o show partition``: one line a partition, as 22.05 prints it (24.11 and 26.05
  print the same words; their ``--json`` is not in 22.05);
- ``sacctmgr -nP show user format=User,DefaultAccount``: ``name|account`` a line.

>>> defaults = SlurmDefaults.from_output(
...     "PartitionName=batch Default=YES DefaultTime=NONE MaxTime=UNLIMITED State=UP\\n"
...     "PartitionName=short Default=NO DefaultTime=00:01:00 MaxTime=00:03:00 State=UP\\n",
...     "alice|phys\\nbob|\\n")
>>> defaults.complete(user="alice", account="", partition="")
('phys', 'batch', 0, 0)
>>> defaults.complete(user="bob", account="chem", partition="short")
('chem', 'short', 180, 60)
>>> defaults.complete(user="carol", account="", partition="short,batch", max_time_s=120)
('', 'short,batch', 120, 0)
"""
from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..commands import run_command
from ..errors import HpcPredictError
from ..refresher import OnChange, Refresher

logger = logging.getLogger(__name__)

MAX_PARTITIONS = 10_000      # `scontrol -o show partition` lines read; more is not a cluster
MAX_USERS = 1_000_000        # `sacctmgr show user` lines read
_WORD = re.compile(r"(?:^|\s)([A-Za-z]+)=(\S*)")
_DURATION = re.compile(r"(?:(\d{1,5})-)?(?:(\d{1,5}):)?(\d{1,5})(?::(\d{1,2}))?")


def duration_s(text: str) -> int:
    """A partition time as ``scontrol`` prints it ("UNLIMITED", "NONE", "30:00", "1-00:00:00",
    "00:03:00") in seconds; 0 = none or unlimited."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        return 0
    days, first, second, third = match.groups()
    if third is not None:       # [D-]H:M:S
        hours, minutes, seconds = int(first or 0), int(second), int(third)
    elif first is not None:     # [D-]H:M (with days) or M:S
        hours, minutes, seconds = (int(first), int(second), 0) if days else (0, int(first), int(second))
    else:                       # minutes, or days-hours
        hours, minutes, seconds = (int(second), 0, 0) if days else (0, int(second), 0)
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool = False
    max_time_s: int = 0          # 0 = unlimited
    default_time_s: int = 0      # 0 = none (a job without --time gets MaxTime)


def parse_partitions(show_partition: str) -> dict[str, Partition]:
    """``scontrol -o show partition`` output -> partitions by name."""
    partitions: dict[str, Partition] = {}
    for number, line in enumerate(show_partition.splitlines()):
        if number >= MAX_PARTITIONS:
            break
        words = dict(_WORD.findall(line))
        name = words.get("PartitionName", "")
        if name:
            partitions[name] = Partition(name, words.get("Default", "").upper() == "YES",
                                         duration_s(words.get("MaxTime", "")), duration_s(words.get("DefaultTime", "")))
    return partitions


def parse_default_accounts(show_users: str) -> dict[str, str]:
    """``sacctmgr -nP show user format=User,DefaultAccount`` output -> user -> default account."""
    accounts: dict[str, str] = {}
    for number, line in enumerate(show_users.splitlines()):
        if number >= MAX_USERS:
            break
        user, sep, account = line.strip().partition("|")
        if sep and user and account:
            accounts[user] = account.split("|", 1)[0]
    return accounts


@dataclass(frozen=True)
class SlurmDefaults:
    """The partitions and default accounts as last read (empty = not read, or not readable)."""

    partitions: Mapping[str, Partition] = field(default_factory=dict)
    default_accounts: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_output(cls, show_partition: str, show_users: str = "") -> "SlurmDefaults":
        return cls(parse_partitions(show_partition), parse_default_accounts(show_users))

    @property
    def default_partition(self) -> str:
        return next((p.name for p in self.partitions.values() if p.default), "")

    def complete(self, *, user: str, account: str, partition: str, max_time_s: int = 0,
                 default_time_s: int = 0) -> tuple[str, str, int, int]:
        """(account, partition, max_time_s, default_time_s) as Slurm would give the job: what is
        given is kept; an empty account is the user's default, an empty partition the default
        one; an unknown MaxTime is the smallest of the named partitions' (as the hook reads
        ``part_list``), an unknown DefaultTime that of the one partition named."""
        account = account or self.default_accounts.get(user, "")
        partition = partition or self.default_partition
        named = [self.partitions[name] for name in (n.strip() for n in partition.split(",")) if name in self.partitions]
        if not max_time_s:
            max_time_s = min((p.max_time_s for p in named if p.max_time_s), default=0)
        if not default_time_s and len(named) == 1 and "," not in partition:
            default_time_s = named[0].default_time_s
        return account, partition, max_time_s, default_time_s


def commands_beside(config_command: list[str]) -> tuple[list[str], list[str]] | None:
    """(``scontrol [options] -o show partition``, ``sacctmgr -nP show user ...``) beside a
    ``scontrol [options] show config`` command (``-M cluster`` carried to both); None for any
    other command (a site's own script: nothing to read these from)."""
    if len(config_command) >= 3 and config_command[-2:] == ["show", "config"] and \
            config_command[0].rsplit("/", 1)[-1] == "scontrol":
        options = config_command[1:-2]
        sacctmgr = config_command[0][:-len("scontrol")] + "sacctmgr"
        return ([*config_command[:-2], "-o", "show", "partition"],
                [sacctmgr, *options, "-nP", "show", "user", "format=User,DefaultAccount"])
    return None


class SlurmDefaultsCache:
    """:class:`SlurmDefaults` kept current off the request path (every ``controller_check_s``);
    :meth:`current` never blocks. Until read, or when unreadable, it fills nothing."""

    def __init__(self, policy, *, run: Callable[[list[str], float], str] | None = None):
        self.interval_s = policy.controller_check_s
        self.commands = commands_beside(shlex.split(policy.controller_config_command))
        self._run = run or (lambda command, timeout: run_command(command, timeout=timeout))
        self._defaults = SlurmDefaults()
        self._failures_changed = OnChange(last=())   # nothing to say until a read fails
        self._refresher = Refresher(self.refresh, interval_s=self.interval_s, name="slurm-defaults",
                                    what="Slurm's defaults for predict", logger=logger)

    def current(self) -> SlurmDefaults:
        return self._defaults

    def refresh(self) -> None:
        """Read the partitions and default accounts now (blocking: off the request path). A
        part that cannot be read keeps its last value."""
        if self.commands is None:
            return
        said: list[str] = []
        texts: list[str | None] = []
        for command in self.commands:
            try:
                texts.append(self._run(command, 10.0))
            except (HpcPredictError, OSError) as error:
                texts.append(None)
                said.append(f"{command[0]}: {error}")
        partitions = parse_partitions(texts[0]) if texts[0] is not None else self._defaults.partitions
        accounts = parse_default_accounts(texts[1]) if texts[1] is not None else self._defaults.default_accounts
        self._defaults = SlurmDefaults(partitions, accounts)
        if self._failures_changed(tuple(said)):   # once per change, not every check
            for line in said:
                logger.info("predict cannot resolve what sbatch fills in: %s", line)
        logger.debug("read %d partitions, %d default accounts", len(partitions), len(accounts))

    def start(self) -> "SlurmDefaultsCache":
        if self.commands is not None:
            self._refresher.start()
        return self

    def stop(self) -> None:
        self._refresher.stop()


__all__ = ["Partition", "SlurmDefaults", "SlurmDefaultsCache", "commands_beside", "duration_s",
           "parse_default_accounts", "parse_partitions"]
