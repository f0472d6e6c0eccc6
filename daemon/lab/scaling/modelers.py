"""The scaling modelers by name, as ReFrame's ``getscheduler``.

Each modeler (:class:`~.abstract_modeler.Modeler`: a ``NAME`` and ``model(measurements)``)
is registered here under its ``NAME``; :func:`get_modeler` finds it by name, refusing an
unknown one with the list of the known ones. APMT (:mod:`.apmt`) is not a modeler of this
kind: it decomposes hardware-counter profiles of a few runs, not a measurement set.

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

from .abstract_modeler import Modeler
from .adaptive import AdaptiveModeler
from .regression import RegressionModeler
from ...errors import ConfigError, InvalidRequest
from ...plugins import NamedRegistry

BUILTIN_MODELERS: tuple[type[Modeler], ...] = (RegressionModeler, AdaptiveModeler)


class UnknownModeler(InvalidRequest, ConfigError):
    """No modeler is registered under that name (the request's ``modeler`` field)."""


_MODELERS: NamedRegistry[type[Modeler]] = NamedRegistry("modeler", lambda message: UnknownModeler("modeler", message))


def register_modeler(cls: type[Modeler]) -> type[Modeler]:
    """Class decorator: register ``cls`` under its ``NAME`` (once)."""
    return _MODELERS.register(cls.NAME)(cls)


for _builtin in BUILTIN_MODELERS:
    register_modeler(_builtin)


def get_modeler(name: str) -> type[Modeler]:
    return _MODELERS.get(name)


def modeler_names() -> tuple[str, ...]:
    return _MODELERS.names()


def describe_modelers() -> list[tuple[str, str]]:
    """(NAME, first docstring line) of every registered modeler, sorted by name."""
    return [(name, (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "")
            for name, cls in _MODELERS.items()]
