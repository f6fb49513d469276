"""Importing a PI (Persistent Intelligence) user's whole memory directory, or one of its files.

PI keeps its memory under one root (``~/.pi/agent/pi-memory``, or a project's
``.pi/settings.json`` ``localPath``). Its JSONL records already import through
``import_jsonl`` (:mod:`memory_inject.storage._pi_records`); :func:`import_pi`
reads the rest of the root too and writes everything with one ``import_jsonl``
call, so the records are embedded, batched and upserted by key like any import.

======================================  =============================================
PI file                                 here
======================================  =============================================
``memory/L1.identity.jsonl``,           records, as ``import_jsonl`` reads them
``memory/L2.playbooks.jsonl``,          (PI's ``id`` is the key)
``memory/projects/*.jsonl``,
``memory/inquiries.jsonl``
``scratchpad.md``                       one ``category: scratchpad``, ``memory_kind:
                                        task`` record per ``- [ ]`` / ``- [x]`` line
                                        (key ``pi-scratchpad:<slug>:<hash>`` of its
                                        text, and ``:<root hash>`` when another
                                        root's item has that key; ``- [x]`` has
                                        status ``done``); an
                                        item imported before and no longer in the
                                        file is forgotten
``daily/YYYY-MM-DD.md``                 one ``category: daily`` record per day (key
                                        ``pi-daily:YYYY-MM-DD``, the file's text as
                                        content, timestamp the file's modification
                                        time when it falls on that UTC day, else the
                                        day's 00:00 UTC)
``memory/tombstones.jsonl``             the named record is forgotten (written with
                                        ``deleted_at``, status ``deleted``), even when
                                        a record file still holds it, or only the
                                        store (imported before); a
                                        ``privacy_purge`` tombstone also drops its
                                        text, tags and evidence (a stored row is
                                        erased first where the store can erase)
``memory/evidence.jsonl``               each line is kept in the ``metadata.evidence_
                                        records`` of every record its
                                        ``related_memory_ids`` names
``memory/profiles.jsonl``               listed in the result (``profiles``): profiles
                                        are resolved per turn here, not stored
``.pi/settings.json``                   ``localPath`` (or ``"pi-pi".localPath`` +
                                        ``/pi-memory``) is where the root is read;
                                        ``projectIdentity.project_id`` is reported as
                                        ``profile_id`` (``project:<slug>``) for the
                                        agent's ``governance.profile_id``
======================================  =============================================

``PATH`` may be the memory root, a project root holding ``.pi/settings.json``,
that ``.pi`` directory, ``~/.pi`` or a home directory (``agent/pi-memory``
below it), the settings file itself, or one file: ``scratchpad.md``, a
``YYYY-MM-DD.md`` daily log, ``tombstones.jsonl``, ``evidence.jsonl``,
``profiles.jsonl`` or a record file. A bad line is a ``ValueError`` naming the
file and the line. What has no home here (PI's inbox, patches, session store,
reinforcement events, ``config.json``) is skipped with a warning.

Reading is in :mod:`._pi_import_read`; this module writes what was read and
reports it (:class:`PiImport`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import frozen

from memory_inject.storage._jsonl import record_from_json, record_to_json, write_jsonl
from memory_inject.storage._pi_import_read import (
    DAILY_PREFIX,
    SCRATCHPAD_PREFIX,
    SPECIAL_JSONL,
    PiReader,
)
from memory_inject.storage._pi_import_stones import purged as _purged
from memory_inject.storage._pi_import_stones import restone
from memory_inject.storage._pi_import_stones import tombstoned as _tombstoned
from memory_inject.storage.records import MemoryRecord

__all__ = ["DAILY_PREFIX", "SCRATCHPAD_PREFIX", "PiImport", "import_pi", "is_pi_path"]


@frozen
class PiImport:
    """What :func:`import_pi` read and wrote, per kind, and what it could not import."""

    #: The memory root read (None: a single file was imported).
    root: Path | None = None
    #: L1, L2 and project records written (tombstoned ones included).
    records: int = 0
    #: Inquiries written (``inquiries.jsonl``).
    inquiries: int = 0
    #: Scratchpad items written (open and done), and how many are open (``- [ ]``).
    scratchpad: int = 0
    scratchpad_open: int = 0
    #: Earlier imported scratchpad items no longer in ``scratchpad.md``, forgotten.
    scratchpad_removed: int = 0
    #: Daily logs written.
    daily: int = 0
    #: Tombstone lines read, and records they made absent (written forgotten, or forgotten).
    tombstones: int = 0
    forgotten: int = 0
    #: Evidence lines kept with a record, and lines not kept (naming no record there is,
    #: or only privacy-purged ones).
    evidence: int = 0
    evidence_dropped: int = 0
    #: Records already in the store rewritten to carry evidence (an ``evidence.jsonl``
    #: imported on its own).
    updated: int = 0
    #: The ``profile_id`` of each line of ``profiles.jsonl`` (reported; not stored).
    profiles: tuple[str, ...] = ()
    #: ``project:<slug>`` of ``.pi/settings.json``'s ``projectIdentity.project_id``.
    profile_id: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def written(self) -> int:
        """Records written by the import: records, inquiries, scratchpad items, daily logs
        and records given their evidence."""
        return self.records + self.inquiries + self.scratchpad + self.daily + self.updated

    def summary(self) -> str:
        """One line: each kind with its count, the kinds with none left out."""
        parts = [
            (self.records, "record", "records"),
            (self.inquiries, "inquiry", "inquiries"),
            (self.scratchpad, "scratchpad item", "scratchpad items"),
            (self.daily, "daily log", "daily logs"),
            (self.tombstones, "tombstone", "tombstones"),
            (self.forgotten, "record forgotten", "records forgotten"),
            (self.scratchpad_removed, "cleared scratchpad item", "cleared scratchpad items"),
            (self.evidence, "evidence line", "evidence lines"),
            (len(self.profiles), "profile listed", "profiles listed"),
        ]
        shown = [f"{n} {one if n == 1 else many}" for n, one, many in parts if n]
        return ", ".join(shown) or "nothing"


def is_pi_path(path: str | os.PathLike[str]) -> bool:
    """True for what only :func:`import_pi` reads: a directory, a ``.md`` file, PI's
    ``settings.json``, ``tombstones.jsonl``, ``evidence.jsonl`` or ``profiles.jsonl``."""
    p = Path(path)
    if p.is_dir():
        return True
    return p.suffix.lower() == ".md" or p.name in (*SPECIAL_JSONL, "settings.json")


def import_pi(store: Any, path: str | os.PathLike[str], *, batch_size: int = 1000) -> PiImport:
    """Import PI's memory at ``path`` (a root, project, ``.pi`` dir or one file) into ``store``.

    Everything read is written by one ``import_jsonl`` call (an upsert by key:
    importing the same files again changes nothing): a stored record tombstoned
    since is written as its tombstone says (a privacy-purged one erased first,
    where the store can), then cleared scratchpad items are forgotten.
    ``TypeError`` for a store that cannot import; ``ValueError`` naming the
    file (and line) for input that is not PI's, before anything is written.
    """
    importer = getattr(store, "import_jsonl", None)
    if not callable(importer):
        raise TypeError(f"the {type(store).__name__} store cannot import (no import_jsonl)")
    reader = PiReader()
    reader.read(Path(path))
    return _write(reader, store, batch_size)


# -- writing -----------------------------------------------------------------------


def _write(reader: PiReader, store: Any, batch_size: int) -> PiImport:
    """Write what ``reader`` read (and the stored records tombstoned since) with one import,
    then forget the cleared scratchpad items; what was done, counted."""
    now = datetime.now(UTC)
    out: list[tuple[str, MemoryRecord]] = []
    counts = {"records": 0, "inquiries": 0}
    forgotten = 0
    linked: set[str] = set()
    for key, (where, read) in reader.records.items():
        stone = reader.tombstones.get(key)
        evidence = [] if _purged(stone) else reader.evidence_of(key)
        record = read
        if evidence:
            linked.add(key)
            record = record.evolve(
                metadata={**(record.metadata or {}), "evidence_records": evidence}
            )
        if stone is not None:
            record = _tombstoned(record, stone, now)
            forgotten += 1
        if record.profile_id is None and reader.profile_id is not None:
            # PI keeps a project's records apart by its root; one store holds many roots,
            # so a record is its project's (round 36: another project's block showed it)
            record = record.evolve(profile_id=reader.profile_id)
        out.append((where, record))
        counts["inquiries" if record.category == "inquiry" else "records"] += 1
    others = reader.tombstones.keys() - reader.records.keys()
    updated = 0
    named = dict.fromkeys(i for _, ids in reader.evidence for i in ids)
    for key in named:
        if key in reader.records or _purged(reader.tombstones.get(key)):
            continue
        old = store.get(key)  # an evidence.jsonl imported after its records
        if old is None or old.deleted_at is not None:
            continue
        linked.add(key)
        meta = {**(old.metadata or {}), "evidence_records": reader.evidence_of(key)}
        out.append((f"the store's record {key!r}", old.evolve(metadata=meta)))
        updated += 1
    kept = sum(1 for _, ids in reader.evidence if linked.intersection(ids))
    scratch = [_own_item(store, where, item) for where, item in (reader.scratch or {}).values()]
    scratch_keys = {item.key for _, item in scratch}
    out += scratch
    out += [_own_day(store, where, day) for where, day in reader.daily.values()]
    # A record imported before and tombstoned since (PI removed its line) is made what the
    # tombstone says, as a first import of it would be.
    stoned, erase = restone(store, {k: reader.tombstones[k] for k in others}, now)
    out += stoned
    forgotten += len(stoned)
    _import(store, out, batch_size, erase=erase)
    removed = 0
    if reader.scratch is not None:
        # Only this root's items are cleared (another root's open to-dos were forgotten by
        # its neighbour's import); an item imported before rows said their root is taken
        # for this root's, as before.
        roots: set[str | None] = {*reader.scratch_roots, None}
        for old in store.list(category="scratchpad"):
            if (
                old.key.startswith(SCRATCHPAD_PREFIX)
                and old.key not in scratch_keys
                and _pi_root(old) in roots
            ):
                removed += int(store.forget(old.key))
    warnings = list(reader.warnings)
    dropped = len(reader.evidence) - kept
    if dropped:
        warnings.append(
            f"{dropped} evidence line(s) not imported: they name no record here, "
            "or only privacy-purged ones"
        )
    return PiImport(
        root=reader.root,
        records=counts["records"],
        inquiries=counts["inquiries"],
        scratchpad=len(scratch),
        scratchpad_open=sum(1 for _, r in scratch if r.status == "active"),
        scratchpad_removed=removed,
        daily=len(reader.daily),
        tombstones=reader.n_tombstones,
        forgotten=forgotten,
        evidence=kept,
        evidence_dropped=dropped,
        updated=updated,
        profiles=tuple(reader.profiles),
        profile_id=reader.profile_id,
        warnings=tuple(warnings),
    )


def _import(
    store: Any, out: Sequence[tuple[str, MemoryRecord]], batch_size: int, *, erase: Sequence[str]
) -> None:
    """One ``import_jsonl`` of every record; a problem names the PI file it came from. The
    ``erase`` keys (of a store that can erase) are erased once every record is checked,
    before the import writes."""
    if not out:
        return
    records = []
    for where, record in out:
        # The line import_jsonl will read, checked here so a problem names its PI file.
        try:
            records.append(record_from_json(json.loads(json.dumps(record_to_json(record)))))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    buffer = io.StringIO()
    write_jsonl(buffer, records)
    buffer.seek(0)
    for key in erase:  # only where the store can (else the import writes over the row)
        store.erase(key)
    try:
        store.import_jsonl(buffer, batch_size=batch_size)
    except ValueError as exc:
        found = re.search(r"line (\d+)", str(exc))
        if found is None or not 0 < int(found.group(1)) <= len(out):
            raise
        raise ValueError(f"{out[int(found.group(1)) - 1][0]}: {exc}") from exc


def _pi_root(record: MemoryRecord) -> str | None:
    root = (record.metadata or {}).get("pi_root")
    return root if isinstance(root, str) else None


def _own_day(store: Any, where: str, day: MemoryRecord) -> tuple[str, MemoryRecord]:
    """``day`` under ``pi-daily:<date>``, or ``pi-daily:<date>:<root hash>`` when another
    root's log of that day is there already (it replaced that log before). A log imported
    before rows said their root is taken for this root's."""
    old = store.get(day.key)
    root = _pi_root(day)
    if old is None or old.deleted_at is not None or _pi_root(old) in (None, root):
        return where, day
    tag = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    return where, day.evolve(key=f"{day.key}:{tag}", id=f"{day.key}:{tag}")


def _own_item(store: Any, where: str, item: MemoryRecord) -> tuple[str, MemoryRecord]:
    """A scratchpad ``item`` under ``pi-scratchpad:<slug>:<hash>``, or that key and
    ``:<root hash>`` when the row there is another root's (the same item open in two roots
    is two rows) or this root's item is there already. An item imported before rows said
    their root is taken for this root's, so a store imported before keeps its rows."""
    root = _pi_root(item)
    tag = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    tagged = f"{item.key}:{tag}"
    mine = store.get(tagged)
    if mine is None or mine.deleted_at is not None or _pi_root(mine) != root:
        old = store.get(item.key)
        if old is None or old.deleted_at is not None or _pi_root(old) in (None, root):
            return where, item
    return where, item.evolve(key=tagged, id=tagged)
