"""``InMemoryStore.answer``: one :class:`~memory_inject.contract.RecallQuery` answered.

Split out of :mod:`.memory` (which keeps the records and their statistics).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory_inject._filter_first import keeps, restricted
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.models import MemoryEntry

if TYPE_CHECKING:
    from memory_inject.storage.memory import InMemoryStore

__all__ = ["memory_answer"]


def memory_answer(store: InMemoryStore, query: RecallQuery) -> RecallAnswer:
    """``store``'s answer to ``query``: ``recall``, or ``recall_where`` for a plan's
    filtered or restricted query (filter-first when the query restricts statuses or
    profiles). Nothing here degrades, so the answer reports nothing. ``exclude``: the
    records it names never take a slot (left out of a ranked recall's pool; a tagged
    query's rows are all read, then cut)."""
    q = query
    ex = q.exclude
    why = keeps(q.statuses if not q.filtered else None, q.profiles)
    if q.filtered:

        def fetch(n: int) -> Sequence[MemoryEntry]:
            if ex is not None:
                every = tagged(max(n, store.count()))
                return [e for e in every if not ex.drops(e)][: max(n, 0)]
            return tagged(n)

        def tagged(n: int) -> Sequence[MemoryEntry]:
            return store.recall_where(
                None,
                n,
                session_id=q.session_id,
                entity_id=q.entity_id,
                source=q.source,
                statuses=q.statuses,
            )

    elif q.mode is not None or q.restricted:

        def fetch(n: int) -> Sequence[MemoryEntry]:
            if ex is not None:  # recall_where without a tag is recall (one modality)
                return store.recall_excluding(q.query, n, q.session_id, None, None, ex)
            return store.recall_where(q.query, n, session_id=q.session_id, mode=q.mode)

    else:
        found = store.recall_excluding(q.query, q.limit, q.session_id, q.since, q.until, ex)
        return RecallAnswer(builtins.list(found), strategy=None)
    if why is None:
        return RecallAnswer(builtins.list(fetch(q.limit)), strategy=None)
    _, kept, over = restricted(fetch, builtins.list, q.limit, why)
    return RecallAnswer(kept, strategy=None, passed_over=over)
