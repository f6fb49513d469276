"""``MemoryRecord``: the full stored row, shared by every store and the store contract.

A record carries the core :class:`~memory_inject.models.MemoryEntry` fields
plus everything the governance stages, multi-source recall and usage counters
need, so the schema is migrated once. ``to_entry`` turns a record into the
entry that ``recall`` returns; the governance fields travel in ``entry.extra``.

zeroclaw's entry fields ``kind``, ``pinned``, ``tenant_id``, ``agent_alias``
and ``agent_id`` (:data:`IN_METADATA`) have no column of their own: a store
keeps them in the ``metadata`` JSON under :data:`ENTRY_KEY`
(:attr:`MemoryRecord.stored_metadata` packs them, and a record built from
metadata holding that key unpacks them), so adding them changed no schema.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
from attrs import field, frozen

from memory_inject.models import (
    MemoryCategory,
    MemoryEntry,
    MemoryKind,
    _category,
    _is_bool,
    _kind,
    _optional_str,
    utc_timestamp,
)

__all__ = [
    "COLUMN_FIELDS",
    "ENTRY_KEY",
    "EXTRA_FIELDS",
    "IN_METADATA",
    "MemoryRecord",
    "split_entry_fields",
]


def _now() -> datetime:
    return datetime.now(UTC)


def _opt_ts(value: datetime | str | None, name: str) -> datetime | None:
    """The optional date-time field ``name`` (an error names it)."""
    return None if value is None else utc_timestamp(value, name)


def _updated_at(value: datetime | str | None) -> datetime | None:
    return _opt_ts(value, "updated_at")


def _last_used_at(value: datetime | str | None) -> datetime | None:
    return _opt_ts(value, "last_used_at")


def _expires_at(value: datetime | str | None) -> datetime | None:
    return _opt_ts(value, "expires_at")


def _deleted_at(value: datetime | str | None) -> datetime | None:
    return _opt_ts(value, "deleted_at")


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
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise TypeError(
                f"'{name}' must be a number between 0 and 1 or None "
                f"(got {type(value).__name__} {value!r:.40})"
            )
        if value is not None and not (0.0 <= value <= 1.0):
            raise ValueError(f"'{name}' must be between 0 and 1 (got {value!r})")

    return check


@frozen(slots=True)
class MemoryRecord:
    """One stored memory with every field the library knows about."""

    key: str
    content: str
    category: str = field(default=MemoryCategory.CORE, converter=_category)
    timestamp: datetime = field(factory=_now, converter=utc_timestamp)
    id: str = field(default=None)
    updated_at: datetime | None = field(default=None, converter=_updated_at)
    session_id: str | None = field(default=None, validator=_optional_str)
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
    last_used_at: datetime | None = field(default=None, converter=_last_used_at)
    expires_at: datetime | None = field(default=None, converter=_expires_at)
    deleted_at: datetime | None = field(default=None, converter=_deleted_at)
    #: Fields of an imported record that have no column of their own (PI's
    #: ``evidence``, ``stability``, ``review``, ``normalized_key``, ``valid_from``,
    #: an inquiry's ``priority``...), kept as a JSON object.
    metadata: Mapping[str, Any] | None = field(default=None, converter=_mapping)
    embedding: tuple[float, ...] | None = field(default=None, converter=_vector)
    #: zeroclaw's entry fields, kept in ``metadata`` by the stores (see the module docstring).
    kind: MemoryKind | None = field(default=None, converter=_kind)
    pinned: bool = field(default=False, validator=_is_bool)
    tenant_id: str | None = field(default=None, validator=_optional_str)
    agent_alias: str | None = field(default=None, validator=_optional_str)
    agent_id: str | None = field(default=None, validator=_optional_str)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"'key' must be a non-empty string (got {self.key!r})")
        if not isinstance(self.content, str):
            raise TypeError(f"'content' must be a string (got {type(self.content).__name__})")
        if self.id is None:
            object.__setattr__(self, "id", self.key)
        if self.updated_at is None:
            object.__setattr__(self, "updated_at", self.timestamp)
        if self.metadata is not None and ENTRY_KEY in self.metadata:
            rest, packed = split_entry_fields(self.metadata)
            for name, value in packed.items():
                if getattr(self, name) == _ENTRY_DEFAULTS[name]:  # a field given wins
                    object.__setattr__(self, name, value)
            object.__setattr__(self, "metadata", rest)

    @property
    def stored_metadata(self) -> Mapping[str, Any] | None:
        """``metadata`` as a store writes it: with the entry fields that are not at their
        default packed under :data:`ENTRY_KEY` (None when there is nothing to write)."""
        packed = {
            name: str(value) if name == "kind" else value
            for name in IN_METADATA
            if (value := getattr(self, name)) != _ENTRY_DEFAULTS[name]
        }
        if not packed:
            return self.metadata
        return {**(self.metadata or {}), ENTRY_KEY: packed}

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
            kind=self.kind,
            pinned=self.pinned,
            tenant_id=self.tenant_id,
            agent_alias=self.agent_alias,
            agent_id=self.agent_id,
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

#: The key of ``metadata`` under which a store keeps the fields of :data:`IN_METADATA`.
ENTRY_KEY = "_entry"

#: The record fields a store keeps in ``metadata`` rather than in a column of their own.
IN_METADATA: tuple[str, ...] = ("kind", "pinned", "tenant_id", "agent_alias", "agent_id")

_ENTRY_DEFAULTS: dict[str, Any] = {
    "kind": None,
    "pinned": False,
    "tenant_id": None,
    "agent_alias": None,
    "agent_id": None,
}

#: The record fields that are columns of the SQL stores, in declaration order.
COLUMN_FIELDS: tuple[str, ...] = tuple(
    a.name for a in attrs.fields(MemoryRecord) if a.name not in IN_METADATA
)


def split_entry_fields(
    metadata: Mapping[str, Any],
) -> tuple[Mapping[str, Any] | None, dict[str, Any]]:
    """``metadata`` without :data:`ENTRY_KEY` (None when nothing is left), and the entry
    fields packed under it, checked: ``ValueError`` / ``TypeError`` name the bad one."""
    rest = dict(metadata)
    packed = rest.pop(ENTRY_KEY, None)
    if packed is None:
        return rest or None, {}
    if not isinstance(packed, Mapping):
        raise TypeError(f"'metadata.{ENTRY_KEY}' must be an object (got {packed!r:.60})")
    unknown = sorted(set(packed) - set(IN_METADATA))
    if unknown:
        raise ValueError(f"'metadata.{ENTRY_KEY}' has unknown fields: {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for name, value in packed.items():
        if name == "kind":
            out[name] = _kind(value)
        elif name == "pinned":
            if not isinstance(value, bool):
                raise TypeError(f"'pinned' must be a bool (got {value!r:.60})")
            out[name] = value
        else:
            if value is not None and not isinstance(value, str):
                raise TypeError(f"'{name}' must be a string or None (got {value!r:.60})")
            out[name] = value
    return rest or None, out
