"""``erase``: a delete that removes the data (mem0's ``memory.delete``, LangGraph's
``store.delete``, a user's request under the GDPR), next to ``forget``'s soft delete.

An erased row is gone from every read, from the other rows' context, from the
indexes and caches of a store object that recalled it before, and on SQLite from
the file's bytes; ``erase_forgotten`` is the retention job for rows forgotten
earlier. Same scope rules as ``forget``.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject.contract import SupportsErase, SupportsJsonl
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.markdown import MarkdownStore
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.none import NoneStore
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite.vector_ann_file import graph_path
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import mirrored
from tests.storage.test_contract import needs

#: A word no other row holds, as the keyword index keeps it (lower case, no stem to take).
SECRET = "zebraquokka77"  # noqa: S105 - a test value, not a secret
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _exported(store: Any) -> str:
    out = io.StringIO()
    store.export_jsonl(out)
    return out.getvalue()


# -- the contract: every store with the capability ------------------------------------


@needs(SupportsErase)
def test_erase_removes_a_live_row_and_a_new_write_is_a_new_row(
    store_factory: Callable[..., Any],
) -> None:
    store = store_factory()
    store.store("pw", f"the office password is {SECRET}", "core", timestamp=T0, tags=["x"])
    store.store("other", "the office is on the third floor", "core")
    assert "pw" in [e.key for e in store.recall(SECRET, 5)]
    old = store.get("pw")
    assert store.erase("pw") is True
    assert (None, ["other"], 1) == (
        store.get("pw"),
        [r.key for r in store.list()],
        store.count(),
    )
    assert [] == [e.key for e in store.recall(SECRET, 5) if e.key == "pw"]
    assert store.erase("pw") is False
    if isinstance(store, SupportsJsonl):
        assert SECRET not in _exported(store)
    again = store.store("pw", "a new fact")
    assert (again.timestamp > old.timestamp, again.content, again.tags) == (True, "a new fact", ())


@needs(SupportsErase, SupportsJsonl)
def test_erase_removes_a_row_forgotten_earlier(store_factory: Callable[..., Any]) -> None:
    store = store_factory()
    store.store("pw", f"the office password is {SECRET}", "core")
    assert store.forget("pw") is True
    assert SECRET in _exported(store)  # a forget keeps the row for export
    assert store.erase("pw") is True
    assert SECRET not in _exported(store)
    assert (store.erase("pw"), store.forget("pw")) == (False, False)


@needs(SupportsErase)
def test_erase_keeps_forgets_scope_rules(store_factory: Callable[..., Any]) -> None:
    store = store_factory()
    store.store("mine", "a fact of session one", "conversation", session_id="s1")
    store.store("host", "a fact the host wrote", "core", source="host")
    assert store.erase("mine", sessions=["s2"]) is False
    assert store.erase("mine", sessions=[]) is False
    assert store.erase("host", sessions=["s1"]) is False
    assert store.erase("host", sessions=["s1", None], shared_sources=["tool"]) is False
    assert (store.get("mine") is not None, store.get("host") is not None) == (True, True)
    with pytest.raises(TypeError):
        store.erase("mine", sessions="s1")
    assert store.erase("mine", sessions=["s1"]) is True
    assert store.erase("host", sessions=[None], shared_sources=["host"]) is True
    assert 0 == store.count()


@needs(SupportsErase, SupportsJsonl)
def test_erase_forgotten_erases_the_forgotten_rows_of_its_namespace_only(
    store_factory: Callable[..., Any], backend: str
) -> None:
    store = store_factory()
    other = store_factory(same_database_as=store, namespace="other")
    for s in (store, other):
        for i in range(4):
            s.store(f"k{i}", f"fact {i} of {SECRET}", "core")
        s.forget("k1")
        s.forget("k2")
    assert 2 == store.erase_forgotten()
    assert 0 == store.erase_forgotten()
    assert ["k0", "k3"] == sorted(r.key for r in store.list())
    assert 2 == _exported(store).count(SECRET)
    assert 4 == _exported(other).count(SECRET)  # another namespace's are its own


def test_in_memory_erase_forgotten_drops_records_given_forgotten() -> None:
    gone = MemoryRecord(key="old", content="x", deleted_at=T0)
    store = InMemoryStore([gone, MemoryRecord(key="live", content="y")])
    assert (1, ["live"]) == (store.erase_forgotten(), [r.key for r in store.list()])


def test_every_builtin_store_can_erase(tmp_path: Path) -> None:
    sqlite = SQLiteStore(tmp_path / "m.db")
    stores = [InMemoryStore(), sqlite, MarkdownStore(tmp_path / "md"), NoneStore()]
    assert all(isinstance(s, SupportsErase) for s in stores)
    assert (NoneStore().erase("k"), NoneStore().erase_forgotten()) == (False, 0)
    sqlite.close()


# -- SQLite: the file's bytes, the caches of a store that recalled the row -----------


def _fill(store: SQLiteStore, secret: bool) -> None:
    """Rows around the secret: in its session, in its sessionless event, and near it."""
    for i in range(40):
        store.store(
            f"s{i}",
            f"session note {i} about the garden",
            "conversation",
            session_id="chat",
            timestamp=_at(i),
        )
        if i == 20 and secret:
            store.store(
                "pw",
                f"my password is {SECRET} keep it",
                "conversation",
                session_id="chat",
                timestamp=_at(i),
            )
        store.store(f"d{i}", f"daily note {i} about the weather", "daily", timestamp=_at(2 * i))
        if i == 10 and secret:
            store.store("pw-day", f"the door code is {SECRET} too", "daily", timestamp=_at(20))


def _grep(folder: Path) -> int:
    """How many times the secret's bytes appear in the database's files."""
    return sum(p.read_bytes().count(SECRET.encode()) for p in folder.glob("m.db*"))


def test_no_byte_of_an_erased_row_stays_in_the_files(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder(dim=64))
    _fill(store, secret=True)
    store.store(
        "pw",
        f"my password is {SECRET} keep it, updated",
        "conversation",
        session_id="chat",
        timestamp=_at(20),
    )
    assert {"pw", "pw-day"} <= {e.key for e in store.recall(SECRET, 10)}
    store.forget("pw")
    store.forget("pw-day")
    assert _grep(tmp_path) > 0  # a forget keeps the text in the file
    assert store.erase("pw") is True
    assert 1 == store.erase_forgotten()
    store.close()
    assert 0 == _grep(tmp_path)


def test_an_erase_leaves_the_bytes_of_no_live_row_either(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    _fill(store, secret=True)
    assert store.erase("pw") and store.erase("pw-day")
    assert 0 == _grep(tmp_path)  # the store open: the WAL was checkpointed and truncated
    store.close()
    assert 0 == _grep(tmp_path)


def _scores(store: SQLiteStore, prompt: str, session: str | None = None) -> dict[str, float]:
    return {e.key: round(e.score or 0.0, 4) for e in store.recall(prompt, 10, session_id=session)}


@pytest.mark.parametrize("kind", ["mirror", "fts", "vectors"])
def test_a_store_that_recalled_the_row_answers_as_if_it_was_never_written(
    tmp_path: Path, kind: str
) -> None:
    """Its caches (keyword mirror, term statistics, vector matrix) follow the erase: no
    hit on the row, no neighbour lifted by its words, every score as in a store that
    never held it; a second store object on the file, which recalled it too, as well."""

    def opened(path: Path) -> SQLiteStore:
        if kind == "mirror":
            return mirrored(path)
        if kind == "vectors":
            return SQLiteStore(path, embedder=HashingEmbedder(dim=64))
        return SQLiteStore(path)

    erased, never = opened(tmp_path / "a.db"), opened(tmp_path / "b.db")
    _fill(erased, secret=True)
    _fill(never, secret=False)
    reader = opened(tmp_path / "a.db")
    prompts = (SECRET, f"password {SECRET}", "garden note", "weather door code")
    for s in (erased, reader):
        for p in prompts:
            assert s.recall(p, 10) is not None
        assert {"pw", "pw-day"} <= set(_scores(s, SECRET)) | set(_scores(s, SECRET, "chat"))
    assert erased.erase("pw") and erased.erase("pw-day")
    for s in (erased, reader):
        for p in prompts:
            for session in (None, "chat"):
                assert _scores(never, p, session) == _scores(s, p, session), (p, session)
    for s in (erased, reader, never):
        s.close()


class _Graph:
    """An approximate index as the vector cache holds it: built or still building."""

    def __init__(self, *, ready: bool) -> None:
        self.ready, self.stopped = ready, False

    def stop(self) -> None:
        self.stopped = True


def test_the_saved_graph_of_the_vectors_is_removed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder(dim=64))
    store.store("pw", f"my password is {SECRET}")
    store.store("kept", "a fact")

    def graph(namespace: str) -> Path:
        path = store._engine.connections.read(lambda c: graph_path(c, namespace, 64), "t")
        assert path is not None
        return path

    mine, theirs = graph("default"), graph("other")
    for p in (mine, theirs):
        p.write_bytes(b"graph")
        p.with_name(p.name + ".json").write_text("{}")
    building, ready = _Graph(ready=False), _Graph(ready=True)
    cache = store._engine.vector_cache()
    assert cache is not None
    cache._indexes.update({("default", 64): building, ("default", 8): ready})  # type: ignore[dict-item]
    assert store.erase("kept") is True  # a row with a vector: the namespace's graph goes
    # A build from the vectors before the erase would save them: stopped and dropped.
    assert (building.stopped, ready.stopped) == (True, False)
    assert [("default", 8)] == list(cache._indexes)
    assert (mine.exists(), Path(f"{mine}.json").exists()) == (False, False)
    assert (theirs.exists(), Path(f"{theirs}.json").exists()) == (True, True)
    store.close()


def test_erases_racing_recalls_and_writes_break_none(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder(dim=32))
    for i in range(60):
        store.store(f"old{i}", f"old fact {i} about {SECRET}", session_id=f"s{i % 3}")
    errors: list[BaseException] = []
    done = threading.Event()

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    def recalls() -> None:
        while not done.is_set():
            for session in (None, "s1"):
                for e in store.recall(f"old fact {SECRET}", 20, session_id=session):
                    assert e.key.startswith(("old", "new"))

    def writes() -> None:
        for i in range(60):
            store.store(f"new{i}", f"new fact {i} about {SECRET}", session_id=f"s{i % 3}")

    def erases() -> None:
        for i in range(60):
            assert store.erase(f"old{i}") is True

    readers = [threading.Thread(target=guarded(recalls)) for _ in range(3)]
    writers = [threading.Thread(target=guarded(f)) for f in (writes, erases)]
    for t in (*readers, *writers):
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert [] == errors
    assert sorted(f"new{i}" for i in range(60)) == sorted(r.key for r in store.list())
    store.close()


# -- Markdown: the block leaves its file ------------------------------------------


def _folder_text(root: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in root.rglob("*") if p.is_file())


def test_markdown_erase_rewrites_the_file_without_the_block(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    store.store("pw", f"my password is {SECRET}", "core")
    store.store("kept", "the office is on the third floor", "core")
    gone = MemoryRecord(
        key="old", content=f"an old {SECRET}", category="daily", timestamp=T0, deleted_at=T0
    )
    store.upsert(gone)
    assert 2 == _folder_text(tmp_path).count(SECRET)
    assert (store.erase("pw"), store.erase("pw")) == (True, False)
    assert 1 == store.erase_forgotten()
    assert (0, ["kept"]) == (_folder_text(tmp_path).count(SECRET), [r.key for r in store.list()])
    assert not list(tmp_path.rglob("*.tmp"))


# -- PostgreSQL: the rows, the context, the dead tuples -----------------------------


@pytest.fixture
def pg_store(pg_dsn: str) -> Iterator[pgb.ScratchPostgresStore]:
    store = pgb.make_postgres_store(pg_dsn)
    yield store
    store.close()


def test_postgres_erase_leaves_the_text_in_no_row_and_vacuums(
    pg_store: pgb.ScratchPostgresStore,
) -> None:
    import psycopg

    for i in range(6):
        pg_store.store(
            f"s{i}", f"session note {i}", "conversation", session_id="chat", timestamp=_at(i)
        )
        if i == 2:
            pg_store.store(
                "pw",
                f"my password is {SECRET}",
                "conversation",
                session_id="chat",
                timestamp=_at(i),
            )
    pg_store.forget("s5")
    assert pg_store.erase("pw") is True
    assert 1 == pg_store.erase_forgotten()
    table = pg_store._engine.q.names.table
    with psycopg.connect(pg_store.database.dsn, autocommit=True) as conn:
        held = conn.execute(
            f"SELECT count(*) FROM {table} WHERE concat_ws(' ', content, ctx_prev, "
            "ctx_prev2, tsv::text) LIKE %s",
            (f"%{SECRET}%",),
        ).fetchone()
        vacuumed = conn.execute(
            "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = %s",
            (table,),
        ).fetchone()
    assert (held, vacuumed) == ((0,), (True,))
    assert ["s0", "s1", "s2", "s3", "s4"] == sorted(r.key for r in pg_store.list())
