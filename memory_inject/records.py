"""``MemoryRecord``: the full stored row, shared by every store and the store contract.

A record carries the core :class:`~memory_inject.models.MemoryEntry` fields
plus everything the governance stages, multi-source recall and usage counters
need, so the schema is migrated once. ``to_entry`` turns a record into the
entry that ``recall`` returns; the governance fields travel in ``entry.extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
from attrs import field, frozen

from memory_inject.models import MemoryCategory, MemoryEntry, _category, parse_timestamp

__all__ = ["EXTRA_FIELDS", "MemoryRecord"]


def _now() -> datetime:
    return datetime.now(UTC)


def _opt_ts(value: datetime | str | None) -> datetime | None:
    return None if value is None else parse_timestamp(value)


def _strs(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def _mapping(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"'metadata' must be a mapping or None (got {type(value).__name__})")
    return dict(value) or None


def _vector(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(x) for x in value)


def _unit(name: str) -> Any:
    def check(_inst: Any, _attr: Any, value: float | None) -> None:
        if value is not None and not (0.0 <= value <= 1.0):
            raise ValueError(f"'{name}' must be between 0 and 1 (got {value!r})")

    return check


@frozen(slots=True)
class MemoryRecord:
    """One stored memory with every field the library knows about."""

    key: str
    content: str
    category: str = field(default=MemoryCategory.CORE, converter=_category)
    timestamp: datetime = field(factory=_now, converter=parse_timestamp)
    id: str = field(default=None)
    updated_at: datetime | None = field(default=None, converter=_opt_ts)
    session_id: str | None = None
    namespace: str = "default"
    importance: float | None = field(default=None, validator=_unit("importance"))
    confidence: float | None = field(default=None, validator=_unit("confidence"))
    status: str = "active"
    tags: tuple[str, ...] = field(default=(), converter=_strs)
    source: str | None = None
    entity_ids: tuple[str, ...] = field(default=(), converter=_strs)
    profile_id: str | None = None
    scope: Mapping[str, Any] | None = None
    applies_when: tuple[str, ...] = field(default=(), converter=_strs)
    does_not_apply_when: tuple[str, ...] = field(default=(), converter=_strs)
    known_exceptions: tuple[str, ...] = field(default=(), converter=_strs)
    rule_type: str | None = None
    memory_kind: str | None = None
    layer: str | None = None
    supersedes: tuple[str, ...] = field(default=(), converter=_strs)
    superseded_by: str | None = None
    times_used: int = 0
    last_used_at: datetime | None = field(default=None, converter=_opt_ts)
    expires_at: datetime | None = field(default=None, converter=_opt_ts)
    deleted_at: datetime | None = field(default=None, converter=_opt_ts)
    #: Fields of an imported record that have no column of their own (PI's
    #: ``evidence``, ``stability``, ``review``, ``normalized_key``, ``valid_from``,
    #: an inquiry's ``priority``...), kept as a JSON object.
    metadata: Mapping[str, Any] | None = field(default=None, converter=_mapping)
    embedding: tuple[float, ...] | None = field(default=None, converter=_vector)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"'key' must be a non-empty string (got {self.key!r})")
        if not isinstance(self.content, str):
            raise TypeError(f"'content' must be a string (got {type(self.content).__name__})")
        if self.id is None:
            object.__setattr__(self, "id", self.key)
        if self.updated_at is None:
            object.__setattr__(self, "updated_at", self.timestamp)

    def to_entry(self, score: float | None = None) -> MemoryEntry:
        """The entry ``recall`` returns for this record."""
        return MemoryEntry(
            key=self.key,
            content=self.content,
            category=self.category,
            timestamp=self.timestamp,
            session_id=self.session_id,
            score=score,
            importance=self.importance,
            id=self.id,
            namespace=self.namespace,
            extra={name: getattr(self, name) for name in EXTRA_FIELDS},
        )

    def evolve(self, **changes: Any) -> MemoryRecord:
        """A copy with ``changes`` (``attrs.evolve``), converted and validated again.

        ``id`` and ``updated_at`` keep their values unless passed, even when ``key``
        or ``timestamp`` changes.
        """
        return attrs.evolve(self, **changes)


#: The record fields that travel to the pipeline in ``MemoryEntry.extra``.
EXTRA_FIELDS: tuple[str, ...] = (
    "confidence",
    "status",
    "tags",
    "source",
    "entity_ids",
    "profile_id",
    "scope",
    "applies_when",
    "does_not_apply_when",
    "known_exceptions",
    "rule_type",
    "memory_kind",
    "layer",
    "supersedes",
    "superseded_by",
    "times_used",
    "last_used_at",
    "updated_at",
    "metadata",
)
