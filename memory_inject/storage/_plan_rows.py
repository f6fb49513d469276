"""The rules every store's ``recall_where`` / ``known_entities`` share (recall plans).

One place for what the contract says, so SQLite, PostgreSQL and the in-memory
store cannot drift: how an entity id becomes the display name that entity
extraction matches, how rows filtered by entity or source are ordered, and how
a ranked query restricted to some statuses over-fetches before filtering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from memory_inject.models import MemoryEntry

__all__ = ["STATUS_WINDOW_CAP", "entity_names", "only_statuses", "ranked_of", "status_window"]

#: A ranked query filtered by status asks for at most this many rows.
STATUS_WINDOW_CAP = 200


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


def status_window(limit: int) -> int:
    """Rows a ranked (semantic or lexical) query asks for before keeping some statuses.

    A ranked recall cannot filter by status in its own query, so it looks
    four times deeper (at most :data:`STATUS_WINDOW_CAP`) and filters then.
    """
    return max(limit, min(STATUS_WINDOW_CAP, limit * 4))


def only_statuses(entries: Sequence[MemoryEntry], statuses: Sequence[str]) -> list[MemoryEntry]:
    """The entries whose ``extra['status']`` is one of ``statuses``, in order."""
    allowed = frozenset(statuses)
    return [e for e in entries if (e.extra or {}).get("status", "active") in allowed]


def ranked_of(
    fetch: Callable[[int], Sequence[MemoryEntry]], limit: int, statuses: Sequence[str] | None
) -> list[MemoryEntry]:
    """``fetch(limit)``; with ``statuses``, a deeper fetch kept to those statuses, then cut."""
    if statuses is None:
        return list(fetch(limit))
    return only_statuses(fetch(status_window(limit)), statuses)[:limit]
