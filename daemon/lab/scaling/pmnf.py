"""Performance model normal form (PMNF, seed 001): exponent sets, terms and evaluation.

A PMNF function is ``c0 + sum_k c_k * prod_l x_l**i_kl * log2(x_l)**j_kl``. A *compound term*
is one product; an *exponent pair* ``(i, j)`` is one parameter's factor ``x**i * log2(x)**j``.

>>> from hpcpredict.daemon.lab.scaling.pmnf import CompoundTerm, PmnfFunction
>>> f = PmnfFunction(constant=2.0, terms=(CompoundTerm(3.0, {"p": (1.0, 1)}),))
>>> f.evaluate({"p": 4.0})
26.0
>>> f.expression()
'2 + 3 * p^(1) * log2(p)^1'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping

import numpy as np

ExponentPair = tuple[float, int]


def _pairs(exponents, logs) -> list[ExponentPair]:
    return [(float(Fraction(e)), j) for e in exponents for j in logs]


# The exponent set E of seed 001 (43 pairs); (0, 0) is the constant and is not in E.
EXPONENT_SET: tuple[ExponentPair, ...] = tuple(
    p for p in (
        _pairs(["0", "1/4", "1/3", "1/2", "2/3", "3/4", "1", "3/2", "2", "5/2"], [0, 1, 2])
        + _pairs(["5/4", "4/3", "3"], [0, 1])
        + _pairs(["4/5", "5/3", "7/4", "9/4", "7/3", "8/3", "11/4"], [0])
    ) if p != (0.0, 0)
)
# With the constant (0, 0) these are the 43 classes of the paper's classifier.
CLASSES: tuple[ExponentPair, ...] = ((0.0, 0),) + EXPONENT_SET

# Strong scaling: runtime shrinking with the process count needs negative exponents.
NEGATIVE_EXPONENTS: tuple[ExponentPair, ...] = tuple(
    _pairs(["-1/4", "-1/3", "-1/2", "-2/3", "-3/4", "-1", "-3/2", "-2"], [0])
    + _pairs(["-1/2", "-1"], [1])
)


def factor(x: np.ndarray, pair: ExponentPair) -> np.ndarray:
    """``x**i * log2(x)**j`` elementwise (x > 0)."""
    i, j = pair
    x = np.asarray(x, dtype=float)
    out = np.power(x, i) if i else np.ones_like(x)
    if j:
        out = out * np.power(np.log2(x), j)
    return out


def _format_number(value: float) -> str:
    return f"{value:.6g}"


def _format_exponent(value: float) -> str:
    fraction = Fraction(value).limit_denominator(12)
    return str(fraction)


@dataclass(frozen=True)
class CompoundTerm:
    """``coefficient * prod_l x_l**i * log2(x_l)**j`` over the parameters in ``exponents``."""

    coefficient: float
    exponents: Mapping[str, ExponentPair] = field(default_factory=dict)

    def basis(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """The term without its coefficient, evaluated at the given parameter columns."""
        out = None
        for name, pair in self.exponents.items():
            part = factor(columns[name], pair)
            out = part if out is None else out * part
        return out if out is not None else np.ones(1)

    def expression(self) -> str:
        parts = [_format_number(self.coefficient)]
        for name, (i, j) in self.exponents.items():
            if i:
                parts.append(f"{name}^({_format_exponent(i)})")
            if j:
                parts.append(f"log2({name})^{j}")
        return " * ".join(parts)


@dataclass(frozen=True)
class PmnfFunction:
    """A constant plus compound terms; plain data, evaluated with numpy."""

    constant: float
    terms: tuple[CompoundTerm, ...] = ()

    def evaluate(self, params: Mapping[str, float | np.ndarray]) -> float | np.ndarray:
        columns = {k: np.asarray(v, dtype=float) for k, v in params.items()}
        total: float | np.ndarray = self.constant
        for term in self.terms:
            total = total + term.coefficient * term.basis(columns)
        if np.ndim(total) == 0:
            return float(total)
        return total

    def expression(self) -> str:
        text = _format_number(self.constant)
        for term in self.terms:
            body = term.expression()
            text += f" - {body[1:]}" if body.startswith("-") else f" + {body}"
        return text

    def lead_exponents(self) -> dict[str, ExponentPair]:
        """Per parameter, the exponent pair of the fastest-growing term that contains it."""
        lead: dict[str, ExponentPair] = {}
        for term in self.terms:
            for name, pair in term.exponents.items():
                if name not in lead or pair > lead[name]:
                    lead[name] = pair
        return lead

    def to_dict(self) -> dict:
        return {
            "constant": self.constant,
            "terms": [
                {"coefficient": t.coefficient,
                 "exponents": {k: [float(i), int(j)] for k, (i, j) in t.exponents.items()}}
                for t in self.terms
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "PmnfFunction":
        terms = tuple(
            CompoundTerm(float(t["coefficient"]),
                         {str(k): (float(v[0]), int(v[1])) for k, v in t["exponents"].items()})
            for t in data.get("terms", [])
        )
        return cls(float(data["constant"]), terms)


def smape(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Symmetric mean absolute percentage error in percent (0 where both are 0)."""
    actual = np.asarray(actual, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    denom = (np.abs(actual) + np.abs(predicted)) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(denom > 0, np.abs(actual - predicted) / denom, 0.0)
    return float(100.0 * np.mean(ratio))
