"""The models served together: one immutable :class:`ModelSet`, filled slot by slot by each
model kind's ``place`` (:mod:`.model_kinds`), swapped whole by the engine on reload and read by
the estimate sources (:mod:`.sources`).

Its own module so that the engine and the sources both name it without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from .registry import Artifact
from .scaling.advice import ScalingModel
from ..topology.placement import Placement

if TYPE_CHECKING:   # loaded by their model kinds (hpcpredict.daemon.model_kinds)
    from .comm.served import CommModelSet, CommRequest
    from .history.model import WalltimeModel
    from .runtime.served import ApplicationModels


@dataclass(frozen=True)
class ModelSet:
    """The models served together; each slot is filled by its model kind's ``place``."""

    walltime: WalltimeModel | None = None
    walltime_by_cluster: Mapping[str, WalltimeModel] = field(default_factory=dict)   # cluster -> its own
    runtime: ApplicationModels | None = None
    comm: Mapping[str, CommModelSet] = field(default_factory=dict)      # cluster key -> models
    # Resolved with the comm models, so a site without them never imports scipy.
    comm_request: type[CommRequest] | None = None
    scaling: Mapping[str, ScalingModel] = field(default_factory=dict)   # application -> model
    placement: Placement | None = None
    artifacts: tuple[Artifact, ...] = ()
    errors: tuple[str, ...] = ()
    # (kind, key) -> (artifact, model), so the next reload can keep a model whose new version is refused
    loaded: Mapping[tuple[str, str], tuple[Artifact, object]] = field(default_factory=dict)

    def walltime_for(self, cluster: str) -> WalltimeModel | None:
        """The walltime model of ``cluster``: its own when it has one, else the site's."""
        return self.walltime_by_cluster.get(cluster, self.walltime) if cluster else self.walltime
