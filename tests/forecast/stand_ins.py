"""Stand-ins for squeue and scontrol that print real captures (tests/data/slurm, SOURCES.md): the
daemon runs them exactly as it runs Slurm's (daemon/commands.py); no controller runs in these tests."""
from __future__ import annotations

from pathlib import Path

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.server import Daemon

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


def stand_in_settings(folder: Path, queue: Path = DATA / "squeue_forecast_22.05.txt") -> dict[str, str]:
    """The stand-ins made in ``folder`` and the daemon's settings that name them (its controller's
    configuration command and its forecast's squeue)."""
    bin_dir = slurm_stand_ins(folder, queue)
    return {"HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND": f"{bin_dir}/scontrol show config",
            "HPCPREDICT_FORECAST_SQUEUE_COMMAND": f"{bin_dir}/squeue"}


def stand_in_daemon(folder: Path, queue: Path = DATA / "squeue_forecast_22.05.txt", **forecast: str) -> Daemon:
    """A daemon built as hpcpredictd builds it (not started: no socket, no thread), in advise mode,
    reading the stand-ins' queue (``queue``) and controller; ``forecast``: ``[forecast]`` settings."""
    environ = {"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(folder / "data"),
               "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(folder),
               "HPCPREDICT_POLICY_MODE": "advise", "HPCPREDICT_MODELS_BUNDLED": "false",
               **stand_in_settings(folder / "bin", queue),
               **{f"HPCPREDICT_FORECAST_{key.upper()}": value for key, value in forecast.items()}}
    daemon = Daemon(load_config(None, environ=environ))
    daemon.service.reload()
    return daemon
