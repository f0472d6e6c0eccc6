"""What a scaling modeler is and what it returns, as Extra-P's ``AbstractModeler``.

A :class:`Modeler` has a ``NAME`` and one method, ``model(measurements)``, that turns one
:class:`~.measurements.MeasurementSet` into a :class:`FittedModel` (a PMNF function and its
cross-validated error). The modelers (:mod:`.regression`, :mod:`.adaptive`) subclass it;
:mod:`.modelers` finds them by name.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from .measurements import MeasurementSet
from .pmnf import PmnfFunction


@dataclass(frozen=True)
class FittedModel:
    function: PmnfFunction
    cv_smape: float
    modeler: str
    noise: float = 0.0
    location: str = "median"      # estimate of the repetitions that was fitted ("median"/"mean")


class Modeler(ABC):
    """Turns one :class:`~.measurements.MeasurementSet` into a :class:`FittedModel`."""

    NAME: ClassVar[str]
    # Constructor keywords this modeler accepts (the CLI passes only these).
    OPTIONS: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def model(self, measurements: MeasurementSet) -> FittedModel:
        """The fitted model of ``measurements`` (raises ParseError/InvalidRequest on unusable data)."""
