"""The JSON Lines form of a :class:`MemoryRecord`, shared by every persistent store.

One object per line, one key per record field, so an export from SQLite
imports into PostgreSQL and back without losing anything. zeroclaw's entry
fields (``kind``, ``pinned``, ``tenant_id``, ``agent_alias``, ``agent_id``)
are top-level keys like the others, although the SQL stores keep them in
``metadata``. Timestamps are
written in the fixed-width UTC form the SQLite store also keeps on disk.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import IO, Any

import attrs

from memory_inject.storage._pi_records import is_pi_record, pi_record
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "RECORD_FIELDS",
    "check_regular_file",
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
    {
        "session_id",
        "source",
        "profile_id",
        "rule_type",
        "memory_kind",
        "layer",
        "superseded_by",
        "kind",
        "tenant_id",
        "agent_alias",
        "agent_id",
    }
)
_REQUIRED_STR = frozenset({"key", "content", "category", "id", "namespace", "status"})
_NUMBERS = frozenset({"importance", "confidence"})
_MAX_TIMES_USED = 2**63 - 1  # SQLite's and PostgreSQL's BIGINT
_MAX_FLOAT32 = 3.4028234663852886e38  # vectors are kept as float32
_MAX_SCOPE_DEPTH = 32


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
        elif name == "kind" and value is not None:
            value = str(value)
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
        if name == "pinned" and not isinstance(value, bool):
            raise ValueError(f"'pinned' must be true or false (got {value!r})")
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


def _check_values(obj: Mapping[str, Any]) -> None:
    """What the types allow but no store can keep: huge counters, vectors and nesting."""
    times_used = obj.get("times_used")
    if isinstance(times_used, int) and not 0 <= times_used <= _MAX_TIMES_USED:
        raise ValueError(f"'times_used' must be between 0 and 2**63 - 1 (got {times_used!r:.40})")
    for name in _NUMBERS:
        value = obj.get(name)
        if value is not None and not _finite(value):
            raise ValueError(f"'{name}' must be a finite number (got {value!r:.40})")
    vector = obj.get("embedding")
    if vector is not None:
        for i, x in enumerate(vector):
            if not _finite(x) or abs(x) > _MAX_FLOAT32:
                raise ValueError(
                    f"'embedding' must hold finite float32 numbers (got {x!r:.40} at {i})"
                )
    if _depth(obj.get("scope")) > _MAX_SCOPE_DEPTH:
        raise ValueError(f"'scope' is nested deeper than {_MAX_SCOPE_DEPTH} levels")
    for name, value in obj.items():
        if isinstance(value, str):
            _check_text(name, value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    _check_text(name, item)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _check_text(name: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        raise ValueError(
            f"'{name}' holds a lone surrogate (U+{ord(bad):04X} at {exc.start})"
        ) from None


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (iteratively: no recursion limit)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > _MAX_SCOPE_DEPTH:
                return deepest
            todo.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _check_times(record: MemoryRecord) -> None:
    """Every timestamp must be writable in UTC (``9999-12-31T23:00-05:00`` is not)."""
    for name in RECORD_FIELDS:
        value = getattr(record, name) if name in _TIMESTAMPS else None
        if value is None:
            continue
        try:
            format_ts(value)
        except (OverflowError, ValueError):
            raise ValueError(
                f"'{name}' is out of range in UTC (got {value.isoformat()!r})"
            ) from None


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
    _check_values(obj)
    # A null id, status, category or namespace means "the default", as when omitted.
    clean = {k: v for k, v in obj.items() if not (v is None and k in _REQUIRED_STR)}
    if "confidence" in clean:
        clean["confidence"] = import_confidence(clean["confidence"])
    try:
        record = MemoryRecord(**clean)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(str(exc)) from exc
    _check_times(record)
    return record


def check_regular_file(path: str | os.PathLike[str]) -> None:
    """``ValueError`` unless ``path`` is a regular file: a FIFO blocks, ``/dev/zero`` never ends."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
        raise ValueError(f"is {kind}, not a regular file")


def _loads(line: str) -> Any:
    """One JSON value; ``NaN``, ``Infinity`` and nesting past the recursion limit are refused."""
    try:
        return json.loads(line, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _lines(src: str | os.PathLike[str] | IO[str]) -> Iterator[tuple[int, str]]:
    if isinstance(src, str | os.PathLike):
        check_regular_file(src)
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
            record = record_from_json(_loads(line))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise ValueError(f"line {lineno}: {exc}") from exc
        yield lineno, record


def write_jsonl(dst: str | os.PathLike[str] | IO[str], records: Iterable[MemoryRecord]) -> int:
    """Write one JSON object per record; returns how many were written. A path is
    replaced whole (:func:`_replace_file`): a full disk or a kill leaves the file it had."""
    if isinstance(dst, str | os.PathLike):
        return _replace_file(os.fspath(dst), records)
    n = 0
    for record in records:
        dst.write(json.dumps(record_to_json(record), ensure_ascii=False, sort_keys=False))
        dst.write("\n")
        n += 1
    return n


def _replace_file(dst: str, records: Iterable[MemoryRecord]) -> int:
    """The records written to a temporary file beside ``dst`` (its mode, if it exists),
    ``fsync``-ed and renamed over it; the temporary file is removed when anything fails.
    The export was written in place: one onto a full disk cut the previous backup short.
    A path that is not a regular file (a FIFO, ``/dev/stdout``) is written in place."""
    target = os.path.realpath(dst)  # a symbolic link's file is replaced, as it was written
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(dst, "w", encoding="utf-8") as fh:
            return write_jsonl(fh, records)
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with open(fd, "w", encoding="utf-8") as fh:
            if st is not None:
                os.chmod(tmp, stat.S_IMODE(st.st_mode))  # a private backup stays private
            n = write_jsonl(fh, records)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename made durable; not every platform can
        dir_fd = os.open(folder or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return n
