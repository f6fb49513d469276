"""Values shared by every layer: origins, categories and entries.

The store protocols live in :mod:`memory_inject.contract`.

Everything here is a frozen attrs class or an enum; nothing here does I/O.
"""

from __future__ import annotations

import enum
import math
from datetime import UTC, datetime
from typing import Any

import attrs
from attrs import field, frozen

__all__ = [
    "STANDALONE_SOURCES",
    "MemoryCategory",
    "MemoryEntry",
    "MemoryKind",
    "TurnMeta",
    "TurnOrigin",
    "day_key",
    "parse_timestamp",
    "utc_timestamp",
]

#: Rows written by these sources stand alone: a fact stored on purpose (``remember()``,
#: the memory tools) is not a turn of the conversation around it, so it takes no
#: neighbours as context (both stores' writes; rows written before keep theirs) and is
#: never a companion of another turn (``RelevanceFilter``). Facts written seconds apart
#: otherwise hold each other's words, which makes every word look three times as common
#: and a question's missing words weigh the more (``benchmarks/facts.py --layout now
#: --layout session``, docs/performance.md). Re-exported by ``storage.day_vote``.
STANDALONE_SOURCES = ("remember", "tool")


def day_key(session_id: object, timestamp: object) -> tuple[object, str]:
    """A row's day: its session and the UTC date it was written (``YYYY-MM-DD``), from a
    stored timestamp text (SQLite keeps UTC ``...Z`` text) or an aware datetime."""
    if isinstance(timestamp, datetime):
        zoned = timestamp.astimezone(UTC) if timestamp.tzinfo is not None else timestamp
        return session_id, zoned.date().isoformat()
    return session_id, timestamp[:10] if isinstance(timestamp, str) else ""


class TurnOrigin(enum.StrEnum):
    """Who started the turn. The injection decision keys on this, not on the code path."""

    INTERACTIVE = "interactive"
    CHANNEL = "channel"
    CRON = "cron"
    DAEMON = "daemon"
    AGENT_DIRECT = "agent_direct"
    SUB_TURN = "sub_turn"


class MemoryCategory(enum.StrEnum):
    """The three built-in categories. Any other string is a custom category."""

    CORE = "core"
    DAILY = "daily"
    CONVERSATION = "conversation"


class MemoryKind(enum.StrEnum):
    """What sort of memory an entry is (zeroclaw's ``MemoryKind``), orthogonal to its category.

    zeroclaw's ``Semantic(Preference | Fact | Decision | Entity)`` is written
    ``semantic:<sub-kind>``, so one string names both levels and
    ``kind.startswith("semantic")`` asks the outer one.
    """

    EPISODIC = "episodic"
    SEMANTIC_PREFERENCE = "semantic:preference"
    SEMANTIC_FACT = "semantic:fact"
    SEMANTIC_DECISION = "semantic:decision"
    SEMANTIC_ENTITY = "semantic:entity"
    PROCEDURAL = "procedural"


def parse_timestamp(value: datetime | str, name: str = "timestamp") -> datetime:
    """Return an aware datetime; naive values and RFC 3339 strings without zone are UTC.
    A bad value is an error naming the field ``name``."""
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"'{name}' must be an RFC 3339 date-time (got {value!r})") from None
    if not isinstance(value, datetime):
        raise TypeError(f"'{name}' must be a datetime or an RFC 3339 string (got {value!r})")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        value = value.replace(tzinfo=UTC)
    return value


def utc_timestamp(value: datetime | str, name: str = "timestamp") -> datetime:
    """:func:`parse_timestamp` in UTC, as every store reads a record's times back (a time
    of a zone with summer time compares with one of the same zone by its clock, so the
    hour a clock repeats sorted wrong); ``ValueError`` for a time with no UTC day
    (``9999-12-31T23:30-05:00`` is a time of its zone, past year 9999 in UTC)."""
    value = parse_timestamp(value, name)
    if value.tzinfo is UTC:
        return value
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"'{name}' is out of range in UTC (got {value.isoformat()!r})") from None


def _timestamp(value: datetime | str | None) -> datetime | None:
    return None if value is None else parse_timestamp(value)


def _category(value: str) -> str:
    if isinstance(value, MemoryCategory):
        return value
    if not isinstance(value, str):
        raise TypeError(f"'category' must be a string (got {value!r})")
    try:
        return MemoryCategory(value)
    except ValueError:
        return value


def _kind(value: MemoryKind | str | None) -> MemoryKind | None:
    if value is None or type(value) is MemoryKind:
        return value
    if not isinstance(value, str):
        raise TypeError(f"'kind' must be a MemoryKind, a string or None (got {value!r})")
    try:
        return MemoryKind(value)
    except ValueError:
        names = ", ".join(repr(k.value) for k in MemoryKind)
        raise ValueError(f"'kind' must be one of {names} or None (got {value!r})") from None


def _is_bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"'{attribute.name}' must be a bool (got {value!r})")


def _optional_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"'{attribute.name}' must be a string or None (got {value!r})")


def _score(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"'score' must be a finite number (got {value!r})")
    return value


@frozen(slots=True)
class MemoryEntry:
    """One remembered thing, as a store returns it from ``recall``.

    ``timestamp`` is when it was written (aware; ``None`` means unknown, which
    disables decay for the entry). ``score`` is the store's relevance in 0..1 or
    ``None`` for time-only recalls. ``id`` defaults to ``key``. ``extra`` holds
    store-specific fields (confidence, status, tags, ...) that later stages read.

    zeroclaw's further fields come last, so positional construction is
    unchanged: ``kind`` (a :class:`MemoryKind`, or its string), ``pinned``,
    ``tenant_id``, ``agent_alias`` and ``agent_id``. The stores keep and return
    them and JSONL carries them; no stage reads them (``pinned`` exempts an
    entry from nothing: zeroclaw gives it no behaviour in injection either).
    """

    key: str
    content: str
    category: str = field(converter=_category)
    timestamp: datetime | None = field(converter=_timestamp)
    session_id: str | None = None
    score: float | None = field(default=None, converter=_score)
    importance: float | None = None
    id: str = field(default=None)
    namespace: str = "default"
    extra: dict[str, Any] = field(factory=dict, eq=False, hash=False)
    kind: MemoryKind | None = field(default=None, converter=_kind)
    pinned: bool = field(default=False, validator=_is_bool)
    tenant_id: str | None = field(default=None, validator=_optional_str)
    agent_alias: str | None = field(default=None, validator=_optional_str)
    agent_id: str | None = field(default=None, validator=_optional_str)

    def __attrs_post_init__(self) -> None:
        if self.id is None:
            object.__setattr__(self, "id", self.key)

    def with_score(self, score: float | None) -> MemoryEntry:
        """A copy with another score (the pipeline never mutates an entry).

        The same as ``attrs.evolve(self, score=score)`` but copies the already
        converted fields instead of converting them again (decay and rerank
        call this per entry, per turn).
        """
        new = object.__new__(type(self))
        for name in _ENTRY_FIELDS:
            _set(new, name, getattr(self, name))
        _set(new, "score", _score(score))
        return new


_ENTRY_FIELDS = tuple(a.name for a in attrs.fields(MemoryEntry))
_set = object.__setattr__


@frozen(slots=True)
class TurnMeta:
    """Correlation carrier for one turn; these reach the recall event."""

    channel: str = "cli"
    agent_alias: str | None = None
    turn_id: str = ""


def is_time_only(query: str) -> bool:
    """True for the queries the recall contract reads as "most recent"."""
    q = query.strip()
    return q in ("", "*")
