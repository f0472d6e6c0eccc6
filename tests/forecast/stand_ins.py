"""Stand-ins for squeue and scontrol that print real captures (tests/data/slurm, SOURCES.md): the
daemon runs them exactly as it runs Slurm's (daemon/commands.py); no controller runs in these tests."""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def slurm_stand_ins(folder: Path, queue: Path = DATA / "squeue_forecast_22.05.txt") -> Path:
    """``folder`` (made) holding ``squeue`` (prints ``queue``) and ``scontrol`` (the real 22.05.8
    node list for ``show nodes``, its configuration otherwise)."""
    folder.mkdir()
    (folder / "squeue").write_text(f"#!/bin/sh\nexec cat {queue}\n")
    (folder / "scontrol").write_text(
        "#!/bin/sh\ncase \"$*\" in\n"
        f"  *'show nodes'*) exec cat {DATA / 'scontrol_show_nodes_22.05.txt'} ;;\n"
        f"  *) exec cat {DATA / 'show_config_22.05.8.txt'} ;;\nesac\n")
    for name in ("squeue", "scontrol"):
        (folder / name).chmod(0o755)
    return folder
