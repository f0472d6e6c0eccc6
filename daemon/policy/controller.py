"""The controller as it is (:class:`ControllerFacts`), and the mode the daemon answers with.

What a ``--time-min`` does depends on the Slurm release *and* on SchedulerParameters, both in
``scontrol show config`` (``SLURM_VERSION``, ``SchedulerParameters``):

- ``kill``: no ``time_min_as_soft_limit``, or a release before 23.11.0 whatever the
  configuration prints (22.05 and 23.02 accept the word silently and ignore it: measured on
  22.05.8, a job given a 4-minute "soft" ``--time-min`` ended ``TIMEOUT`` at 4:05);
- ``hard_end``: 23.11.0 - 25.05.3 with the option: a running soft job is planned at its hard
  end, so waiting jobs' reservations slip (measured on 24.11.5);
- ``soft_then_halfway``: 25.05.4 and later (25.11, 26.x) with the option: planned at its soft
  end, then halfway to its hard end at every pass (measured on 26.05.5);
- ``unknown``: the release cannot be read.

``[policy] mode``: ``bound`` and ``advise`` are taken as configured. ``soft`` (and ``auto``,
which means soft where possible, else advise) reaches a job only while the facts say
``hard_end`` or ``soft_then_halfway`` (:func:`resolve_mode`). The facts are read on a
background thread every ``controller_check_s`` (:class:`PolicyMode`), never on the request
path; until they are read, whenever they cannot be, and when they are stale, the mode is
``advise``. (The submission hook checks the release and its slurm.conf itself.)

>>> scheduler_parameters("SchedulerParameters     = time_min_as_soft_limit,bf_interval=2\\n")
'time_min_as_soft_limit,bf_interval=2'
>>> soft_limit_enabled("bf_interval=2,time_min_as_soft_limit"), soft_limit_enabled("(null)")
(True, False)
>>> parse_release("slurm-wlm 24.11.5"), parse_release("25.11"), parse_release("(null)")
((24, 11, 5), (25, 11, 0), None)
>>> [planning_rule(parse_release(r), True) for r in ("22.05.8", "23.11.0", "25.05.3", "25.05.4", "26.05.5")]
['kill', 'hard_end', 'hard_end', 'soft_then_halfway', 'soft_then_halfway']
>>> facts = ControllerFacts.from_show_config("SLURM_VERSION = 22.05.8\\nSchedulerParameters = time_min_as_soft_limit\\n")
>>> facts.rule, resolve_mode("auto", facts)
('kill', ('advise', 'Slurm 22.05.8 has no time_min_as_soft_limit (it came with 23.11.0): --time-min would be a kill limit'))
>>> resolve_mode("auto", ControllerFacts.for_release("24.11"))[0]
'soft'
"""
from __future__ import annotations

import logging
import re
import shlex
import time
from dataclasses import dataclass, replace
from typing import Callable

from ..commands import run_command
from ..errors import HpcPredictError
from ..refresher import OnChange, Refresher

logger = logging.getLogger(__name__)

SOFT_OPTION = "time_min_as_soft_limit"
SOFT_OPTION_SINCE = (23, 11, 0)         # the option exists from this release
SOFT_THEN_HALFWAY_SINCE = (25, 5, 4)    # _soft_job_end (SchedMD ticket 23426): 25.05.4, 25.11.0, ...
RULES = ("kill", "hard_end", "soft_then_halfway", "unknown")
SOFT_RULES = frozenset({"hard_end", "soft_then_halfway"})   # where a --time-min never kills
MAX_NODE_LINES = 1_000_000              # `scontrol -o show nodes`: one line a node; more is not a cluster

Release = tuple[int, int, int]
_RELEASE = re.compile(r"(?<![\d.])(\d{2})\.(\d{1,2})(?:\.(\d{1,3}))?(?![\d.])")


def release_text(release: Release | None) -> str:
    return "" if release is None else f"{release[0]}.{release[1]:02d}.{release[2]}"


def parse_release(text: str) -> Release | None:
    """The release in ``SLURM_VERSION``'s value, ``scontrol --version`` or a ``--slurm``
    argument ("22.05", "24.11.5", "slurm-wlm 26.05.5"); None when there is none. A missing
    micro release reads as 0 (the series' first)."""
    match = _RELEASE.search(text or "")
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def planning_rule(release: Release | None, soft_option: bool) -> str:
    """How this controller treats a ``--time-min`` (see the module's docstring)."""
    if not soft_option:
        return "kill"
    if release is None:
        return "unknown"
    if release < SOFT_OPTION_SINCE:
        return "kill"
    return "soft_then_halfway" if release >= SOFT_THEN_HALFWAY_SINCE else "hard_end"


def _why(release: Release | None, soft_option: bool, rule: str) -> str:
    shown = release_text(release)
    if rule == "kill" and soft_option:
        return (f"Slurm {shown} has no {SOFT_OPTION} (it came with {release_text(SOFT_OPTION_SINCE)}): "
                "--time-min would be a kill limit")
    if rule == "kill":
        return f"the controller runs without {SOFT_OPTION}" + (f" (Slurm {shown})" if shown else "")
    if rule == "unknown":
        return f"the controller's release is unknown (no SLURM_VERSION): {SOFT_OPTION} may be ignored"
    planned = "at its hard end" if rule == "hard_end" else "at its soft end, then halfway to its hard end"
    return f"Slurm {shown} runs with {SOFT_OPTION}: a running soft job is planned {planned}"


def scheduler_parameters(show_config: str) -> str | None:
    """The SchedulerParameters value in ``scontrol show config`` output; None when absent."""
    return _config_value(show_config, "SchedulerParameters")


def _config_value(show_config: str, name: str) -> str | None:
    for line in show_config.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


def soft_limit_enabled(parameters: str) -> bool:
    return SOFT_OPTION in (item.strip() for item in parameters.split(","))


def node_totals(show_nodes: str) -> tuple[int, int]:
    """(CPUs, nodes) in ``scontrol -o show nodes`` output (one ``NodeName=... CPUTot=N`` line a
    node; a node counted once); (0, 0) when none is readable."""
    cpus: dict[str, int] = {}
    for number, line in enumerate(show_nodes.splitlines()):
        if number >= MAX_NODE_LINES:
            break
        name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
        total = re.search(r"(?:^|\s)CPUTot=(\d{1,7})(?:\s|$)", line)
        if name and total:
            cpus[name.group(1)] = int(total.group(1))
    return sum(cpus.values()), len(cpus)


@dataclass(frozen=True)
class ControllerFacts:
    """What the daemon knows of the controller: its release, whether SchedulerParameters has
    ``time_min_as_soft_limit``, so its planning ``rule`` (:data:`RULES`), its size (0 = unknown)
    and ``why`` in a sentence. A value: the decision (:func:`~.decision.decide`) takes it as an
    argument, the daemon from :class:`PolicyMode`, the replay built for the release replayed."""

    release: Release | None = None
    soft_option: bool = False
    rule: str = "unknown"
    total_cpus: int = 0
    total_nodes: int = 0
    why: str = "controller configuration not read yet"

    @property
    def soft_ok(self) -> bool:
        """Whether a ``--time-min`` is soft here (never kills)."""
        return self.rule in SOFT_RULES

    @property
    def release_text(self) -> str:
        return release_text(self.release)

    @classmethod
    def of(cls, release: Release | None, soft_option: bool, *, total_cpus: int = 0,
           total_nodes: int = 0) -> "ControllerFacts":
        rule = planning_rule(release, soft_option)
        return cls(release, soft_option, rule, total_cpus, total_nodes, _why(release, soft_option, rule))

    @classmethod
    def for_release(cls, release: str, soft_option: bool = True, *, total_cpus: int = 0) -> "ControllerFacts":
        """The facts of a controller of ``release`` ("24.11", "26.05.5"), as the scheduling
        replay models it; ValueError when ``release`` names none."""
        parsed = parse_release(release)
        if parsed is None:
            raise ValueError(f"not a Slurm release: {release!r} (e.g. 22.05, 24.11.5, 26.05)")
        return cls.of(parsed, soft_option, total_cpus=total_cpus)

    @classmethod
    def from_show_config(cls, show_config: str, show_nodes: str = "") -> "ControllerFacts":
        """The facts in ``scontrol show config`` output (and ``scontrol -o show nodes``'s, for
        the size). Output without SchedulerParameters is not a controller's configuration: the
        rule is then ``unknown``."""
        parameters = scheduler_parameters(show_config)
        release = parse_release(_config_value(show_config, "SLURM_VERSION") or "")
        cpus, nodes = node_totals(show_nodes) if show_nodes else (0, 0)
        if parameters is None:
            return cls(release, False, "unknown", cpus, nodes, "no SchedulerParameters in the controller's configuration")
        return cls.of(release, soft_limit_enabled(parameters), total_cpus=cpus, total_nodes=nodes)


def resolve_mode(configured: str, facts: ControllerFacts) -> tuple[str, str]:
    """(mode, why): the ``[policy] mode`` to decide with on a controller of ``facts``."""
    if configured not in ("soft", "auto"):
        return configured, f"[policy] mode = {configured}"
    if facts.soft_ok:
        return "soft", facts.why
    return "advise", facts.why


def _run(command: list[str], timeout: float) -> str:
    return run_command(command, timeout=timeout)


def nodes_command(config_command: list[str]) -> list[str] | None:
    """``... scontrol [options] -o show nodes`` beside a ``... scontrol [options] show config``
    command (the same options, ``-M cluster``, and the same wrapper before it: ``ssh ctl``,
    ``chroot /srv/slurm``); None for any other command (the size stays unknown).

    >>> nodes_command(["scontrol", "-M", "c1", "show", "config"])
    ['scontrol', '-M', 'c1', '-o', 'show', 'nodes']
    >>> nodes_command(["chroot", "/srv/slurm", "/usr/bin/scontrol", "show", "config"])
    ['chroot', '/srv/slurm', '/usr/bin/scontrol', '-o', 'show', 'nodes']
    >>> nodes_command(["cat", "config.txt"]), nodes_command(["my-config", "show", "config"])
    (None, None)
    """
    if len(config_command) >= 3 and config_command[-2:] == ["show", "config"] and \
            any(word.rsplit("/", 1)[-1] == "scontrol" for word in config_command[:-2]):
        return config_command[:-2] + ["-o", "show", "nodes"]
    return None


class PolicyMode:
    """The controller's facts kept current off the request path: :meth:`current` and
    :meth:`facts` never block."""

    def __init__(self, policy, *, run: Callable[[list[str], float], str] = _run):
        self.configured = policy.mode
        self.interval_s = policy.controller_check_s
        self.command = shlex.split(policy.controller_config_command)
        self._run = run
        self._facts = ControllerFacts()
        self._read = False                     # whether _facts came from a read
        self._checked = 0.0
        self._mode_changed = OnChange()
        self._refresher = Refresher(self.refresh, interval_s=self.interval_s, name="policy-mode",
                                    what="policy mode", logger=logger)

    @property
    def needs_controller(self) -> bool:
        return self.configured in ("soft", "auto")

    def facts(self) -> ControllerFacts:
        """The controller's facts as last read; ``unknown`` once they are stale (three intervals
        without a read: a soft limit is not set on a guess)."""
        if self._read and time.monotonic() - self._checked > 3 * self.interval_s:
            return replace(self._facts, rule="unknown", why="controller configuration not re-read for too long")
        return self._facts

    def current(self) -> tuple[str, str]:
        """(mode, why): the mode to decide with now, and why it is that one."""
        return resolve_mode(self.configured, self.facts())

    def refresh(self) -> None:
        """Read the controller's configuration now (blocking: call it off the request path)."""
        try:
            show_config = self._run(self.command, 10.0)
        except (HpcPredictError, OSError) as error:
            facts = ControllerFacts(why=f"cannot read the controller's configuration: {error}")
        else:
            facts = ControllerFacts.from_show_config(show_config, self._show_nodes())
        self._facts, self._read, self._checked = facts, True, time.monotonic()
        resolved = self.current()
        if self._mode_changed(resolved):   # once per change, not every check
            logger.info("policy mode %s (configured %s; Slurm %s, rule %s): %s", resolved[0], self.configured,
                        facts.release_text or "unknown", facts.rule, resolved[1])

    def _show_nodes(self) -> str:
        command = nodes_command(self.command)
        if command is None:
            return ""
        try:
            return self._run(command, 10.0)
        except (HpcPredictError, OSError) as error:     # the size is optional: the rule is not
            logger.info("cluster size unknown: %s", error)
            return ""

    def start(self) -> "PolicyMode":
        if self.needs_controller:
            self._refresher.start()
        return self

    def stop(self) -> None:
        self._refresher.stop()
