"""The standing context: PI's hard rules and L1 identity, on every turn, not only on a match.

PI builds Hard Rules from its whole governed record set each turn and injects
L1 records without a relevance test, so a rule does not vanish because the
prompt did not mention it. Recall only returns what the query matched; this
source adds the rest: the profile's active L1 records and L2 hard rules,
bounded (``standing.limit`` of each), read with one indexed query
(:class:`~memory_inject.contract.SupportsStandingContext`) and cached per
store, profile and session scope until the store's ``data_version`` moves, so
a turn between writes costs a dictionary lookup (and, on SQLite, one ``PRAGMA``).

The read is scoped to the turn's sessions (``sessions=``, ``shared_only=``)
so each limit counts only rows the render's session rule keeps: another
session's 40 daily notes no longer push the shared one out. A store whose
``standing_records`` takes no such keywords (a third party's, written before)
is called as before, its signature inspected once per function
(:func:`read_standing`); the session stage then drops what the turn may not see.

The render merges these entries after the query's own (a key recall already
returned keeps recall's entry and score); the governance stages then treat
them like any recalled entry, and the sectioned renderer places them: rules
under Hard Rules, L1 under Selected Memory (``max_l1``). A store without the
capability, or one that fails, adds nothing and the turn goes on.
"""

from __future__ import annotations

import contextlib
import inspect
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

__all__ = [
    "MAX_AGE_S",
    "StandingCache",
    "read_standing",
    "standing_entries",
    "standing_fetch",
    "standing_scope",
]

#: How long a cached answer is trusted when the version has not moved: a store
#: that cannot see other processes' writes (PostgreSQL) sees them after this.
MAX_AGE_S = 30.0


#: Whether a ``standing_records`` function takes ``sessions=`` and ``shared_only=``.
_SCOPED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_SCOPE_KEYWORDS = ("sessions", "shared_only")
_BY_KEYWORD = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _takes_scope(method: Any) -> bool:
    """True when ``method`` names both scope keywords (a ``**kwargs`` catch-all does not
    count: it may forward to a store that has none). Inspected once per function."""
    func = getattr(method, "__func__", method)
    try:
        return _SCOPED[func]
    except (KeyError, TypeError):
        pass
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        scoped = False
    else:
        scoped = all(n in params and params[n].kind in _BY_KEYWORD for n in _SCOPE_KEYWORDS)
    with contextlib.suppress(TypeError):  # not weakly referenceable: inspected again next time
        _SCOPED[func] = scoped
    return scoped


def read_standing(
    store: Any,
    profile_id: str | None,
    *,
    limit: int,
    min_confidence: float,
    categories: Mapping[str, datetime | None] | None = None,
    sessions: Sequence[str] = (),
    shared_only: bool = False,
) -> Sequence[MemoryEntry]:
    """``store.standing_records`` scoped to the turn's sessions when the store takes the
    scope, else the old call (the render's session stage filters what comes back)."""
    method = store.standing_records
    if (sessions or shared_only) and _takes_scope(method):
        return method(  # type: ignore[no-any-return]
            profile_id,
            limit=limit,
            min_confidence=min_confidence,
            categories=categories,
            sessions=sessions,
            shared_only=shared_only,
        )
    return method(  # type: ignore[no-any-return]
        profile_id, limit=limit, min_confidence=min_confidence, categories=categories
    )


def standing_scope(scopes: Sequence[str | None], shared_only: bool) -> tuple[tuple[str, ...], bool]:
    """The standing read's scope for a turn of ``scopes``: its own sessions (sorted, no
    ``None``), else ``shared_only`` for a scheduled turn; ``((), False)`` reads them all,
    as a turn that names no session sees them all (``stages.filters.session_scope``)."""
    own = tuple(sorted({s for s in scopes if s is not None}))
    return own, shared_only and not own


class StandingCache:
    """Standing entries per store and ``(profile, limit, min_confidence, categories,
    sessions, shared_only)``, between writes."""

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
        sessions: Sequence[str] = (),
        shared_only: bool = False,
    ) -> tuple[MemoryEntry, ...]:
        """The store's standing entries for the profile, as a turn of ``sessions`` (or a
        ``shared_only`` one) may see them; ``()`` without the capability.

        Store errors propagate: the render's recall records them like any
        failed call, and the turn keeps what recall returned.
        """
        if not supports(store, SupportsStandingContext) or limit <= 0:
            return ()
        cats = dict(categories or {})
        own = tuple(sessions)
        key = (profile_id, limit, min_confidence, tuple(sorted(cats.items())), own, shared_only)
        version = store.data_version
        now = time.monotonic()
        with self._lock:
            cached = self._entries(store).get(key)
        if cached is not None and cached[0] == version and now - cached[1] < self._max_age:
            return cached[2]
        entries = tuple(
            e
            for e in read_standing(
                store,
                profile_id,
                limit=limit,
                min_confidence=min_confidence,
                categories=cats,
                sessions=own,
                shared_only=shared_only,
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
    sessions: Sequence[str] = (),
    shared_only: bool = False,
) -> Sequence[MemoryEntry]:
    """:meth:`StandingCache.get` on the process-wide cache (what a render's recall calls)."""
    return CACHE.get(
        store,
        profile_id,
        limit=limit,
        min_confidence=min_confidence,
        categories=categories,
        sessions=sessions,
        shared_only=shared_only,
    )


def standing_fetch(
    store: object,
    config: MemoryInjectConfig,
    profile_id: str | None,
    now: datetime | None,
    *,
    scopes: Sequence[str | None] = (),
    shared_only: bool = False,
) -> Callable[[], Sequence[MemoryEntry]]:
    """The standing-context read of one turn, for the render to run with its recall calls.

    ``scopes`` are the turn's sessions and ``shared_only`` its policy's
    (:func:`standing_scope`): the read returns only rows the turn may see.

    With the sectioned block it also reads what PI shows every turn: open
    scratchpad items, today's daily notes and sessions (the UTC day of
    ``now``, else of the wall clock), open questions.
    """
    r = config.renderer
    own, only_shared = standing_scope(scopes, shared_only)
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
        sessions=own,
        shared_only=only_shared,
    )
