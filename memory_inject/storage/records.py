"""The write path shared by the persistent stores: drafts of a ``store()`` call.

The record itself is :class:`memory_inject.records.MemoryRecord` (the core
model every store and the store contract share); it is re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import attrs

from memory_inject.records import EXTRA_FIELDS, MemoryRecord
from memory_inject.storage.importance import heuristic_importance

__all__ = [
    "CARRIED_ON_STORE",
    "EXTRA_FIELDS",
    "HARD_RULE_TYPES",
    "MemoryRecord",
    "carry_over",
    "is_text",
    "standing_pick",
    "store_draft",
]

#: The rule types that make an L2 record a hard rule (PI's four, and their short forms).
HARD_RULE_TYPES: tuple[str, ...] = (
    "avoid_pattern",
    "avoid",
    "prefer_pattern",
    "prefer",
    "convention",
    "correction",
)


#: ``store()`` keeps these from the row it replaces unless they are passed: identity,
#: usage counters and supersession links belong to the memory, not to one write.
CARRIED_ON_STORE = ("id", "times_used", "last_used_at", "supersedes", "superseded_by")
_NAMED_IN_STORE = frozenset(
    {"key", "content", "category", "session_id", "timestamp", "importance", "namespace"}
)


def store_draft(
    key: str,
    content: str,
    category: str,
    *,
    namespace: str,
    session_id: str | None,
    timestamp: datetime | str | None,
    importance: float | None,
    fields: Mapping[str, Any],
    now: datetime,
) -> MemoryRecord:
    """The record a persistent store's ``store(...)`` call describes, before merging.

    ``fields`` are the other record fields; an unknown one is a ``TypeError``
    naming it, as for any keyword argument. Without an ``importance`` the
    record gets :func:`~memory_inject.storage.importance.heuristic_importance`
    of its category and content, which the store writes like any other field.
    """
    for name in fields:
        if name not in _STORE_FIELDS:
            raise TypeError(f"store() got an unexpected keyword argument {name!r}")
    for name, value in (("key", key), ("content", content), ("session_id", session_id)):
        _check_text(name, value)
    return MemoryRecord(
        key=key,
        content=content,
        category=category,
        session_id=session_id,
        importance=_importance(importance, category, content),
        namespace=namespace,
        **{"timestamp": now if timestamp is None else timestamp, "updated_at": now, **fields},
    )


def is_text(value: object) -> bool:
    """False for a str holding a lone surrogate: no row can hold it (a UTF-8 store refuses
    it, :func:`store_draft` too), so a lookup by it finds nothing rather than failing."""
    if not isinstance(value, str) or value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(name: str, value: object) -> None:
    """A ``ValueError`` naming ``name`` when ``value`` holds a lone surrogate: not text
    (no UTF-8 store can keep it; SQLite failed with a bare ``UnicodeEncodeError``)."""
    if not isinstance(value, str) or value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"'{name}' holds a lone surrogate ({value[exc.start]!r} at index {exc.start}), "
            "which is not text; nothing was written (decode bytes with errors='replace')"
        ) from None


def _importance(given: float | None, category: str, content: str) -> float | None:
    # Not text: MemoryRecord names the bad field.
    if given is not None or not isinstance(content, str):
        return given
    return heuristic_importance(category, content)


def carry_over(
    draft: MemoryRecord,
    old: MemoryRecord,
    fields: Mapping[str, Any],
    timestamp: datetime | str | None,
) -> MemoryRecord:
    """``draft`` updating ``old``: identity, usage and links (and creation time) carry over.

    What ``store(...)`` passed explicitly wins; see :data:`CARRIED_ON_STORE`.
    """
    carry = {n: getattr(old, n) for n in CARRIED_ON_STORE if n not in fields}
    if timestamp is None:
        carry["timestamp"] = old.timestamp
    return draft.evolve(**carry)


_STORE_FIELDS = frozenset(a.name for a in attrs.fields(MemoryRecord)) - _NAMED_IN_STORE


def standing_pick(
    records: Iterable[MemoryRecord],
    limit: int,
    min_confidence: float,
    categories: Mapping[str, datetime | None] | None = None,
) -> list[MemoryRecord]:
    """The standing context among live, active, in-profile ``records`` in insertion order.

    The first ``limit`` L1 records, then the ``limit`` most confident L2 hard
    rules (ties: insertion order), then for each of ``categories`` its
    ``limit`` most recently updated records written at or after the
    category's time (``None``: any time). The SQL stores fetch a superset
    with one statement and select with this, so every store answers alike.
    """
    l1: list[MemoryRecord] = []
    rules: list[tuple[int, MemoryRecord]] = []
    cats = dict(categories or {})
    by_cat: dict[str, list[tuple[int, MemoryRecord]]] = {c: [] for c in cats}
    for n, r in enumerate(records):
        layer = (r.layer or "").upper()
        if layer == "L1":
            l1.append(r)
        elif (
            layer == "L2"
            and r.rule_type in HARD_RULE_TYPES
            and r.confidence is not None
            and r.confidence >= min_confidence
        ):
            rules.append((n, r))
        category = str(r.category)
        if category in cats:
            since = cats[category]
            if since is None or r.timestamp >= since:
                by_cat[category].append((n, r))
    rules.sort(key=lambda p: (-(p[1].confidence or 0.0), p[0]))
    cap = max(0, limit)
    out = l1[:cap] + [r for _, r in rules[:cap]]
    for rows in by_cat.values():
        rows.sort(key=lambda p: (p[1].updated_at or p[1].timestamp, p[0]), reverse=True)
        out.extend(r for _, r in rows[:cap])
    return list({r.key: r for r in out}.values())
