"""The rules every store's ``recall_where`` / ``known_entities`` share (recall plans).

One place for what the contract says, so SQLite, PostgreSQL and the in-memory
store cannot drift: how an entity id becomes the display name that entity
extraction matches. Restricting a ranked query by status
or profile is :mod:`memory_inject._filter_first`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["entity_names"]


def entity_names(ids: Iterable[str]) -> dict[str, str]:
    """``{display name: entity id}``: the part after the last ``:``, ``-``/``_`` read as spaces.

    ``company:acme-corp`` is ``acme corp``; an id whose name is blank is left out.
    """
    out: dict[str, str] = {}
    for eid in ids:
        name = str(eid).rsplit(":", 1)[-1].replace("-", " ").replace("_", " ").strip()
        if name:
            out[name] = str(eid)
    return out
