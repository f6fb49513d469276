"""Writes as a host makes them in tests that move rows between scopes on purpose."""

from __future__ import annotations

from typing import Any

from memory_inject.exceptions import KeyOwnedError


def host_write(store: Any, key: str, text: str, *args: Any, **kw: Any) -> None:
    """``store.store``, moving the row to the given scope the host's way when another scope
    holds the key (forget it, store it again): a row belongs to its scope, so a plain
    ``store`` into another scope is refused (``KeyOwnedError``)."""
    try:
        store.store(key, text, *args, **kw)
    except KeyOwnedError:
        store.forget(key)
        store.store(key, text, *args, **kw)
