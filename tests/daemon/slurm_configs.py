"""Real ``scontrol show config`` outputs for the tests of the daemon's controller reading."""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def show_config(release: str = "24.11.5", parameters: str | None = None) -> str:
    """A real ``scontrol show config`` (tests/data/slurm/SOURCES.md): 22.05.8's for releases
    before 23.11, 24.11.5's otherwise, with SLURM_VERSION edited to ``release`` (the releases
    this host cannot run) and SchedulerParameters to ``parameters`` (None: as captured, with
    time_min_as_soft_limit)."""
    captured = "22.05.8" if release < "23.11" else "24.11.5"
    lines = []
    for line in (DATA / f"show_config_{captured}.txt").read_text().splitlines():
        key = line.partition("=")[0].strip()
        if key == "SLURM_VERSION":
            line = f"SLURM_VERSION           = {release}"
        elif key == "SchedulerParameters" and parameters is not None:
            line = f"SchedulerParameters     = {parameters}"
        lines.append(line)
    return "\n".join(lines) + "\n"
