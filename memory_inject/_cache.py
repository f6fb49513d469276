"""Values derived from an immutable object, built once for the life of that object."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerObject"]

K = TypeVar("K")
V = TypeVar("V")


class PerObject(Generic[K, V]):
    """``cache(obj)`` is ``build(obj)``, built on first use and kept until ``obj`` dies.

    Keyed by identity (configs are frozen, so identity is enough and costs a
    dict lookup, where hashing a config would cost more than the build).
    ``obj`` must support weak references.
    """

    def __init__(self, build: Callable[[K], V]) -> None:
        self._build = build
        self._built: dict[int, tuple[weakref.ref[K], V]] = {}

    def __call__(self, obj: K) -> V:
        """The value for ``obj``."""
        key = id(obj)
        hit = self._built.get(key)
        if hit is not None and hit[0]() is obj:
            return hit[1]
        value = self._build(obj)
        self._built[key] = (weakref.ref(obj, lambda _r: self._built.pop(key, None)), value)
        return value

    def __len__(self) -> int:
        """How many objects have a value kept (entries go when their object dies)."""
        return len(self._built)
