"""Model kinds, registered by name: how each kind is loaded and where it serves.

A kind is a class registered with :func:`register_model_kind` (as ReFrame registers scheduler
backends with ``@register_scheduler``); :func:`get_model_kind` finds it by name and refuses an
unknown name with the list of the known ones. The registry (:mod:`hpcpredict.daemon.registry`)
asks a kind to ``load`` an artifact folder; the engine asks it to ``place`` the loaded model
into the slots of the :class:`~hpcpredict.daemon.model_set.ModelSet` it builds.

Each ``load`` imports its model's package when called: publishing or listing models from the
CLI then does not import scikit-learn or scipy for kinds it does not touch (loading is never
on the prediction path).

>>> sorted(model_kind_names())
['comm', 'runtime', 'scaling', 'topology', 'walltime']
>>> get_model_kind("walltime").name
'walltime'
>>> try:
...     get_model_kind("weather")
... except ConfigError as error:
...     print(error)
unknown model kind 'weather' (known: comm, runtime, scaling, topology, walltime)
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, ClassVar, MutableMapping

from .errors import ConfigError, ModelArtifactError
from .plugins import NamedRegistry

SITE_KEY = "_site"          # the key of a site-wide model (registry layout: <kind>/<key>/...)
TOPOLOGY_FILE = "topology.json"


class UnknownModelKind(ConfigError, ModelArtifactError):
    """A model kind name that no kind is registered under (a config error; for the registry
    also an artifact error, as an artifact of that kind cannot be loaded)."""


class ModelKind(ABC):
    """One kind of published model. Subclasses are registered with :func:`register_model_kind`."""

    name: ClassVar[str]

    @staticmethod
    @abstractmethod
    def load(folder: Path) -> Any:
        """The model read from an artifact's model folder (raises on anything it refuses)."""

    @staticmethod
    @abstractmethod
    def place(slots: MutableMapping[str, Any], key: str, model: Any) -> None:
        """Put ``model`` (published under ``key``) into the engine's model-set ``slots``."""


_KINDS: NamedRegistry[type[ModelKind]] = NamedRegistry("model kind", UnknownModelKind)


def register_model_kind(name: str) -> Callable[[type[ModelKind]], type[ModelKind]]:
    """Class decorator: register a :class:`ModelKind` under ``name`` (once)."""
    def register(cls: type[ModelKind]) -> type[ModelKind]:
        cls.name = name
        return _KINDS.register(name)(cls)
    return register


get_model_kind = _KINDS.get
model_kind_names = _KINDS.names


@register_model_kind("walltime")
class WalltimeKind(ModelKind):
    """The walltime model from job history: the site-wide one (key ``site``), and one per
    cluster (key = the cluster's name) for clusters trained on their own."""

    @staticmethod
    def load(folder: Path) -> Any:
        from .history.persist import load_model

        return load_model(folder)

    @staticmethod
    def place(slots, key, model) -> None:
        if key == SITE_KEY:
            slots["walltime"] = model
        else:
            slots.setdefault("walltime_by_cluster", {})[key] = model


@register_model_kind("runtime")
class RuntimeKind(ModelKind):
    """Every application's runtime-from-inputs model, in one folder."""

    @staticmethod
    def load(folder: Path) -> Any:
        from .runtime.served import ApplicationModels

        return ApplicationModels.load(folder)

    @staticmethod
    def place(slots, key, model) -> None:
        slots["runtime"] = model


@register_model_kind("comm")
class CommKind(ModelKind):
    """Communication-time models, one per cluster key."""

    @staticmethod
    def load(folder: Path) -> Any:
        from .comm.served import CommModelSet

        return CommModelSet.load(folder)

    @staticmethod
    def place(slots, key, model) -> None:
        from .comm.served import CommRequest   # loaded with the model above

        slots["comm"][key] = model
        slots["comm_request"] = CommRequest


@register_model_kind("scaling")
class ScalingKind(ModelKind):
    """Scaling models (application -> model), for node-count advice."""

    @staticmethod
    def load(folder: Path) -> Any:
        from .scaling.advice import load_scaling_models

        return load_scaling_models(folder)

    @staticmethod
    def place(slots, key, model) -> None:
        slots["scaling"].update(model)


@register_model_kind("topology")
class TopologyKind(ModelKind):
    """A placement model published as a model artifact (``topology.json`` inside)."""

    @staticmethod
    def load(folder: Path) -> Any:
        from ..topology.placement import Placement

        path = Path(folder) / TOPOLOGY_FILE
        if not path.is_file():
            raise ModelArtifactError(f"{folder}: no {TOPOLOGY_FILE}")
        return Placement.load(path)

    @staticmethod
    def place(slots, key, model) -> None:
        slots["placement"] = model
