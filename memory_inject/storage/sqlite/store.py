"""``SQLiteStore``: the default persistent store, one file, FTS5 plus optional vectors.

Recall follows zeroclaw's SQLite scoring (spec 7.4): an FTS5 keyword stage
with a query built by :func:`~memory_inject.storage.fusion.build_fts_query`
(never the raw prompt), an optional cosine stage over stored embeddings, the
shared :func:`~memory_inject.storage.fusion.fuse`, and a ``LIKE`` fallback when
both find nothing. Writes run in ``BEGIN IMMEDIATE`` transactions under WAL
with ``synchronous=FULL`` by default, so a write that returned survives a
power cut. A locked database is retried once after 300 ms (founder-os), then
reported as :class:`~memory_inject.exceptions.StoreLockedError`.

The store holds an engine rather than inheriting layers: its constructor
checks the arguments and builds a :class:`~.engine.SQLiteEngine` (reads,
writes, recall; it holds the connections, locks and that retry of
:mod:`.connection`, the read connections of :mod:`.pool`, and builds the scored
recall of :mod:`.recall`); the JSONL import/export and the embedding back-fill
are functions of the store in :mod:`.bulk`; the entity and standing-context
reads are functions in :mod:`.context`. This module has the constructor and
the public extras, each a line or two over those.
"""

from __future__ import annotations

import builtins
import errno
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import IO

from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.embedders import Embedder
from memory_inject.exceptions import StorageError
from memory_inject.models import MemoryEntry
from memory_inject.storage import _forks
from memory_inject.storage._base import PersistentStore, check_namespace, forget_scope
from memory_inject.storage.fusion import Fusion
from memory_inject.storage.records import is_text
from memory_inject.storage.sqlite import bulk, context, forks
from memory_inject.storage.sqlite.connection import (
    DEFAULT_READERS,
    LOCK_RETRY_DELAY_S,
    SQLiteConnection,
    _Until,
)
from memory_inject.storage.sqlite.engine import SQLiteEngine
from memory_inject.storage.sqlite.vectors import INDEX_CHOICES

__all__ = ["LOCK_RETRY_DELAY_S", "SQLiteStore"]

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def _now() -> datetime:
    return datetime.now(UTC)


class SQLiteStore(PersistentStore):
    """Memories in one SQLite file, scoped to ``namespace``.

    One object serves any number of threads and tasks at once: reads run side
    by side on a small pool of read connections (``readers``), writes one at a
    time on a connection of their own. ``create=False`` refuses to create a
    missing or empty database, like founder-os's skip guard. ``synchronous``
    may be lowered to ``"NORMAL"`` for speed: under WAL that keeps the file
    consistent but may lose the last writes on power loss.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ".memory/memory.db",
        *,
        namespace: str = "default",
        embedder: Embedder | None = None,
        fusion: Fusion | None = None,
        busy_timeout_ms: int = 5000,
        name: str = "sqlite",
        create: bool = True,
        synchronous: str = "FULL",
        shared_categories: Sequence[str] = ("core", "daily"),
        readers: int | None = None,
        vector_index: str = "auto",
        recall_in_place: bool = False,
        open_timeout_ms: int | None = None,
    ) -> None:
        """Open the database at ``path`` (created unless ``create=False``) and migrate it.

        ``name`` is the store's name on the recall event; ``embedder`` gives each
        record a vector, and ``fusion`` says how keyword and vector hits combine
        (by default :func:`~memory_inject.storage.fusion.default_fusion` of the embedder).
        ``busy_timeout_ms`` is how long SQLite waits for a lock before the one retry;
        ``open_timeout_ms`` how long opening waits for another process's lock on the
        file, retries included (None: 12 busy timeouts, for another process's schema
        upgrade; :mod:`.opening`).
        A session's recall also sees the sessionless rows of ``shared_categories``.
        ``readers`` is how many read connections may be open at once (reads run
        side by side on them; writes are serialised on one more); None: one per
        core, at least 2 and at most 8 (:data:`DEFAULT_READERS`).
        ``vector_index="auto"`` keeps an approximate nearest-neighbour index next to
        a large namespace's vectors when ``usearch`` is installed (the ``ann``
        extra; :mod:`.vector_ann`) and saves its graph next to the file for the
        next process (:mod:`.vector_ann_file`), ``"memory"`` keeps the graph in
        memory only, ``"exact"`` always scans them.
        ``recall_in_place`` runs a keyword-only store's recalls on the turn's own
        thread (see :attr:`interrupts_in_place`).
        ``ValueError`` for a bad ``synchronous``, ``namespace``, ``readers``,
        ``vector_index`` or ``recall_in_place``; the
        :class:`StorageError` subclasses when the file is missing, locked, not a
        database, not ours or newer than this library.
        """
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"'synchronous' must be one of {_SYNCHRONOUS} (got {synchronous!r})")
        if readers is None:
            readers = DEFAULT_READERS
        if isinstance(readers, bool) or not isinstance(readers, int) or readers < 1:
            raise ValueError(f"'readers' must be an integer >= 1 or None (got {readers!r})")
        if open_timeout_ms is not None and (
            isinstance(open_timeout_ms, bool)
            or not isinstance(open_timeout_ms, int)
            or open_timeout_ms < 0
        ):
            raise ValueError(
                f"'open_timeout_ms' must be an integer >= 0 or None (got {open_timeout_ms!r})"
            )
        if not isinstance(recall_in_place, bool):
            raise ValueError(f"'recall_in_place' must be true or false (got {recall_in_place!r})")
        self._in_place = recall_in_place
        if vector_index not in INDEX_CHOICES:
            raise ValueError(
                f"'vector_index' must be one of {INDEX_CHOICES} (got {vector_index!r})"
            )
        self._namespace = check_namespace(namespace)
        self._embedder = embedder
        self._name = name
        shared = tuple(str(c) for c in shared_categories)

        def engine(path: str, create: bool) -> SQLiteEngine:
            return SQLiteEngine(
                SQLiteConnection(
                    path,
                    create=create,
                    busy_timeout_ms=busy_timeout_ms,
                    synchronous=synchronous.upper(),
                    readers=readers,
                    open_timeout_ms=open_timeout_ms,
                ),
                namespace=self._namespace,
                embedder=embedder,
                fusion=fusion,
                shared=shared,
                vector_index=vector_index,
            )

        # Made absolute once: a relative path read again after the process's ``chdir``
        # opened another agent's file for the reads, while the writes went on to this one.
        # Joined, not folded: ``link/../m.db`` is where the link's target's parent holds it.
        where = os.fspath(path)
        if not isinstance(where, str):
            raise TypeError(f"'path' must be a str or os.PathLike[str] (got {path!r:.80})")
        if where != ":memory:" and not os.path.isabs(where):
            where = os.path.join(os.getcwd(), where)
        try:
            opened = engine(where, create)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            raise StorageError(
                f"{path}: cannot open: {exc.strerror} (no file descriptor left)"
            ) from exc
        self._here = _forks.PerProcess(opened, partial(forks.reopened, open_=engine))

    @property  # type: ignore[override] # the base's attribute, narrowed to this engine
    def _engine(self) -> SQLiteEngine:
        """The engine of this process: a child of ``fork()`` opens its own (:mod:`.forks`)."""
        return self._here.get()

    @_engine.setter
    def _engine(self, engine: SQLiteEngine) -> None:
        self._here.set(engine)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, namespace={self._namespace!r})"

    # -- the file -------------------------------------------------------------

    @property
    def path(self) -> str:
        """The database file (``:memory:`` for a private in-process database)."""
        return self._engine.connections.path

    @property
    def recall_slots(self) -> int:
        """How many recalls may run on recall threads at once (with an embedder).

        As many as there are read connections and cores: more only fight for
        the GIL and the connections, and make every turn slower.
        """
        return self._engine.connections.recall_slots

    def stall_note(self) -> str | None:
        """Why a recall of this store may be waiting past its deadline, if a cause is
        seen: another process holding the file's WAL-index lock (``wal_lock: ...``,
        from ``/proc/locks`` on Linux). The render adds it to the recall event."""
        return self._engine.connections.stall_note()

    def interrupt_at(self, until: float) -> _Until:
        """Reads this thread makes inside stop by ``until`` (a ``perf_counter`` value).

        A statement still running then is interrupted (a progress handler),
        the read lock and a locked database are waited for no longer, and the
        call raises :class:`~memory_inject.exceptions.RecallInterruptedError`:
        nothing is left running that holds the store.
        """
        return self._engine.connections.interrupt_at(until)

    @property
    def interrupts_in_place(self) -> bool:
        """True for a store without an embedder that is a private ``:memory:`` database
        or was opened with ``recall_in_place=True``.

        :meth:`interrupt_at` stops SQLite's statements and lock waits at the
        deadline, but not the wait for a file's WAL-index lock (another process
        in WAL recovery, a backup tool, a stuck file system), which SQLite
        retries for about ten seconds outside its busy and progress handlers;
        nor a model's query embedding. So by default a file's recalls run on a
        recall thread, which the render leaves at its deadline (:meth:`stall_note`
        then says why). ``recall_in_place`` trades that for the hop's cost, about
        half of a small store's render: the turn's thread runs the recall, still
        stopped at the deadline by SQLite's interrupt, but held past it by such a
        wait.
        """
        return self._embedder is None and (self._in_place or self.path == ":memory:")

    # -- writes and counts -----------------------------------------------------

    def forget(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Soft-delete ``key`` (the row stays for export); True if a live row was forgotten.

        With ``sessions``, only a row of one of those scopes goes (None among them:
        a shared row, and then only one whose ``source`` is in ``shared_sources``
        when that is given): one statement, so a row written under the key by
        another scope meanwhile is never the one forgotten.
        """
        if not is_text(key):
            return False  # no row holds such a key
        return self._engine.forget(key, forget_scope(sessions, shared_sources))

    def erase(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Remove ``key``'s row for good, live or already forgotten; True if one went.

        ``sessions`` and ``shared_sources`` limit which row may go exactly as on
        :meth:`forget`. The row's text leaves the other rows' context, the keyword
        index, the vector caches and the file's bytes (:mod:`.erase`).
        """
        if not is_text(key):
            return False
        return self._engine.erase(key, forget_scope(sessions, shared_sources))

    def erase_forgotten(self) -> int:
        """Erase every forgotten row of this namespace (a retention job); returns how many."""
        return self._engine.erase_forgotten()

    def count(self) -> int:
        """How many rows of this namespace are not forgotten (superseded and expired ones count)."""
        return self._engine.count()

    # -- recall ---------------------------------------------------------------

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """See :meth:`PersistentStore.answer`; every read stops at ``query.deadline``."""
        if query.deadline is None:
            return super().answer(query)
        with self.interrupt_at(query.deadline):
            return super().answer(query)

    def known_entities(self) -> dict[str, str]:
        """``{display name: entity id}`` for every entity id in use.

        The name is the part after the last ``:`` with ``-``/``_`` read as
        spaces (``company:acme-corp`` -> ``acme corp``), which is what entity
        extraction matches against the turn's input.
        """
        return context.known_entities(self._engine.connections.read, self._namespace)

    def entities_mentioned(
        self, mentions: Sequence[str], *, prefix: str = "company:"
    ) -> dict[str, str]:
        """``{mention: entity id}``: each mention of the input resolved by the rows naming it.

        founder-os's company resolution by content, made exact: the live rows
        whose entity ids start with ``prefix`` and whose content names the
        mention as whole words, with its capitals; one id must hold more than
        half of them (:func:`~memory_inject.storage._plan_rows.mentioned_entity`).
        A mention no row names, or an ambiguous one, is left out.
        """
        return context.entities_mentioned(
            self._engine.connections.read, self._namespace, mentions, prefix
        )

    # -- standing context (PI's hard rules and L1, every turn) ----------------

    @property
    def data_version(self) -> tuple[tuple[int, int | None], int]:
        """Changes whenever the rows do: the change log's head and this store's commits.

        ``memories_log`` (schema 6) logs every row any connection or process
        inserts, updates or deletes, so its head moves with every write
        wherever it came from; unlike ``PRAGMA data_version`` it is the same
        number on every read connection. The write count covers this store's
        own commits. The head entry's random stamp (schema 7) tells a restored
        copy of the file whose history diverged from the one it replaced.
        """
        return self._engine.data_version

    def standing_records(
        self,
        profile_id: str | None,
        *,
        limit: int,
        min_confidence: float,
        categories: Mapping[str, datetime | None] | None = None,
        sessions: Sequence[str] = (),
        shared_only: bool = False,
    ) -> builtins.list[MemoryEntry]:
        """The profile's active L1 records (insertion order) and most confident L2 hard rules.

        One statement on the ``memories_standing`` partial index; at most
        ``limit`` of each, of the rows a turn of ``sessions`` (or a
        ``shared_only`` one) may see. See
        :class:`~memory_inject.contract.SupportsStandingContext`.
        """
        return context.standing_entries(
            self._engine.connections.read,
            self._namespace,
            _now(),
            profile_id,
            limit=limit,
            min_confidence=min_confidence,
            categories=categories,
            sessions=tuple(sessions),
            shared_only=shared_only,
        )

    # -- bulk (functions of the store in :mod:`.bulk`) ---------------------------

    def import_jsonl(
        self,
        src: str | os.PathLike[str] | IO[str],
        *,
        progress: Callable[[int], object] | None = None,
        batch_size: int = 1000,
        reembed: bool = False,
    ) -> int:
        """Upsert one record per JSON line into this namespace; returns how many.

        Rows are committed ``batch_size`` at a time, so a bad line (reported as
        ``ValueError`` with its line number) leaves the earlier batches in
        place; re-running the fixed file is safe because writes are upserts.
        Each line's ``namespace`` is replaced by this store's, so an export of
        one agent can seed another. With ``reembed`` every row is embedded again by this
        store's embedder, whatever vector its line brings (a model switch to one of the
        same size: its vectors cannot be told from the old model's).
        """
        return bulk.import_jsonl(
            self, src, progress=progress, batch_size=batch_size, reembed=reembed
        )

    def export_jsonl(self, dst: str | os.PathLike[str] | IO[str]) -> int:
        """Write every row of this namespace, forgotten and superseded ones included."""
        return bulk.export_jsonl(self, dst)

    def embed_missing(self, *, batch_size: int = 256) -> int:
        """Embed the live rows that have no vector yet (written before an embedder was set)."""
        return bulk.embed_missing(self, batch_size=batch_size)
