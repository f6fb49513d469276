"""The JSON Lines form of a :class:`MemoryRecord`, shared by every persistent store.

One object per line, one key per record field, so an export from SQLite
imports into PostgreSQL and back without losing anything. Timestamps are
written in the fixed-width UTC form the SQLite store also keeps on disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import IO, Any

import attrs

from memory_inject.storage._pi_records import is_pi_record, pi_record
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "RECORD_FIELDS",
    "format_ts",
    "import_confidence",
    "read_jsonl",
    "record_from_json",
    "record_to_json",
    "write_jsonl",
]

RECORD_FIELDS: tuple[str, ...] = tuple(a.name for a in attrs.fields(MemoryRecord))

_TIMESTAMPS = frozenset({"timestamp", "updated_at", "last_used_at", "expires_at", "deleted_at"})
_LISTS = frozenset(
    {"tags", "entity_ids", "applies_when", "does_not_apply_when", "known_exceptions", "supersedes"}
)
_OPTIONAL_STR = frozenset(
    {"session_id", "source", "profile_id", "rule_type", "memory_kind", "layer", "superseded_by"}
)
_REQUIRED_STR = frozenset({"key", "content", "category", "id", "namespace", "status"})
_NUMBERS = frozenset({"importance", "confidence"})


def format_ts(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC: fixed width, so text order is time order."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    d = value.astimezone(UTC)
    return (
        f"{d.year:04d}-{d.month:02d}-{d.day:02d}T"
        f"{d.hour:02d}:{d.minute:02d}:{d.second:02d}.{d.microsecond:06d}Z"
    )


def record_to_json(record: MemoryRecord) -> dict[str, Any]:
    """Every field of ``record`` as JSON-ready values (tuples become lists)."""
    out: dict[str, Any] = {}
    for name in RECORD_FIELDS:
        value = getattr(record, name)
        if name in _TIMESTAMPS:
            value = None if value is None else format_ts(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif name in ("scope", "metadata") and value is not None:
            value = dict(value)
        out[name] = value
    return out


def _check_types(obj: Mapping[str, Any]) -> None:
    for name, value in obj.items():
        if name in _REQUIRED_STR and value is not None and not isinstance(value, str):
            raise ValueError(f"'{name}' must be a string (got {value!r})")
        if name in _OPTIONAL_STR and value is not None and not isinstance(value, str):
            raise ValueError(f"'{name}' must be a string or null (got {value!r})")
        if name in _TIMESTAMPS and value is not None and not isinstance(value, str):
            raise ValueError(f"'{name}' must be an RFC 3339 string or null (got {value!r})")
        if name in _LISTS and not isinstance(value, list | str):
            raise ValueError(f"'{name}' must be a list of strings (got {value!r})")
        if name in _NUMBERS and value is not None and not _is_number(value):
            raise ValueError(f"'{name}' must be a number or null (got {value!r})")
        if name == "times_used" and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"'times_used' must be an integer (got {value!r})")
        if name in ("scope", "metadata") and value is not None and not isinstance(value, dict):
            raise ValueError(f"'{name}' must be an object or null (got {value!r})")
        if (
            name == "embedding"
            and value is not None
            and (not isinstance(value, list) or not all(_is_number(x) for x in value))
        ):
            raise ValueError(f"'embedding' must be a list of numbers or null (got {value!r:.60})")


def import_confidence(value: Any) -> Any:
    """The one rule for a confidence read from outside: 0..1 as is, (1, 100] a percentage.

    founder-os stores confidence as an integer 0..100, PI and our exports as
    0..1, so a value above 1 (up to 100) is divided by 100; ``1`` stays 1.0.
    Anything else is left for the record's own check to refuse.
    """
    if _is_number(value) and 1 < value <= 100:
        return value / 100
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def record_from_json(obj: Any) -> MemoryRecord:
    """The record a JSON object describes; ``ValueError`` names the first problem."""
    if not isinstance(obj, dict):
        raise ValueError(f"each line must be a JSON object (got {type(obj).__name__})")
    if is_pi_record(obj):
        return pi_record(obj)
    unknown = sorted(set(obj) - set(RECORD_FIELDS))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    for name in ("key", "content"):
        if name not in obj:
            raise ValueError(f"missing field {name!r}")
    _check_types(obj)
    # A null id, status, category or namespace means "the default", as when omitted.
    clean = {k: v for k, v in obj.items() if not (v is None and k in _REQUIRED_STR)}
    if "confidence" in clean:
        clean["confidence"] = import_confidence(clean["confidence"])
    try:
        return MemoryRecord(**clean)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from exc


def _lines(src: str | os.PathLike[str] | IO[str]) -> Iterator[tuple[int, str]]:
    if isinstance(src, str | os.PathLike):
        with open(src, encoding="utf-8") as fh:
            yield from enumerate(fh, start=1)
    else:
        yield from enumerate(src, start=1)


def read_jsonl(src: str | os.PathLike[str] | IO[str]) -> Iterator[tuple[int, MemoryRecord]]:
    """``(line_number, record)`` for each non-blank line; a bad line raises ``ValueError``."""
    for lineno, line in _lines(src):
        if not line.strip():
            continue
        try:
            record = record_from_json(json.loads(line))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise ValueError(f"line {lineno}: {exc}") from exc
        yield lineno, record


def write_jsonl(dst: str | os.PathLike[str] | IO[str], records: Iterable[MemoryRecord]) -> int:
    """Write one JSON object per record; returns how many were written."""
    if isinstance(dst, str | os.PathLike):
        with open(dst, "w", encoding="utf-8") as fh:
            return write_jsonl(fh, records)
    n = 0
    for record in records:
        dst.write(json.dumps(record_to_json(record), ensure_ascii=False, sort_keys=False))
        dst.write("\n")
        n += 1
    return n
