"""``supports``: asking a store for a capability on the hot path, cheaply.

A render asks a few capabilities per turn, and a protocol ``isinstance``
costs several microseconds on Python 3.11; :func:`supports` answers the same
question from attributes cached per class. Its public home is
:mod:`memory_inject.contract`.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeGuard, TypeVar

__all__ = ["supports"]

_C = TypeVar("_C")
_CLASS_HAS: dict[tuple[type, str], bool] = {}
_MEMBERS: dict[type, tuple[str, ...]] = {}


def _members(capability: type) -> tuple[str, ...]:
    names = _MEMBERS.get(capability)
    if names is None:
        names = _MEMBERS[capability] = tuple(
            sorted(
                n
                for base in capability.__mro__
                if base not in (object, Protocol, Generic)
                for n in (*vars(base), *getattr(base, "__annotations__", {}))
                if not n.startswith("_")
            )
        )
    return names


def supports(store: object, capability: type[_C]) -> TypeGuard[_C]:
    """``isinstance(store, capability)`` for a runtime-checkable capability, made cheap.

    On Python 3.11 a protocol ``isinstance`` costs several microseconds, and a
    render asks a few per turn. This answers the same question: every member
    of the capability is an attribute of the store (its class's attributes
    are looked up once per class; instance attributes every time). A store
    whose class forwards attributes with ``__getattr__`` (a proxy) is asked
    for each member with ``hasattr``, which sees forwarded attributes on every
    Python version (a protocol ``isinstance`` stops seeing them from 3.12 on).
    """
    cls = type(store)
    if "__getattr__" in _class_attrs(cls):
        return all(hasattr(store, name) for name in _members(capability))
    inst = getattr(store, "__dict__", None) or {}
    for name in _members(capability):
        key = (cls, name)
        on_class = _CLASS_HAS.get(key)
        if on_class is None:
            on_class = _CLASS_HAS[key] = hasattr(cls, name)
        if not on_class and name not in inst:
            return False
    return True


def _class_attrs(cls: type) -> frozenset[str]:
    hit = _CLASS_ATTRS.get(cls)
    if hit is None:
        hit = _CLASS_ATTRS[cls] = frozenset(n for k in cls.__mro__[:-1] for n in vars(k))
    return hit


_CLASS_ATTRS: dict[type, frozenset[str]] = {}
