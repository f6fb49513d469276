"""The standing context: PI's hard rules and L1 identity, on every turn, not only on a match.

PI builds Hard Rules from its whole governed record set each turn and injects
L1 records without a relevance test, so a rule does not vanish because the
prompt did not mention it. Recall only returns what the query matched; this
source adds the rest: the profile's active L1 records and L2 hard rules,
bounded (``standing.limit`` of each), read with one indexed query
(:class:`~memory_inject.contract.SupportsStandingContext`) and cached per
store and profile until the store's ``data_version`` moves, so a turn between
writes costs a dictionary lookup (and, on SQLite, one ``PRAGMA``).

The render merges these entries after the query's own (a key recall already
returned keeps recall's entry and score); the governance stages then treat
them like any recalled entry, and the sectioned renderer places them: rules
under Hard Rules, L1 under Selected Memory (``max_l1``). A store without the
capability, or one that fails, adds nothing and the turn goes on.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from memory_inject.config import MemoryInjectConfig
from memory_inject.contract import SupportsStandingContext, supports
from memory_inject.models import MemoryEntry

__all__ = ["MAX_AGE_S", "StandingCache", "standing_entries", "standing_fetch"]

#: How long a cached answer is trusted when the version has not moved: a store
#: that cannot see other processes' writes (PostgreSQL) sees them after this.
MAX_AGE_S = 30.0


class StandingCache:
    """Standing entries per store and ``(profile, limit, min_confidence)``, between writes."""

    def __init__(self, max_age_s: float = MAX_AGE_S) -> None:
        """An empty cache whose entries are trusted for ``max_age_s`` at most."""
        self._max_age = max_age_s
        self._lock = threading.Lock()
        self._by_store: weakref.WeakKeyDictionary[
            Any, dict[tuple[Any, ...], tuple[Hashable, float, tuple[MemoryEntry, ...]]]
        ] = weakref.WeakKeyDictionary()
        self.reads = 0  # store reads made (the tests' "cached between writes" evidence)

    def get(
        self,
        store: object,
        profile_id: str | None,
        *,
        limit: int,
        min_confidence: float,
        categories: Mapping[str, datetime | None] | None = None,
    ) -> tuple[MemoryEntry, ...]:
        """The store's standing entries for the profile; ``()`` without the capability.

        Store errors propagate: the render's recall records them like any
        failed call, and the turn keeps what recall returned.
        """
        if not supports(store, SupportsStandingContext) or limit <= 0:
            return ()
        cats = dict(categories or {})
        key = (profile_id, limit, min_confidence, tuple(sorted(cats.items())))
        version = store.data_version
        now = time.monotonic()
        with self._lock:
            cached = self._entries(store).get(key)
        if cached is not None and cached[0] == version and now - cached[1] < self._max_age:
            return cached[2]
        entries = tuple(
            e
            for e in store.standing_records(
                profile_id, limit=limit, min_confidence=min_confidence, categories=cats
            )
            if isinstance(e, MemoryEntry)
        )
        with self._lock:
            self.reads += 1
            self._entries(store)[key] = (version, now, entries)
        return entries

    def _entries(
        self, store: object
    ) -> dict[tuple[Any, ...], tuple[Hashable, float, tuple[MemoryEntry, ...]]]:
        try:
            return self._by_store.setdefault(store, {})
        except TypeError:  # a store without weak references: never cached
            return {}

    def clear(self) -> None:
        """Forget every cached answer."""
        with self._lock:
            self._by_store.clear()


#: The process-wide cache the render uses.
CACHE = StandingCache()


def standing_entries(
    store: object,
    profile_id: str | None,
    *,
    limit: int,
    min_confidence: float,
    categories: Mapping[str, datetime | None] | None = None,
) -> Sequence[MemoryEntry]:
    """:meth:`StandingCache.get` on the process-wide cache (what a render's recall calls)."""
    return CACHE.get(
        store, profile_id, limit=limit, min_confidence=min_confidence, categories=categories
    )


def standing_fetch(
    store: object, config: MemoryInjectConfig, profile_id: str | None, now: datetime | None
) -> Callable[[], Sequence[MemoryEntry]]:
    """The standing-context read of one turn, for the render to run with its recall calls.

    With the sectioned block it also reads what PI shows every turn: open
    scratchpad items, today's daily notes and sessions (the UTC day of
    ``now``, else of the wall clock), open questions.
    """
    r = config.renderer
    categories: dict[str, datetime | None] = {}
    if r.kind == "sectioned":
        clock = now if now is not None else datetime.now(UTC)
        clock = clock.replace(tzinfo=UTC) if clock.tzinfo is None else clock.astimezone(UTC)
        today = clock.replace(hour=0, minute=0, second=0, microsecond=0)
        categories = {"scratchpad": None, "daily": today}
        if r.max_sessions:
            categories["session"] = today
        if r.max_questions:
            categories["inquiry"] = None
    return partial(
        standing_entries,
        store,
        profile_id,
        limit=config.standing.limit,
        min_confidence=r.hard_rule_min_confidence if r.kind == "sectioned" else 0.85,
        categories=categories,
    )
