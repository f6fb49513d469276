"""The seam's two values: :class:`RecallQuery` (a render's question) and :class:`RecallAnswer`.

A render asks a store one :class:`RecallQuery` per call and gets one
:class:`RecallAnswer` back (``SupportsAnswer``). Their public home is
:mod:`memory_inject.contract`, which re-exports them with the protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs
from attrs import frozen

from memory_inject._skip_keys import key_skip_reason
from memory_inject.models import MemoryEntry
from memory_inject.records import MemoryRecord

__all__ = ["RecallAnswer", "RecallExclusion", "RecallQuery", "check_recall"]


def check_recall(query: object, limit: object, session_id: object) -> None:
    """``TypeError`` naming the argument unless ``query`` is a str, ``limit`` an int and
    ``session_id`` a str or None (a store's ``recall`` arguments, checked before use:
    ``recall(None, 5)`` was an ``AttributeError`` from deep inside a store)."""
    if not isinstance(query, str):
        raise TypeError(f"recall: 'query' must be a str (got {type(query).__name__})")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"recall: 'limit' must be an int (got {type(limit).__name__})")
    if session_id is not None and not isinstance(session_id, str):
        raise TypeError(
            f"recall: 'session_id' must be a str or None (got {type(session_id).__name__})"
        )


@frozen(slots=True)
class RecallExclusion:
    """The rows a turn never shows, as data a store can put in its query
    (:class:`~memory_inject.contract.SupportsExcludingRecall`).

    ``skip_keys``: rows whose key the skip set's key rules drop
    (:func:`~memory_inject._skip_keys.key_skip_reason`: ``user_msg``, ``user_msg_*``,
    ``assistant_resp``, ``assistant_resp_*``, ``*_history``; trimmed, ASCII
    case-insensitive). ``categories``: rows of these categories (``conversation``
    when the policy excludes chat memory). ``sessionless``: only rows bound to no
    session (a scheduled turn's). An excluded row never takes a slot, and a kept
    row's score is what it would be without the exclusion. A store may leave out
    fewer rows than this names (the skip set still drops them), never more.
    """

    skip_keys: bool = False
    categories: tuple[str, ...] = ()
    sessionless: bool = False

    def drops(self, entry: MemoryEntry | MemoryRecord) -> bool:
        """True when ``entry`` is one of the rows this names (the in-memory stores' test)."""
        return (
            (self.sessionless and entry.session_id is not None)
            or (bool(self.categories) and str(entry.category) in self.categories)
            or (self.skip_keys and key_skip_reason(entry.key) is not None)
        )


@frozen(slots=True)
class RecallQuery:
    """One question a render asks a store: a value, the same for every kind of store.

    ``query`` and ``limit`` as for ``recall`` (an empty, blank or ``"*"`` query
    means "most recent first"); ``session_id`` the one scope asked (None: the
    store's sessionless view); ``since`` / ``until`` an inclusive time window (a
    datetime, or ISO 8601 text). A recall plan's query adds ``mode``
    (``"semantic"`` or ``"lexical"``: one modality only), ``entity_id`` or
    ``source`` (rows tagged with that entity, or written by that source) and
    ``statuses`` (only rows of those statuses, before the limit). A governed
    turn (PI's stages) adds ``statuses`` and ``profiles`` (only rows bound to one
    of those profiles, ``None`` standing for rows bound to none), so a store
    filters first and ranks then, as PI does. ``deadline`` is
    the turn's deadline as a :func:`time.perf_counter` value (None: none): a store
    that waits for a connection or a worker waits no longer than that, and says so
    (:class:`~memory_inject.exceptions.RecallWaitError`). ``exclude`` (a
    :class:`RecallExclusion`, only for a store that says it honours it) names rows
    that must not take a slot: a refill's query past a chat's own autosaves."""

    query: str
    limit: int
    session_id: str | None = None
    since: datetime | str | None = None
    until: datetime | str | None = None
    mode: str | None = None
    entity_id: str | None = None
    source: str | None = None
    statuses: tuple[str, ...] | None = None
    deadline: float | None = None
    profiles: tuple[str | None, ...] | None = None
    exclude: RecallExclusion | None = None

    def __attrs_post_init__(self) -> None:
        check_recall(self.query, self.limit, self.session_id)

    @property
    def restricted(self) -> bool:
        """True when the query keeps only some statuses or profiles (filter first, then rank)."""
        return self.statuses is not None or self.profiles is not None

    @property
    def filtered(self) -> bool:
        """True for a plan's entity or source query (rows by tag, not by relevance)."""
        return self.entity_id is not None or self.source is not None


@frozen(slots=True)
class RecallAnswer:
    """What a store answered to one :class:`RecallQuery`: the entries, and what degraded.

    ``entries`` best first. ``degraded`` has one line per thing that made
    this answer less than it should be (``"embedder_failed: ..."``,
    ``"damaged_rows: ..."``, ``"fts_failed: ..."``); it reaches the recall
    event of the turn that asked, and no other. ``strategy`` says how the
    store searched (``"keyword"``, ``"vector"``, ``"hybrid"``, ``"like"``,
    ``"recent"``, ``"none"``; None when the store does not say), with the hits
    of each stage. ``passed_over`` holds the rows a restricted query
    (``statuses``, ``profiles``) left out that ranked above the rows it kept:
    a governed turn's stages drop them by name (``status:deprecated``), so the
    trace reads as PI's, and they never take a slot. ``similarity`` is how
    close the searched scope's nearest row is to the query by the store's
    embedder, on the calibrated 0..1 scale of its vector scores (None: no
    vector stage ran); ``min_prompt_similarity`` gates a render on it.
    """

    entries: Sequence[MemoryEntry] = attrs.field(factory=list)
    degraded: tuple[str, ...] = ()
    strategy: str | None = None
    keyword_hits: int = 0
    vector_hits: int = 0
    passed_over: Sequence[MemoryEntry] = ()
    similarity: float | None = None
