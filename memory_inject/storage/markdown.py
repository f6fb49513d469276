"""``MarkdownStore``: memories as Markdown files a person can read, diff and edit.

zeroclaw's ``markdown`` backend (spec 7.3), in the same layout: ``MEMORY.md``
holds the ``core`` memories and ``memory/YYYY-MM-DD.md`` every other category,
one file per day of the memory's timestamp (UTC). Each memory is one block::

    ## deploy_target
    <!-- memory-inject {"category": "core", "timestamp": "2026-03-01T12:00:00.000000Z"} -->
    > Production deploys go to prod-3.

The heading is for the reader. The comment holds the record's other fields as
JSON (only those not at their default; ``<`` and ``>`` escaped, so it never
closes early). Every line of the content is quoted (``> ``), so no memory can
start a line of the file and forge a heading or a block: a memory holding
``## key`` or the comment marker reads back exactly as written. Text the store
did not write (a note a person added) is kept when a file is rewritten, blank
lines aside; a block whose comment no longer parses is kept as such text,
recalled by no one and named on the event (``answer``: ``damaged_blocks``).

Recall scores as zeroclaw's markdown backend does (spec 7.4): the share of the
query's lowercase whitespace-separated tokens found as substrings of the
lowercase content, entries matching none dropped, best first (ties: the newest
first). A time-only query returns the newest first with score None, as the
contract says (zeroclaw says 1.0, which no stage reads differently). Two
deliberate differences from zeroclaw: a session id scopes recall as on every
other store (zeroclaw ignores it, so one session would read another's
conversation), and ``store`` is an upsert by key that ``forget`` can undo
(zeroclaw appends lines and cannot forget).

Writes are durable and never lost: under one lock per folder in the process,
and advisory locks on the folder and its ``.lock`` across processes where
``fcntl`` exists, the files are read again, changed and replaced atomically (a
temporary file, ``fsync``, ``os.replace``, then the folder's ``fsync``), those
gaining a block first (:mod:`._markdown_writes`). A ``fork()`` waits for
the calls in flight under a folder's lock (:func:`~._forks.track`): one in flight
at the fork left the lock held in the child for good, and a write's open
``.lock`` file too, whose advisory lock then stayed held until the child exited,
so the child's first call hung and the parent's next write with it.

The file format (blocks, parsing, the atomic write) is in :mod:`._markdown_format`.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from memory_inject._deadline import in_recall_thread
from memory_inject._recall_only import recall_answer
from memory_inject._workers import in_worker
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.models import MemoryCategory, MemoryEntry, is_time_only, parse_timestamp
from memory_inject.storage import _forks
from memory_inject.storage._base import refuse_owned
from memory_inject.storage._markdown_format import (
    Doc,
    drop_forgotten,
    drop_record,
    find_record,
    latest,
    list_folder,
    markdown_score,
    read_docs,
    render_doc,
    visible,
)
from memory_inject.storage._markdown_scope import Sessions, Sources, drop_within
from memory_inject.storage._markdown_writes import (
    drop_stale,
    folder_locked,
    storage_error,
    write_docs,
)
from memory_inject.storage.records import MemoryRecord, carry_over, store_draft

__all__ = ["MarkdownStore", "markdown_score"]

CORE_FILE = "MEMORY.md"
DAILY_DIR = "memory"
_CORE_HEADER = "# Long-Term Memory"
_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _after_fork_in_child() -> None:
    global _LOCKS_GUARD  # noqa: PLW0603 - a parent's thread opening a store held it
    _LOCKS_GUARD = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class MarkdownStore:
    """Memories in ``MEMORY.md`` and ``memory/YYYY-MM-DD.md`` under ``path`` (module docstring).

    ``namespace`` keeps several agents' memories apart in one folder, as in one
    SQLite file. A session-scoped recall sees that session's memories and the
    sessionless ones of ``shared_categories``, never another session's.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = "default",
        shared_categories: Iterable[str] = ("core", "daily"),
        name: str = "markdown",
    ) -> None:
        """The folder is created on the first write; reading a missing folder finds nothing."""
        self._root = Path(path)
        if self._root.exists() and not self._root.is_dir():
            raise ValueError(
                f"'path' must be a folder for the markdown backend (got {str(path)!r})"
            )
        self._namespace = namespace
        self._shared = frozenset(str(c) for c in shared_categories)
        self._seen = threading.local()  # this thread's last read: its damaged blocks
        self._name = name
        key = os.path.abspath(self._root)
        with _LOCKS_GUARD:
            self._lock = _LOCKS.setdefault(key, threading.RLock())
        _forks.track(self, self._lock)  # a fork waits for this store's calls in flight

    def __repr__(self) -> str:
        return f"MarkdownStore({str(self._root)!r}, namespace={self._namespace!r})"

    @property
    def name(self) -> str:
        """The store's name on the recall event (``markdown``)."""
        return self._name

    @property
    def path(self) -> str:
        """The folder holding ``MEMORY.md`` and ``memory/``."""
        return str(self._root)

    @property
    def namespace(self) -> str:
        """Only this namespace's memories are read and written."""
        return self._namespace

    def close(self) -> None:
        """Nothing is held open between calls."""

    # -- files ----------------------------------------------------------------

    def _file_for(self, record: MemoryRecord) -> Path:
        if record.category == MemoryCategory.CORE:
            return self._root / CORE_FILE
        day = record.timestamp.astimezone(UTC).strftime("%Y-%m-%d")
        return self._root / DAILY_DIR / f"{day}.md"

    def _files(self) -> list[Path]:
        return list_folder(self._root / CORE_FILE, self._root / DAILY_DIR)

    def _load(self) -> dict[Path, Doc]:
        return read_docs(self._files())

    def _records(self) -> list[MemoryRecord]:
        """This namespace's records, one per key (a key found twice: the later update)."""
        with self._lock:
            docs = self._load()
        self._seen.damaged = [d for doc in docs.values() for d in doc.damaged]
        return latest(docs.values(), self._namespace)

    @contextlib.contextmanager
    def _writing(self, op: str = "write") -> Iterator[dict[Path, Doc]]:
        """The files as they are now, under both locks; changed documents are written back
        (gaining files first, :mod:`._markdown_writes`); an ``OSError`` is a ``StorageError``."""
        with self._lock, contextlib.ExitStack() as held:
            try:
                held.enter_context(folder_locked(self._root))
                docs = self._load()
                before = {p: (render_doc(d), list(d.records)) for p, d in docs.items()}
            except OSError as exc:
                raise storage_error(exc, self._root, op) from exc
            drop_stale(docs)  # a copy a writer stopped between two files left
            yield docs
            write_docs(docs, before, op)

    def _put(self, docs: dict[Path, Doc], record: MemoryRecord) -> None:
        """Replace the record under ``record.key`` (in whichever file) with ``record``."""
        self._drop(docs, record.key)
        path = self._file_for(record)
        if path not in docs:
            header = _CORE_HEADER if path.name == CORE_FILE else f"# Daily Log — {path.stem}"
            docs[path] = Doc(foreign=[header])
        docs[path].records.append(record)

    def _drop(self, docs: dict[Path, Doc], key: str) -> bool:
        return drop_record(docs, self._namespace, key)

    def _find(self, docs: dict[Path, Doc], key: str) -> MemoryRecord | None:
        return find_record(docs, self._namespace, key)

    # -- writes ---------------------------------------------------------------

    def store(
        self,
        key: str,
        content: str,
        category: str = MemoryCategory.CORE,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **fields: Any,
    ) -> MemoryRecord:
        """Create or update the memory under ``key`` (id, creation time and links carry over)."""
        draft = store_draft(
            key,
            content,
            category,
            namespace=self._namespace,
            session_id=session_id,
            timestamp=timestamp,
            importance=importance,
            fields=fields,
            now=datetime.now(UTC),
        )
        with self._writing("store") as docs:
            old = self._find(docs, key)
            refuse_owned(old, draft.session_id, key, "store")
            record = draft if old is None else carry_over(draft, old, fields, timestamp)
            self._put(docs, record)
        return record

    async def astore(
        self,
        key: str,
        content: str,
        category: str = MemoryCategory.CORE,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **fields: Any,
    ) -> MemoryRecord:
        """``store`` on one of the library's worker threads (file writes block), never
        asyncio's default executor."""
        return await in_worker(
            self.store,
            key,
            content,
            category,
            session_id=session_id,
            timestamp=timestamp,
            importance=importance,
            **fields,
        )

    def upsert(self, record: MemoryRecord, *, move: bool = False) -> MemoryRecord:
        """Write ``record`` as given; a live memory of another scope under its key is refused
        (:class:`~memory_inject.exceptions.KeyOwnedError`) unless ``move=True``."""
        self._check(record)
        with self._writing("upsert") as docs:
            if not move:
                refuse_owned(self._find(docs, record.key), record.session_id, record.key, "upsert")
            self._put(docs, record)
        return record

    def supersede(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        """Write ``new`` and mark the memory under ``old_key`` superseded by it (``KeyError``
        when there is none), in one locked write."""
        self._check(new)
        if new.key == old_key:
            raise ValueError(f"a memory cannot supersede itself (key {old_key!r})")
        with self._writing("supersede") as docs:
            old = self._find(docs, old_key)
            if old is None or old.deleted_at is not None:
                raise KeyError(old_key)
            refuse_owned(old, new.session_id, old_key, "supersede")
            refuse_owned(self._find(docs, new.key), new.session_id, new.key, "supersede")
            links = new.supersedes if old.id in new.supersedes else (*new.supersedes, old.id)
            record = new.evolve(supersedes=links)
            self._put(docs, record)
            self._put(docs, old.evolve(superseded_by=record.id))
        return record

    def _check(self, record: MemoryRecord) -> None:
        if not isinstance(record, MemoryRecord):
            raise TypeError(f"'record' must be a MemoryRecord (got {type(record).__name__})")
        if record.namespace != self._namespace:
            raise ValueError(
                f"'namespace' must be this store's {self._namespace!r} (got {record.namespace!r})"
            )

    def forget(
        self, key: str, *, sessions: Sessions = None, shared_sources: Sources = None
    ) -> bool:
        """Remove the memory's block from its file; True if a live one went. ``sessions``
        and ``shared_sources`` limit which may go, as on ``SQLiteStore.forget``."""
        with self._writing("forget") as docs:
            return drop_within(docs, self._namespace, key, sessions, shared_sources, live=True)

    def erase(self, key: str, *, sessions: Sessions = None, shared_sources: Sources = None) -> bool:
        """Remove ``key``'s block, live or forgotten, from its file (rewritten and replaced
        atomically, as every write is), with :meth:`forget`'s scope rules; True if one went."""
        with self._writing() as docs:
            return drop_within(docs, self._namespace, key, sessions, shared_sources, live=False)

    def erase_forgotten(self) -> int:
        """Remove every forgotten block of this namespace; returns how many."""
        with self._writing() as docs:
            return drop_forgotten(docs, self._namespace)

    # -- reads ----------------------------------------------------------------

    def get(self, key: str) -> MemoryRecord | None:
        """The memory under ``key`` (superseded and expired ones too), or None."""
        return next((r for r in self._records() if r.key == key), None)

    def list(
        self,
        *,
        category: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[MemoryRecord]:
        """The memories, newest first by creation time, optionally filtered."""
        out = [
            r
            for r in self._records()
            if (category is None or r.category == category)
            and (session_id is None or r.session_id == session_id)
        ]
        out.sort(key=lambda r: r.timestamp, reverse=True)
        return out if limit is None else out[: max(0, int(limit))]

    def count(self) -> int:
        """How many memories the files hold (superseded and expired ones too)."""
        return len(self._records())

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Entries for ``query`` scored as zeroclaw's markdown backend (module docstring)."""
        if limit <= 0:
            return []
        now = datetime.now(UTC)
        lo = None if since is None else parse_timestamp(since)
        hi = None if until is None else parse_timestamp(until)
        pool = [r for r in self._records() if visible(r, now, session_id, lo, hi, self._shared)]
        if is_time_only(query):
            pool.sort(key=lambda r: (r.updated_at or r.timestamp, r.key), reverse=True)
            return [r.to_entry(None) for r in pool[:limit]]
        scored = [(markdown_score(query, r.content), r) for r in pool]
        hits = [(s, r) for s, r in scored if s > 0.0]
        hits.sort(key=lambda h: (h[0], h[1].updated_at or h[1].timestamp, h[1].key), reverse=True)
        return [r.to_entry(s) for s, r in hits[:limit]]

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """``query`` answered as ``recall`` answers it, naming the blocks of the files that
        could not be read (a hand edit's typo): such a memory was gone with no reason."""
        self._seen.damaged = []
        answer = recall_answer(self, query)
        damaged = self._seen.damaged
        if not damaged:
            return answer
        note = (
            f"damaged_blocks: {len(damaged)} blocks could not be read and are recalled by "
            f"no one ({'; '.join(damaged[:3])}{'; ...' if len(damaged) > 3 else ''})"
        )
        return attrs.evolve(answer, degraded=(*answer.degraded, note))

    async def aanswer(self, query: RecallQuery) -> RecallAnswer:
        """``answer`` on a recall thread (file reads block), never asyncio's default
        executor; a call that waited past ``query.deadline`` for one raises
        :class:`~memory_inject.exceptions.RecallWaitError` (``recall_wait: ...``)."""
        return await in_recall_thread(self, partial(self.answer, query), query.deadline)

    async def arecall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> builtins.list[MemoryEntry]:
        """``recall`` on a recall thread (file reads block), as :meth:`aanswer`."""
        call = partial(self.recall, query, limit, session_id=session_id, since=since, until=until)
        return await in_recall_thread(self, call, None)
