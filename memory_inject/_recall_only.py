"""A store with only ``recall`` answering :class:`~memory_inject.contract.RecallQuery` values.

The seam (``memory_inject._seam``) asks such a store through these functions: a
plan's or a governed turn's query is filtered here (filter first, the rows passed
over on the answer), a plain one is the store's ``recall``. A store of the library
with ``recall`` alone that answers queries itself to add to them (the Markdown store
names the blocks it could not read) uses :func:`recall_answer`, so it answers as the
seam would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memory_inject._filter_first import keeps, restricted
from memory_inject.contract import Memory, RecallAnswer, RecallQuery
from memory_inject.models import MemoryEntry

__all__ = ["legacy_where", "recall_answer", "scan_extra"]


def legacy_where(store: Memory, q: RecallQuery, filtered: bool) -> Any:
    """A plan's or a governed turn's query on a store without ``answer``.

    ``recall_where`` when the store has it, else Python filters over
    ``recall``. A restriction the store cannot apply itself (profiles, and
    statuses for plain ``recall``) is applied here, filtering first; the rows
    it passed over travel on the answer, as a store's own would.
    """
    only: dict[str, Any] = {} if q.statuses is None else {"statuses": q.statuses}
    where: Any = getattr(store, "recall_where", None) if filtered else None
    fetch: Callable[[int], Sequence[MemoryEntry]]
    if q.filtered:
        field, value = (
            ("entity_id", q.entity_id) if q.entity_id is not None else ("source", q.source)
        )
        if where is None:
            return scan_extra(store, q, field, str(value))

        def fetch(n: int) -> Sequence[MemoryEntry]:
            return where(None, n, session_id=q.session_id, **{field: value}, **only)  # type: ignore[no-any-return]

        keep = keeps(None, q.profiles)
    elif where is not None:

        def fetch(n: int) -> Sequence[MemoryEntry]:
            return where(q.query, n, session_id=q.session_id, mode=q.mode, **only)  # type: ignore[no-any-return]

        keep = keeps(None, q.profiles)
    else:

        def fetch(n: int) -> Sequence[MemoryEntry]:
            return store.recall(q.query, n, session_id=q.session_id)

        keep = keeps(q.statuses, q.profiles)
    if keep is None:
        return fetch(q.limit)
    odd: list[Any] = []

    def listed(batch: Sequence[MemoryEntry]) -> list[MemoryEntry]:
        # Anything else in the batch is not filtered away: it goes on with the kept
        # entries, and the recall's validation names it, as for an unrestricted query.
        odd[:] = [e for e in batch if not isinstance(e, MemoryEntry)]
        return [e for e in batch if isinstance(e, MemoryEntry)]

    _, kept, over = restricted(fetch, listed, q.limit, keep)
    return RecallAnswer([*kept, *odd], passed_over=over)


def scan_extra(store: Memory, q: RecallQuery, field: str, value: str) -> list[MemoryEntry]:
    """Rows whose ``extra[field]`` holds ``value`` (and of ``q``'s statuses and profiles),
    best confidence first."""
    rows = store.recall("*", max(q.limit * 20, 200), session_id=q.session_id)
    keep = keeps(q.statuses, q.profiles)
    hits = []
    for e in rows:
        have = e.extra.get("entity_ids" if field == "entity_id" else field) if e.extra else None
        if keep is not None and not keep(e):
            continue
        if have == value or (isinstance(have, tuple | list) and value in have):
            hits.append(e)
    hits.sort(key=lambda e: -(e.extra.get("confidence") or 0.0))
    return hits[: q.limit]


def recall_answer(store: Memory, q: RecallQuery) -> RecallAnswer:
    """``q`` answered through ``store``'s ``recall`` (and ``recall_where``) as the seam
    asks a store without ``answer``: for a store whose own ``answer`` adds to that (a
    Markdown store names the blocks it could not read)."""
    filtered = callable(getattr(store, "recall_where", None))
    recall: Any = store.recall
    if q.filtered or q.mode is not None or q.restricted:
        batch = legacy_where(store, q, filtered)
    else:
        batch = recall(q.query, q.limit, session_id=q.session_id, since=q.since, until=q.until)
    return batch if isinstance(batch, RecallAnswer) else RecallAnswer(list(batch))
