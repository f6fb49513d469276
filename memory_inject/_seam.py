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
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from attrs import frozen

from memory_inject._recall_only import legacy_where
from memory_inject.contract import (
    Memory,
    RecallAnswer,
    RecallQuery,
    SupportsAnswer,
    SupportsAsyncAnswer,
    SupportsAsyncRecall,
    SupportsEntities,
    SupportsExcludingRecall,
    SupportsFilteredRecall,
    SupportsInterrupt,
    SupportsMentions,
    supports,
)

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
    names / resolve the input's other names by content. ``excludes``: its ``answer``
    leaves out the rows a ``RecallQuery.exclude`` names (a refill asks it once more
    with one, rather than ever more rows).
    """

    answers: bool
    aanswers: bool
    async_recall: bool
    filtered: bool
    entities: bool
    interrupts: bool
    reports_waits: bool
    mentions: bool = False
    excludes: bool = False

    def ask(self, store: Memory, q: RecallQuery) -> Callable[[], Any]:
        """The call that answers ``q`` (a ``RecallAnswer``, or a raw batch from ``recall``).

        The store's method is read now, so a store whose method cannot be read
        fails the render here, named on its event.
        """
        if self.answers:
            return partial(store.answer, q)  # type: ignore[attr-defined]
        recall = store.recall
        if q.filtered or q.mode is not None or q.restricted:
            return partial(legacy_where, store, q, self.filtered)
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
        excludes=_excludes(store),
    )


def _excludes(store: Memory) -> bool:
    """True when ``store`` answers and says it honours ``RecallQuery.exclude``."""
    if not (supports(store, SupportsAnswer) and supports(store, SupportsExcludingRecall)):
        return False
    try:
        return store.recall_excludes is True
    except Exception:  # noqa: BLE001 - a store that cannot say is asked as before
        return False


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
