"""The store seam as the render sees it: one :class:`Seam` per store, probed once.

A render asks a store :class:`~memory_inject.contract.RecallQuery` values and
gets :class:`~memory_inject.contract.RecallAnswer` values back. A store that
implements ``answer`` (every built-in store) is asked directly; a store with
only ``recall`` (and perhaps ``recall_where``, ``arecall``) is asked through a
thin adapter whose answers report nothing degraded. What a store can do is
probed the first time a render uses it and kept with the store (weakly), not
asked again on every call; the methods themselves are looked up at call time,
so a store whose methods are replaced later is still called as it is now.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from attrs import frozen

from memory_inject._filter_first import keeps, restricted
from memory_inject.contract import (
    Memory,
    RecallAnswer,
    RecallQuery,
    SupportsAnswer,
    SupportsAsyncAnswer,
    SupportsAsyncRecall,
    SupportsEntities,
    SupportsFilteredRecall,
    SupportsInterrupt,
    SupportsMentions,
    supports,
)
from memory_inject.models import MemoryEntry

__all__ = ["Seam", "seam_of"]


@frozen(slots=True)
class Seam:
    """What the render may ask of one store, decided once.

    ``answers`` / ``aanswers``: it implements ``answer`` / ``aanswer``;
    otherwise ``arecall`` (``async_recall``) and ``recall_where``
    (``filtered``) are used where present. ``interrupts``: it stops its own
    calls at a deadline (:class:`~memory_inject.contract.SupportsInterrupt`).
    ``reports_waits``: the store's class sets ``honours_deadline = True`` (the
    built-in stores do): it ends its own waits for connections at the query's
    deadline and reports them, and the render gives it
    :data:`~memory_inject._recall.GRACE_S` to say so before it stops listening.
    ``entities`` / ``mentions``: a plan's entity query can match known entity
    names / resolve the input's other names by content.
    """

    answers: bool
    aanswers: bool
    async_recall: bool
    filtered: bool
    entities: bool
    interrupts: bool
    reports_waits: bool
    mentions: bool = False

    def ask(self, store: Memory, q: RecallQuery) -> Callable[[], Any]:
        """The call that answers ``q`` (a ``RecallAnswer``, or a raw batch from ``recall``).

        The store's method is read now, so a store whose method cannot be read
        fails the render here, named on its event.
        """
        if self.answers:
            return partial(store.answer, q)  # type: ignore[attr-defined]
        recall = store.recall
        if q.filtered or q.mode is not None or q.restricted:
            return partial(_legacy_where, store, q, self.filtered)
        return partial(
            recall,
            q.query,
            q.limit,
            session_id=q.session_id,
            since=q.since,  # type: ignore[arg-type]
            until=q.until,  # type: ignore[arg-type]
        )

    def aask(self, store: Memory, q: RecallQuery) -> Callable[[], Awaitable[Any]] | None:
        """The awaitable twin of :meth:`ask`, or None when the store has none for ``q``."""
        if self.aanswers:
            return partial(store.aanswer, q)  # type: ignore[attr-defined]
        if self.async_recall and not q.filtered and q.mode is None and not self.answers:
            return partial(
                store.arecall,  # type: ignore[attr-defined]
                q.query,
                q.limit,
                session_id=q.session_id,
                since=q.since,
                until=q.until,
            )
        return None


def _legacy_where(store: Memory, q: RecallQuery, filtered: bool) -> Any:
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
            return _scan(store, q, field, str(value))

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


def _scan(store: Memory, q: RecallQuery, field: str, value: str) -> list[MemoryEntry]:
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


def _probe(store: Memory) -> Seam:
    return Seam(
        answers=supports(store, SupportsAnswer),
        aanswers=supports(store, SupportsAsyncAnswer),
        async_recall=supports(store, SupportsAsyncRecall),
        filtered=supports(store, SupportsFilteredRecall),
        entities=supports(store, SupportsEntities),
        mentions=supports(store, SupportsMentions),
        interrupts=supports(store, SupportsInterrupt),
        reports_waits=getattr(type(store), "honours_deadline", False) is True,
    )


_SEAMS: weakref.WeakKeyDictionary[Any, Seam] = weakref.WeakKeyDictionary()


def seam_of(store: Memory) -> Seam:
    """The store's :class:`Seam`, probed on first use (every use, for a store that
    cannot be weakly referenced or hashed)."""
    try:
        seam = _SEAMS.get(store)
    except TypeError:
        return _probe(store)
    if seam is None:
        seam = _probe(store)
        with contextlib.suppress(TypeError):
            _SEAMS[store] = seam
    return seam


def as_answer(batch: Any) -> RecallAnswer | None:
    """``batch`` if the store answered with a :class:`RecallAnswer`, else None (a raw batch)."""
    return batch if isinstance(batch, RecallAnswer) else None


def recall_answer(store: Memory, q: RecallQuery) -> RecallAnswer:
    """``q`` answered through ``store``'s ``recall`` (and ``recall_where``) as the seam
    asks a store without ``answer``: for a store whose own ``answer`` adds to that (a
    Markdown store names the blocks it could not read)."""
    filtered = callable(getattr(store, "recall_where", None))
    recall: Any = store.recall
    if q.filtered or q.mode is not None or q.restricted:
        batch = _legacy_where(store, q, filtered)
    else:
        batch = recall(q.query, q.limit, session_id=q.session_id, since=q.since, until=q.until)
    return as_answer(batch) or RecallAnswer(list(batch))
