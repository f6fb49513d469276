"""PI's tombstones applied to records: read ones, and rows an earlier import stored.

A tombstone makes its record deleted (status ``deleted``, the tombstone's
``deleted_at``); a ``privacy_purge`` one also drops the text, tags and evidence (the
record is kept as its ``[deleted]`` marker). A record PI tombstoned after it was
imported is in the store, not in the files: :func:`restone` makes that row what a first
import of the tombstoned record writes, erasing it first (where the store can) so none of
a purged text is left in the store's bytes. A row an older import only forgot (its text
kept) is found through ``export_jsonl`` and made the same.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from memory_inject.contract import SupportsErase
from memory_inject.storage._jsonl import record_from_json
from memory_inject.storage.records import MemoryRecord

__all__ = ["purged", "restone", "tombstoned"]


def purged(stone: Mapping[str, Any] | None) -> bool:
    """True for a ``privacy_purge`` tombstone."""
    return stone is not None and stone.get("deletion_mode") == "privacy_purge"


def tombstoned(record: MemoryRecord, stone: Mapping[str, Any], now: datetime) -> MemoryRecord:
    """The record forgotten as its tombstone says; a privacy purge keeps none of its text."""
    kept = {k: v for k, v in stone.items() if not k.startswith("_")}
    when = stone.get("_when") or now
    if purged(stone):
        return record.evolve(
            content="[deleted]",
            tags=(),
            status="deleted",
            deleted_at=when,
            metadata={"pi_tombstone": kept},
        )
    meta = {**(record.metadata or {}), "pi_tombstone": kept}
    return record.evolve(status="deleted", deleted_at=when, metadata=meta)


def _done(record: MemoryRecord) -> bool:
    return record.deleted_at is not None and "pi_tombstone" in (record.metadata or {})


def restone(
    store: Any, stones: Mapping[str, Mapping[str, Any]], now: datetime
) -> tuple[list[tuple[str, MemoryRecord]], list[str]]:
    """The rows of ``store`` the tombstones ``stones`` (by key; their records not read this
    time) name and no import made what they say yet, made so; and the keys to erase before
    they are written (a privacy purge, on a store that can erase; a key once per row)."""
    out: list[tuple[str, MemoryRecord]] = []
    erase: list[str] = []
    lost: list[str] = []
    can_erase = isinstance(store, SupportsErase)
    for key in sorted(stones):
        old = store.get(key)
        if old is None:
            lost.append(key)
        elif not _done(old):
            erase += [key] if purged(stones[key]) and can_erase else []
            out.append((f"the store's record {key!r}", tombstoned(old, stones[key], now)))
    for key, rows in _forgotten(store, lost).items():
        undone = [row for row in rows if not _done(row)]
        if undone:  # forgotten by an import that did not apply the tombstone
            erase += [key] * len(rows) if purged(stones[key]) and can_erase else []
            out.append((f"the store's record {key!r}", tombstoned(undone[0], stones[key], now)))
    return out, erase


def _forgotten(store: Any, keys: Iterable[str]) -> dict[str, list[MemoryRecord]]:
    """The forgotten rows of ``keys`` in ``store``'s export (none without one)."""
    sink = _Rows(keys)
    if sink.keys and callable(getattr(store, "export_jsonl", None)):
        store.export_jsonl(sink)
        sink.write("\n")
    return sink.rows


class _Rows(io.StringIO):
    """An ``export_jsonl`` destination that keeps only the rows of some keys."""

    def __init__(self, keys: Iterable[str]) -> None:
        super().__init__()
        self.keys = set(keys)
        self.rows: dict[str, list[MemoryRecord]] = {}
        self._part = ""

    def write(self, text: str) -> int:
        """Take whole lines of ``text``, keep the rows of the keys."""
        *lines, self._part = (self._part + text).split("\n")
        for line in lines:
            if not line.strip():
                continue
            obj = json.loads(line)
            if isinstance(obj, dict) and obj.get("key") in self.keys:
                try:
                    record = record_from_json(obj)
                except ValueError:
                    continue
                if record.deleted_at is not None:
                    self.rows.setdefault(record.key, []).append(record)
        return len(text)
