"""Classes registered by name: the one shape behind model kinds and scaling modelers.

A registry maps a name to a class registered once (as ReFrame's ``@register_scheduler`` /
``getscheduler``); looking up an unknown name raises the registry's own error, which lists
the names it knows.

>>> colours = NamedRegistry("colour", lambda message: KeyError(message))
>>> @colours.register("red")
... class Red: pass
>>> colours.get("red").__name__
'Red'
>>> try:
...     colours.get("blue")
... except KeyError as error:
...     print(error.args[0])
unknown colour 'blue' (known: red)
"""
from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T", bound=type)


class NamedRegistry(Generic[T]):
    """Name → class, each name registered once; ``unknown(message)`` builds the look-up error."""

    def __init__(self, what: str, unknown: Callable[[str], Exception]):
        self.what, self._unknown = what, unknown
        self._classes: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator: register the class under ``name`` (a second, different class is refused)."""
        def register(cls: T) -> T:
            if self._classes.get(name, cls) is not cls:
                raise ValueError(f"{self.what} {name!r} is already registered")
            self._classes[name] = cls
            return cls
        return register

    def get(self, name: str) -> T:
        try:
            return self._classes[name]
        except KeyError:
            raise self._unknown(f"unknown {self.what} {name!r} (known: {', '.join(sorted(self._classes))})") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._classes)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(sorted(self._classes.items()))
