"""Scaling modelers as plugins, as Extra-P's ``AbstractModeler``: a ``NAME`` and one method,
``model(measurements)``, that turns one measurement set into a fitted PMNF model.

A modeler class registers itself with :func:`register_modeler`; :func:`get_modeler` finds it by
name, refusing an unknown one with the list of the known ones (as ReFrame's
``getscheduler``). The plugin modules are imported on the first look-up, so a program that
never fits a scaling model does not pay for numpy. APMT (:mod:`.apmt`) is not a modeler of
this kind: it decomposes hardware-counter profiles of a few runs, not a measurement set.

>>> sorted(modeler_names())
['adaptive', 'regression']
>>> get_modeler("regression").NAME
'regression'
>>> try:
...     get_modeler("oracle")
... except InvalidRequest as error:
...     print(error)
modeler: unknown modeler 'oracle' (known: adaptive, regression)
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from ...errors import ConfigError, InvalidRequest
from ...plugins import NamedRegistry

if TYPE_CHECKING:
    from .measurements import MeasurementSet
    from .regression import FittedModel

# Modules whose import registers the modelers they define.
PLUGIN_MODULES = ("hpcpredict.daemon.lab.scaling.regression", "hpcpredict.daemon.lab.scaling.adaptive")


class UnknownModeler(InvalidRequest, ConfigError):
    """No modeler is registered under that name (the request's ``modeler`` field)."""


class Modeler(ABC):
    """Turns one :class:`~.measurements.MeasurementSet` into a :class:`~.regression.FittedModel`."""

    NAME: ClassVar[str]
    # Constructor keywords this modeler accepts (the CLI passes only these).
    OPTIONS: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def model(self, measurements: MeasurementSet) -> FittedModel:
        """The fitted model of ``measurements`` (raises ParseError/InvalidRequest on unusable data)."""


_MODELERS: NamedRegistry[type[Modeler]] = NamedRegistry("modeler", lambda message: UnknownModeler("modeler", message))


def register_modeler(cls: type[Modeler]) -> type[Modeler]:
    """Class decorator: register ``cls`` under its ``NAME`` (once)."""
    return _MODELERS.register(cls.NAME)(cls)


def _load_plugins() -> None:
    for module in PLUGIN_MODULES:
        importlib.import_module(module)


def get_modeler(name: str) -> type[Modeler]:
    _load_plugins()
    return _MODELERS.get(name)


def modeler_names() -> tuple[str, ...]:
    _load_plugins()
    return _MODELERS.names()


def describe_modelers() -> list[tuple[str, str]]:
    """(NAME, first docstring line) of every registered modeler, sorted by name."""
    _load_plugins()
    return [(name, (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "")
            for name, cls in _MODELERS.items()]
