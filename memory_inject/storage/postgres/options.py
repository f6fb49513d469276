"""The ``options`` every pooled PostgreSQL connection starts with (moved out of
:mod:`.connection`, which keeps the pool and the waits)."""

from __future__ import annotations

from memory_inject.storage.postgres.errors import dsn_parts
from memory_inject.storage.postgres.writers import OPTION as WRITER

__all__ = ["TUNABLE", "session_options"]

#: Defaults of a store with vectors that a DSN's ``options`` override. pgvector's
#: ``ef_search`` 40 found 0.66 of the exact top 10 on a 100k store, 100 found 0.83
#: at the same p50 of the vector stage (docs/performance.md, issue 29).
TUNABLE = ("-c hnsw.ef_search=100",)


def session_options(dsn: str, timeout: float, *, vectors: bool) -> str:
    """The ``options`` every pooled connection starts with, around the DSN's own.

    Session settings travel in the startup packet, not in a configure
    callback: a pool then never runs a query of its own in the background.
    The last of a setting wins: :data:`TUNABLE` comes before the DSN's
    ``options``, what the store rests on after them. ``lock_timeout``
    (``timeout``) plays SQLite's busy_timeout: a locked row or table fails the
    call (StoreLockedError) instead of hanging the turn. ``memory_inject.writer``
    lets its writes past the table's writer guard (``writers.py``).
    """
    options = [
        *(TUNABLE if vectors else ()),
        str(dsn_parts(dsn).get("options") or ""),
        "-c TimeZone=UTC",
        f"-c lock_timeout={max(1, round(timeout * 1000))}",
        WRITER,
    ]
    if vectors:
        options.append("-c hnsw.iterative_scan=relaxed_order")
    return " ".join(o for o in options if o)
