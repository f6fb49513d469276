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
    profiles). Nothing here degrades, so the answer reports nothing."""
    q = query
    why = keeps(q.statuses if not q.filtered else None, q.profiles)
    if q.filtered:

        def fetch(n: int) -> Sequence[MemoryEntry]:
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
            return store.recall_where(q.query, n, session_id=q.session_id, mode=q.mode)

    else:
        found = store.recall(
            q.query, q.limit, session_id=q.session_id, since=q.since, until=q.until
        )
        return RecallAnswer(builtins.list(found), strategy=None)
    if why is None:
        return RecallAnswer(builtins.list(fetch(q.limit)), strategy=None)
    _, kept, over = restricted(fetch, builtins.list, q.limit, why)
    return RecallAnswer(kept, strategy=None, passed_over=over)
