"""Loaders for model kinds that have no package of their own."""
from __future__ import annotations

from pathlib import Path

from hpcpredict.daemon.errors import ModelArtifactError

TOPOLOGY_FILE = "topology.json"


def load_topology(folder: Path):
    """A placement model published as a model artifact (``topology.json`` inside)."""
    from hpcpredict.topology.placement import Placement

    path = Path(folder) / TOPOLOGY_FILE
    if not path.is_file():
        raise ModelArtifactError(f"{folder}: no {TOPOLOGY_FILE}")
    return Placement.load(path)
