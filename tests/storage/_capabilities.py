"""Which capability protocols a store class has, decided without an instance.

The contract suite selects tests by capability at collection time, before any
store (or PostgreSQL server) exists, so it reads the class: a protocol's
members are its public names, and a class has the capability when it has them
all. ``tests/test_contract.py`` checks this agrees with ``isinstance`` on real
stores.
"""

from __future__ import annotations

import importlib

from memory_inject import contract

#: Every optional capability the contract declares, by name.
CAPABILITIES: dict[str, type] = {
    name: getattr(contract, name) for name in contract.__all__ if name.startswith("Supports")
}

#: The built-in stores, by the backend id the contract suite uses (the store's name).
STORE_CLASSES = {
    "in_memory": "memory_inject.storage.memory:InMemoryStore",
    "sqlite": "memory_inject.storage.sqlite:SQLiteStore",
    "postgres": "memory_inject.storage.postgres:PostgresStore",
}


def store_class(backend: str) -> type:
    module, _, name = STORE_CLASSES[backend].partition(":")
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def members(protocol: type) -> set[str]:
    """The public names a protocol declares, its protocol bases' included."""
    return {
        name
        for base in protocol.__mro__
        if getattr(base, "_is_protocol", False) and base.__module__ == contract.__name__
        for name in vars(base)
        if not name.startswith("_")
    }


def provides(cls: type, protocol: type) -> bool:
    """True when instances of ``cls`` have every member of ``protocol``."""
    return all(hasattr(cls, name) for name in members(protocol))
