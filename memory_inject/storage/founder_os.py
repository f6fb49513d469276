"""Importing founder-os's own ``.memory/memory.db`` (its ``memories`` table, seed 003).

founder-os keeps its memories in a SQLite file of its own schema; our stores
refuse to open it (it is not ours to migrate). :func:`read_founder_os` reads
it read-only and yields one :class:`MemoryRecord` per row, and
:func:`import_founder_os` upserts them into any store that imports JSON Lines
(SQLite, PostgreSQL), through the same bulk path as ``memory-inject import``.

How a row becomes a record:

============================  ===============================================
founder-os column             record field
============================  ===============================================
``id``, ``key``, ``content``  ``id``, ``key``, ``content`` (verbatim)
``category``, ``status``      ``category``, ``status`` (their own values)
``confidence`` (0..100)       ``confidence`` / 100: the column is a percentage,
                              so founder-os's ``1`` is ``0.01``, not ``1.0``
``source_plugin``             ``source`` (a recall plan's plugin query)
``company_id``                ``entity_ids``: ``company:<slug of its name>``
                              when ``companies`` names it, else
                              ``company:<company_id>``
``tags`` (JSON array)         ``tags``
``created_at``/``updated_at``/ ``timestamp``/``updated_at``/``last_used_at``/
``last_used_at``/             ``expires_at``/``deleted_at`` (unix seconds, UTC):
``expires_at``/``deleted_at`` expired and soft-deleted rows are kept but never
                              recalled
``times_used``                ``times_used``
``embedding``                 left out: another model's vector space; the store
                              embeds the content with its own embedder
``times_confirmed``,          ``metadata`` where the record has it (else not
``notion_page_id``,           kept)
``last_synced_at``
============================  ===============================================

A problem names the file, the row's key and the column: a database that is not
founder-os's, a confidence outside 0..100, tags that are not a JSON array.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_inject.storage._jsonl import RECORD_FIELDS, write_jsonl
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "FOUNDER_OS_COLUMNS",
    "import_founder_os",
    "is_founder_os_db",
    "is_sqlite_file",
    "read_founder_os",
    "why_not_founder_os",
]

#: The ``memories`` columns a founder-os database must have (the rest are optional).
FOUNDER_OS_COLUMNS = frozenset(
    {"id", "key", "category", "content", "source_plugin", "confidence", "status", "company_id"}
)
_KEPT_ASIDE = ("times_confirmed", "notion_page_id", "last_synced_at")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SLUG = re.compile(r"[^a-z0-9]+")


def _connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection that leaves nothing beside the file. A WAL-mode file (as
    founder-os writes it) with no ``-wal``, ``-shm`` or ``-journal`` beside it has nothing
    uncheckpointed and no process in it: opened ``immutable``, SQLite makes no
    ``-shm``/``-wal`` (a ``mode=ro`` open left both behind, round 35). Else ``mode=ro``."""
    resolved = Path(path).resolve()
    live = any(Path(f"{resolved}{end}").exists() for end in ("-wal", "-shm", "-journal"))
    try:
        with resolved.open("rb") as f:
            wal = f.read(20)[18:19] == b"\x02"  # the header's read version: 2 is WAL
    except OSError:
        wal = False
    # A rollback-journal file makes nothing beside it read-only, and one with a hot
    # journal must be refused, not read half-written (immutable did, round 35's attack).
    uri = resolved.as_uri() + ("?mode=ro&immutable=1" if wal and not live else "?mode=ro")
    return sqlite3.connect(uri, uri=True)


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {str(r[1]) for r in conn.execute("PRAGMA table_info(memories)")}


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` starts with SQLite's header (whatever its tables)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def is_founder_os_db(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a SQLite file with founder-os's ``memories`` table."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != _SQLITE_MAGIC:
                return False
        with closing(_connect(path)) as conn:
            cols = _columns(conn)
    except (OSError, sqlite3.Error):
        return False
    return FOUNDER_OS_COLUMNS <= cols and "namespace" not in cols


def why_not_founder_os(path: str | os.PathLike[str], label: str | None = None) -> str:
    """Why ``path`` (named ``label`` in the text) cannot be read as a founder-os database:
    a SQLite file SQLite cannot read as it stands (a hot journal beside it) is named so,
    not called foreign (round 36)."""
    label = os.fspath(path) if label is None else label
    foreign = (
        f"{label}: not a founder-os memory.db (a SQLite file whose 'memories' table has "
        f"the columns {', '.join(sorted(FOUNDER_OS_COLUMNS))})"
    )
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != _SQLITE_MAGIC:
                return foreign
        with closing(_connect(path)) as conn:
            _columns(conn)
    except sqlite3.Error as exc:
        journal = Path(f"{Path(path).resolve()}-journal")
        cut = f"; {journal.name} beside it is a write cut off" if journal.exists() else ""
        return (
            f"{label}: SQLite cannot read it as it stands ({exc}{cut}): open it once with "
            "sqlite3 or founder-os, which rolls the cut-off write back, then import again"
        )
    except OSError as exc:
        return f"{label}: cannot be read ({exc})"
    return foreign


def _slug(name: str) -> str:
    return _SLUG.sub("-", name.lower()).strip("-")


def _ts(value: Any, column: str, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: '{column}' must be unix seconds (got {value!r})")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (ValueError, OSError, OverflowError) as exc:  # ms, 1e308, inf, NaN, far past
        raise ValueError(
            f"{where}: '{column}' must be unix seconds of a year 1-9999 (got {value!r}: "
            f"{exc}; milliseconds?)"
        ) from None


def _confidence(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise ValueError(f"{where}: 'confidence' must be an integer 0..100 (got {value!r})")
    return float(value) / 100.0


def _count(value: Any, where: str) -> int:
    """``times_used``: a whole number >= 0 (it was ``int()``'s error, naming no row; 3.7
    became 3)."""
    if value is None or value == "":
        return 0
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise ValueError(f"{where}: 'times_used' must be a whole number (got {value!r:.60})")
    if value < 0:
        raise ValueError(f"{where}: 'times_used' must be >= 0 (got {value!r})")
    return int(value)


def _tags(value: Any, where: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    try:
        tags = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        tags = None
    if not isinstance(tags, list):
        raise ValueError(f"{where}: 'tags' must be a JSON array (got {value!r:.60})")
    return tuple(str(t) for t in tags)


def _record(row: Mapping[str, Any], companies: Mapping[str, str], where: str) -> MemoryRecord:
    created = _ts(row.get("created_at"), "created_at", where) or datetime.now(UTC)
    company = row.get("company_id")
    entity: tuple[str, ...] = ()
    if company:
        name = companies.get(str(company))
        entity = (f"company:{_slug(name) or company}" if name else f"company:{company}",)
    fields: dict[str, Any] = {
        "key": row["key"],
        "content": row["content"],
        "category": row["category"],
        "timestamp": created,
        "updated_at": _ts(row.get("updated_at"), "updated_at", where) or created,
        "confidence": _confidence(row.get("confidence"), where),
        "status": row.get("status") or "candidate",
        "tags": _tags(row.get("tags"), where),
        "source": row.get("source_plugin") or None,
        "entity_ids": entity,
        "times_used": _count(row.get("times_used"), where),
        "last_used_at": _ts(row.get("last_used_at"), "last_used_at", where),
        "expires_at": _ts(row.get("expires_at"), "expires_at", where),
        "deleted_at": _ts(row.get("deleted_at"), "deleted_at", where),
    }
    if row.get("id"):
        fields["id"] = str(row["id"])
    aside = {c: row[c] for c in _KEPT_ASIDE if row.get(c) is not None}
    if aside and "metadata" in RECORD_FIELDS:
        fields["metadata"] = {"founder_os": aside}
    try:
        return MemoryRecord(**fields)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from exc


def read_founder_os(
    path: str | os.PathLike[str], *, companies: Mapping[str, str] | None = None
) -> Iterator[MemoryRecord]:
    """One record per row of founder-os's ``memories`` table, in ``rowid`` order.

    ``companies`` maps a ``company_id`` (a Notion Companies page id) to the
    company's name, which is what a turn's text mentions and what the plan's
    company query matches (founder-os reads it from its business context).
    ``ValueError`` names the file (and the row's key) for a file that is not
    a founder-os database or a row it cannot read.
    """
    label = os.fspath(path)
    if not is_founder_os_db(path):
        raise ValueError(why_not_founder_os(path, label))
    names = dict(companies or {})
    with closing(_connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        seen: dict[object, object] = {}  # key -> the id of the row that had it
        for row in conn.execute("SELECT * FROM memories ORDER BY rowid"):
            data = {k: row[k] for k in row.keys()}  # noqa: SIM118 - sqlite3.Row is no mapping
            key = data.get("key")
            if key in seen:  # one would replace the other in the store, silently (round 36)
                raise ValueError(
                    f"{label}: key {key!r} is on two rows (ids {seen[key]!r} and "
                    f"{data.get('id')!r}); founder-os keys are unique: keep one, import again"
                )
            seen[key] = data.get("id")
            yield _record(data, names, f"{label}: row {key!r}")


def import_founder_os(
    store: Any,
    path: str | os.PathLike[str],
    *,
    companies: Mapping[str, str] | None = None,
    batch_size: int = 1000,
) -> int:
    """Upsert every row of founder-os's ``memory.db`` into ``store``; returns how many.

    The rows go through the store's JSON Lines import (``import_jsonl``), so
    they are embedded, batched and upserted by key exactly like an export.
    ``TypeError`` for a store that cannot import; ``ValueError`` as for
    :func:`read_founder_os`.
    """
    importer = getattr(store, "import_jsonl", None)
    if not callable(importer):
        raise TypeError(f"the {type(store).__name__} store cannot import (no import_jsonl)")
    buffer = io.StringIO()
    write_jsonl(buffer, read_founder_os(path, companies=companies))
    buffer.seek(0)
    return int(importer(buffer, batch_size=batch_size))
