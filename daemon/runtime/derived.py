"""Derived inputs: quantities a code's cost follows, computed from the inputs a job states.

A code's inputs are what its user types (a box edge, a plane-wave cutoff), while its cost
follows a quantity they imply (the number of FFT grid points, which grows as the box volume
times the cutoff to the power 3/2 and jumps where the FFT length rounds up to the next size the
code accepts). A learner given only the typed inputs must discover that quantity from the
runs; with few runs it cannot. The site (or a sweep) declares it instead, once per application,
as an arithmetic expression of the inputs; it is computed for every training run and, from the
stored expressions, for every job the served model estimates, so the model and the daemon agree.

Expressions: numbers, input names, ``+ - * / **``, unary minus, and the functions of
:data:`FUNCTIONS` (``sqrt``, ``log``, ``exp``, ``abs``, ``min``, ``max``, ``floor``, ``ceil``, and
``round_up(x, a, b, ...)``: the smallest of ``a, b, ...`` that is at least ``x``, or ``x`` when
none is: a code's list of accepted sizes), and ``choose(name, key1, value1, key2, value2, ...)``:
the value paired with the key the input ``name`` (or a number computed from the inputs) equals;
keys are quoted words or numbers; missing when it equals none: a quantity a categorical input
implies (the basis functions per molecule of a named basis set), or a measured cost per value a
code picks (its start-up per FFT grid length). A ``choose`` that is the whole expression (or a
value of such a one) may give quoted words instead of numbers, all of its values words: the
derived input is then categorical (one-hot encoded), for a choice a code makes whose cost a
learner should find per choice, not as a smooth function (the PME grid length GROMACS picks).
A quoted word is nowhere else allowed (no arithmetic on words).
Nothing else parses (no attributes, no calls of other names, no comparisons): an expression
cannot run code. Arithmetic is in floats; a value that cannot be computed (an input missing or
not a number, division by zero, overflow, a negative square root) leaves the derived input
missing, as if the job had not stated it.

>>> derived = DerivedInputs.parse(["atoms=4*x*y*z", "grid=round_up(box*sqrt(cut), 40, 45, 48) ** 3"])
>>> derived.names
['atoms', 'grid']
>>> derived.apply({"x": 2.0, "y": 3.0, "z": 4.0, "box": 4.0, "cut": 121.0})   # 4·11 = 44 → 45
{'x': 2.0, 'y': 3.0, 'z': 4.0, 'box': 4.0, 'cut': 121.0, 'atoms': 96.0, 'grid': 91125.0}
>>> derived.apply({"x": 2.0, "y": "big", "box": 1.0, "cut": 0.0})["grid"]    # 0 → 40: 40³
64000.0
>>> "atoms" in derived.apply({"x": 2.0, "y": "big"})                         # not a number: missing
False
>>> per_molecule = DerivedInputs.parse(["functions=n * choose(basis, 'sto-3g', 7, 'cc-pvdz', 25)"])
>>> per_molecule.apply({"n": 2.0, "basis": "cc-pvdz"})["functions"]
50.0
>>> "functions" in per_molecule.apply({"n": 2.0, "basis": "6-31g"})                 # no such key: missing
False
>>> grid = DerivedInputs.parse(["grid=choose(round_up(box / 0.12, 24, 25), 24, 'g24', 25, 'g25')"])
>>> [grid.apply({"box": box}).get("grid") for box in (2.8, 2.95, 3.5)]    # categorical; 3.5: no key
['g24', 'g25', None]
>>> DerivedInputs.parse(["bad=__import__('os')"])
Traceback (most recent call last):
...
ValueError: derived input 'bad': unknown function '__import__' (allowed: abs, ceil, choose, exp, floor, log, max, min, round_up, sqrt)
"""
from __future__ import annotations

import ast
import math
from typing import Callable, Mapping, Sequence, TypeGuard, TypeVar

from .values import valid_key

MAX_DERIVED = 32
MAX_EXPRESSION_CHARS = 1_000
MAX_NODES = 200
MAX_CHOICES = 64   # key, value pairs of one choose()


def _round_up(x: float, *sizes: float) -> float:
    return min((size for size in sizes if size >= x), default=x)


FUNCTIONS: dict[str, tuple[Callable[..., float], int, int]] = {  # name: (function, fewest, most arguments)
    "sqrt": (math.sqrt, 1, 1), "log": (math.log, 1, 1), "exp": (math.exp, 1, 1), "abs": (abs, 1, 1),
    "floor": (lambda x: float(math.floor(x)), 1, 1), "ceil": (lambda x: float(math.ceil(x)), 1, 1),
    "min": (min, 2, 64), "max": (max, 2, 64), "round_up": (_round_up, 2, 128),
}
_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: math.pow(a, b),
}
_Evaluator = Callable[[Mapping[str, object]], float]   # (a word-valued choose() gives a str)


_Input = TypeVar("_Input")   # the type of a stated input's value


class _Missing(Exception):
    """An input the expression needs is absent or not a number."""


def _compile(node: ast.AST, where: str, names: set[str]) -> _Evaluator:
    """A closure computing ``node`` from an inputs mapping (floats only; raises _Missing,
    ArithmeticError or ValueError when the value cannot be computed)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        try:
            value = float(node.value)
        except OverflowError:
            raise ValueError(f"{where}: the number {ast.unparse(node)[:20]}... is too large") from None
        return lambda inputs: value
    if isinstance(node, ast.Name):
        name = node.id
        names.add(name)

        def read(inputs):
            value = inputs.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _Missing(name)
            return float(value)
        return read
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _compile(node.operand, where, names)
        if isinstance(node.op, ast.USub):
            return lambda inputs: -operand(inputs)
        return operand
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        operator = _OPERATORS[type(node.op)]
        left, right = _compile(node.left, where, names), _compile(node.right, where, names)
        return lambda inputs: operator(left(inputs), right(inputs))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "choose":
        return _compile_choose(node, where, names, words=False)[0]
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            called = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise ValueError(f"{where}: unknown function {called!r} (allowed: {', '.join(sorted([*FUNCTIONS, 'choose']))})")
        if node.keywords:
            raise ValueError(f"{where}: {node.func.id}() takes no keyword arguments")
        function, fewest, most = FUNCTIONS[node.func.id]
        if not fewest <= len(node.args) <= most:
            raise ValueError(f"{where}: {node.func.id}() takes {fewest}-{most} arguments, not {len(node.args)}")
        arguments = [_compile(argument, where, names) for argument in node.args]
        return lambda inputs: float(function(*(argument(inputs) for argument in arguments)))
    raise ValueError(f"{where}: {ast.unparse(node)!r} is not allowed (numbers, input names, + - * / **, "
                     f"and the functions {', '.join(sorted([*FUNCTIONS, 'choose']))})")


def _compile_top(node: ast.AST, where: str, names: set[str]) -> _Evaluator:
    """A whole expression: arithmetic, or a ``choose`` whose values may be words."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "choose":
        return _compile_choose(node, where, names, words=True)[0]
    return _compile(node, where, names)


def _is_word(node: ast.AST) -> TypeGuard[ast.Constant]:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _compile_choose(node: ast.Call, where: str, names: set[str], words: bool) -> tuple[_Evaluator, bool]:
    """``choose(subject, key1, value1, ...)``: the value of the key ``subject`` equals (see the
    module), and whether the values are words (allowed only with ``words``)."""
    if node.keywords:
        raise ValueError(f"{where}: choose() takes no keyword arguments")
    if len(node.args) < 3 or len(node.args) % 2 == 0 or len(node.args) > MAX_CHOICES * 2 + 1:
        raise ValueError(f"{where}: choose() takes an input name (or expression) and 1-{MAX_CHOICES} key, value pairs")
    subject = node.args[0]
    if isinstance(subject, ast.Name):   # an input, read as stated: a word or a number
        name = subject.id
        names.add(name)

        def read(inputs):
            value = inputs.get(name)
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise _Missing(name)
            return value if isinstance(value, str) else float(value)
    else:                               # arithmetic of the inputs: a number
        read = _compile(subject, where, names)
    table: dict[object, _Evaluator] = {}
    kinds = set()   # True: a value is a word
    for key_node, value_node in zip(node.args[1::2], node.args[2::2]):
        key = key_node.value if isinstance(key_node, ast.Constant) else None
        if isinstance(key, bool) or not isinstance(key, (str, int, float)):
            raise ValueError(f"{where}: choose()'s keys must be quoted words or numbers, not {ast.unparse(key_node)!r}")
        try:
            key = key if isinstance(key, str) else float(key)
        except OverflowError:
            raise ValueError(f"{where}: choose()'s key {ast.unparse(key_node)[:20]}... is too large") from None
        if key in table:
            raise ValueError(f"{where}: choose() has the key {key!r} twice")
        if words and _is_word(value_node):
            word = value_node.value
            table[key], kind = (lambda inputs, word=word: word), True
        elif words and isinstance(value_node, ast.Call) and getattr(value_node.func, "id", None) == "choose":
            table[key], kind = _compile_choose(value_node, where, names, words=True)
        else:
            table[key], kind = _compile(value_node, where, names), False
        kinds.add(kind)
    if len(kinds) > 1:
        raise ValueError(f"{where}: choose()'s values must be all quoted words or all numbers")

    def evaluate(inputs):
        chosen = table.get(read(inputs))
        if chosen is None:
            raise _Missing(ast.unparse(subject))
        return chosen(inputs)
    return evaluate, kinds == {True}


class DerivedInputs:
    """Named expressions of the inputs, in order (a later one may use an earlier one)."""

    def __init__(self, expressions: Sequence[tuple[str, str]] = ()):
        if len(expressions) > MAX_DERIVED:
            raise ValueError(f"at most {MAX_DERIVED} derived inputs, got {len(expressions)}")
        self.expressions = [(str(name), str(text)) for name, text in expressions]
        self._evaluators: list[tuple[str, _Evaluator]] = []
        self.sources: dict[str, list[str]] = {}  # derived name -> the inputs it reads
        seen: set[str] = set()
        for name, text in self.expressions:
            where = f"derived input {name!r}"
            if not valid_key(name):
                raise ValueError(f"{where}: not a valid input name")
            if name in seen:
                raise ValueError(f"{where}: declared twice")
            if len(text) > MAX_EXPRESSION_CHARS:
                raise ValueError(f"{where}: expression longer than {MAX_EXPRESSION_CHARS} characters")
            try:
                tree = ast.parse(text.strip(), mode="eval")
            except SyntaxError as error:
                raise ValueError(f"{where}: cannot parse {text!r}: {error.msg}") from None
            if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
                raise ValueError(f"{where}: expression has more than {MAX_NODES} parts")
            names: set[str] = set()
            self._evaluators.append((name, _compile_top(tree.body, where, names)))
            if name in names:
                raise ValueError(f"{where}: uses itself")
            self.sources[name] = sorted(names)
            seen.add(name)

    @classmethod
    def parse(cls, declarations: Sequence[str]) -> "DerivedInputs":
        """From ``NAME=EXPRESSION`` strings (the ``--derive`` option's form)."""
        pairs = []
        for declaration in declarations:
            name, equals, text = str(declaration).partition("=")
            if not equals or not text.strip():
                raise ValueError(f"derived input {declaration!r}: expected NAME=EXPRESSION")
            pairs.append((name.strip(), text.strip()))
        return cls(pairs)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.expressions]

    def __bool__(self) -> bool:
        return bool(self.expressions)

    def apply(self, inputs: Mapping[str, _Input]) -> dict[str, _Input | float | str]:
        """``inputs`` plus every derived input that can be computed (a stated one is replaced)."""
        values: dict[str, _Input | float | str] = dict(inputs)
        for name, evaluate in self._evaluators:
            values.pop(name, None)
            try:
                value = evaluate(values)
            except (_Missing, ArithmeticError, ValueError):
                continue
            if isinstance(value, str) or math.isfinite(value):
                values[name] = value
        return values

    def to_json(self) -> list:
        return [[name, text] for name, text in self.expressions]

    @classmethod
    def from_json(cls, data) -> "DerivedInputs":
        try:
            return cls([(name, text) for name, text in (data or [])])
        except (TypeError, ValueError) as error:
            raise ValueError(f"bad derived inputs: {error}") from error
