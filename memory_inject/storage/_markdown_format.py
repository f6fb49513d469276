"""The Markdown files of ``MarkdownStore``: one block per memory, parsed and written back.

This module owns the file format (see :mod:`.markdown`): a record as a block
(heading, a JSON comment of its non-default fields, every content line
quoted, so no memory can forge a heading or a block), a file parsed into its
blocks and the text the store did not write (kept, never lost), and the
atomic replace that writes a file (temporary file, ``fsync``,
``os.replace``, the folder's ``fsync``). Locks and the store's API are in
:mod:`.markdown`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import define, field

from memory_inject.exceptions import StorageError
from memory_inject.storage._jsonl import record_from_json, record_to_json
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "Doc",
    "block_of",
    "drop_forgotten",
    "drop_record",
    "find_record",
    "heading_of",
    "latest",
    "list_folder",
    "markdown_score",
    "parse_doc",
    "read_doc",
    "read_docs",
    "render_doc",
    "visible",
    "write_atomic",
]

_MARK = "<!-- memory-inject "
_END = " -->"
# Fields every block writes; the others only when they differ from a fresh record's.
_ALWAYS = ("category", "timestamp")
_DEFAULTS = {
    k: v
    for k, v in record_to_json(MemoryRecord(key="k", content="")).items()
    if k not in ("key", "content", "id", "timestamp", "updated_at", *_ALWAYS)
}


@define
class Doc:
    """One parsed file: the text the store did not write, and its records in file order."""

    foreign: list[str] = field(factory=list)
    records: list[MemoryRecord] = field(factory=list)
    #: Blocks that could not be read (kept as text): ``"line N: why"`` (``read_doc``: the
    #: file's name in front).
    damaged: list[str] = field(factory=list)


def heading_of(key: str) -> str:
    """The block's heading: the key, its spaces and unprintable characters as spaces."""
    shown = "".join(" " if (c.isspace() or not c.isprintable()) else c for c in key)
    return f"## {shown}"


def block_of(record: MemoryRecord) -> str:
    """One record as a block: heading, JSON comment, quoted content."""
    data = record_to_json(record)
    meta: dict[str, Any] = {"key": record.key}
    if record.id != record.key:
        meta["id"] = record.id
    meta.update((k, data[k]) for k in _ALWAYS)
    if record.updated_at != record.timestamp:
        meta["updated_at"] = data["updated_at"]
    meta.update((k, v) for k, v in data.items() if k in _DEFAULTS and v != _DEFAULTS[k])
    text = json.dumps(meta, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
    body = [f"> {line}" if line else ">" for line in record.content.split("\n")]
    return "\n".join([heading_of(record.key), f"{_MARK}{text}{_END}", *body])


def parse_doc(text: str, written: str | None = None) -> Doc:
    """The records and the other text of a file (lines split on ``\\n`` only: a memory's
    own ``\\r`` is kept). A file saved with CRLF line endings (a Windows editor, git's
    ``autocrlf``; on most of its lines, so a line appended with LF does not hide it) is read
    as LF, and a leading byte-order mark is dropped: either
    made every block unreadable before, and the next write of a key duplicated it.
    ``written`` (ISO) is the time of a block whose comment gives none (written by hand)."""
    doc = Doc()
    text = text.removeprefix("\ufeff")
    crlf = text.count("\r\n")
    if crlf and 2 * crlf >= text.count("\n"):  # most lines: a line appended with LF too
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("## ") and nxt.startswith(_MARK) and nxt.endswith(_END):
            j = i + 2
            body = []
            while j < len(lines) and lines[j].startswith(">"):
                body.append(lines[j][2:] if lines[j].startswith("> ") else lines[j][1:])
                j += 1
            try:
                meta = json.loads(nxt[len(_MARK) : -len(_END)])
                if not isinstance(meta, dict):
                    raise ValueError("not an object")
                if written is not None and not meta.get("timestamp"):
                    meta["timestamp"] = written
                doc.records.append(record_from_json({**meta, "content": "\n".join(body)}))
            except ValueError as exc:
                doc.foreign.extend(lines[i:j])  # kept as text, never lost
                doc.damaged.append(f"line {i + 1}: {str(exc).splitlines()[0]:.120}")
            i = j
        else:
            doc.foreign.append(line)
            i += 1
    return doc


def render_doc(doc: Doc) -> str:
    """The file for ``doc``: its other text (blank runs collapsed), then its blocks."""
    kept: list[str] = []
    for line in doc.foreign:
        if line.strip() or (kept and kept[-1].strip()):
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    parts = ["\n".join(kept)] if kept else []
    parts.extend(block_of(r) for r in doc.records)
    return "\n\n".join(parts) + "\n"


def read_doc(path: Path) -> Doc:
    """``path`` parsed; a file that is not UTF-8, or that cannot be read (its mode, an I/O
    error), is a ``StorageError`` naming it (never rewritten). A file deleted since it was
    listed raises ``FileNotFoundError``, which :func:`read_docs` reads as gone."""
    try:
        doc = parse_doc(path.read_bytes().decode("utf-8"), _written(path))
    except UnicodeDecodeError as exc:
        raise StorageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StorageError(f"{path}: read: {exc.strerror or exc}") from exc
    doc.damaged[:] = [f"{path.name} {d}" for d in doc.damaged]
    return doc


def _written(path: Path) -> str:
    """When a block of ``path`` with no timestamp of its own was written: the day a daily
    file names (``memory/2026-03-01.md``: its midnight, UTC), else the file's last change.
    It was the time of each read: a hand-written block was always "today", and new."""
    stem = path.stem
    if len(stem) == 10 and stem[4] == "-" and stem[7] == "-":
        with contextlib.suppress(ValueError):
            return datetime.strptime(stem, "%Y-%m-%d").replace(tzinfo=UTC).isoformat()
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so a reader sees the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every platform can open a folder
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def markdown_score(query: str, content: str) -> float:
    """zeroclaw's markdown relevance: the share of the query's lowercase whitespace tokens
    that are substrings of the lowercase content (0.0 when the query has none)."""
    tokens = query.lower().split()
    if not tokens:
        return 0.0
    text = content.lower()
    return sum(1 for t in tokens if t in text) / len(tokens)


def visible(
    r: MemoryRecord,
    now: datetime,
    session_id: str | None,
    lo: datetime | None,
    hi: datetime | None,
    shared: frozenset[str],
) -> bool:
    """Whether a recall at ``now`` sees ``r``: current, of the session (or a sessionless
    row of a ``shared`` category), and written between ``lo`` and ``hi``."""
    if r.superseded_by is not None or (r.expires_at is not None and r.expires_at <= now):
        return False
    if (
        session_id is not None
        and r.session_id != session_id
        and not (r.session_id is None and r.category in shared)
    ):
        return False
    return (lo is None or r.timestamp >= lo) and (hi is None or r.timestamp <= hi)


def find_record(docs: Mapping[Path, Doc], namespace: str, key: str) -> MemoryRecord | None:
    """The latest record under ``key`` of ``namespace`` in the files (deleted ones too)."""
    found = [
        r for d in docs.values() for r in d.records if r.key == key and r.namespace == namespace
    ]
    return max(found, key=lambda r: r.updated_at or r.timestamp) if found else None


def drop_record(docs: Mapping[Path, Doc], namespace: str, key: str) -> bool:
    """Remove every block under ``key`` of ``namespace`` from the files; True if one was."""
    dropped = False
    for doc in docs.values():
        keep = [r for r in doc.records if r.key != key or r.namespace != namespace]
        dropped = dropped or len(keep) != len(doc.records)
        doc.records = keep
    return dropped


def drop_forgotten(docs: Mapping[Path, Doc], namespace: str) -> int:
    """Remove every block of ``namespace`` whose record is forgotten; returns how many."""
    dropped = 0
    for doc in docs.values():
        keep = [r for r in doc.records if r.namespace != namespace or r.deleted_at is None]
        dropped += len(doc.records) - len(keep)
        doc.records = keep
    return dropped


def list_folder(core: Path, daily: Path) -> list[Path]:
    """The memory files: ``core`` (``MEMORY.md``) if it is there, then the days in ``daily``.

    Hidden files are an editor's (Emacs's lock ``.#2026-03-01.md``, macOS's
    ``._2026-03-01.md``), not memories: reading one failed every recall and write.
    """
    listed = daily.glob("*.md") if daily.is_dir() else ()
    days = sorted(p for p in listed if not p.name.startswith("."))
    for path in (core, *days):
        if path.is_dir():
            # A folder named MEMORY.md hid every core memory behind a success.
            raise StorageError(f"{path}: not a file (a folder?): the memories cannot be read")
    return [core, *days] if core.is_file() else days


def read_docs(paths: Iterable[Path]) -> dict[Path, Doc]:
    """Each file of ``paths`` parsed; one deleted (by hand) since it was listed is gone."""
    docs = {}
    for p in paths:
        try:
            docs[p] = read_doc(p)
        except FileNotFoundError:
            continue
    return docs


def latest(docs: Iterable[Doc], namespace: str) -> list[MemoryRecord]:
    """``namespace``'s live records, one per key (a key found twice: the later update)."""
    out: dict[str, MemoryRecord] = {}
    for doc in docs:
        for r in doc.records:
            old = out.get(r.key)
            if r.namespace == namespace and (
                old is None or (r.updated_at or r.timestamp) > (old.updated_at or old.timestamp)
            ):
                out[r.key] = r
    return [r for r in out.values() if r.deleted_at is None]
