"""Issue 29: an initial bulk load on PostgreSQL no longer locks the table's writers out.

The import commits its staged rows, drops the HNSW index with ``DROP INDEX CONCURRENTLY``,
merges, and builds the index again with ``CREATE INDEX CONCURRENTLY`` after the merge
committed, each on a connection of its own: no step holds a lock that another session's
write waits for. Before, the index was dropped and built inside the import's transaction
(ACCESS EXCLUSIVE from the drop to the commit): every other session's write of the table
waited for the merge and the build (30,000 rows: 5.9 s, past the default 5 s lock
timeout). A build that fails leaves no invalid index, and an open that finds one builds
it again.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import KeyOwnedError
from memory_inject.storage.postgres import PostgresStore, bulk, hnsw

pytestmark = pytest.mark.postgres

Factory = Callable[..., PostgresStore]
INDEX = "memories_embedding_hnsw"
#: How long the build is made to last (a sleep before it), so that a write can try meanwhile.
BUILD_S = 2.0


@pytest.fixture
def db(pg_scratch_dsn: str) -> str:
    return pg_scratch_dsn


@pytest.fixture
def open_store(db: str) -> Iterator[Factory]:
    """``open_store(**kwargs)``: a store with 32-dim hashing vectors on the test's database."""
    made: list[PostgresStore] = []

    def factory(**kwargs: Any) -> PostgresStore:
        made.append(PostgresStore(db, embedder=HashingEmbedder(32), **kwargs))
        return made[-1]

    yield factory
    for store in made:
        store.close()


def _lines(n: int) -> io.StringIO:
    rows = [{"key": f"k{i}", "content": f"filler note number {i}"} for i in range(n)]
    rows.append({"key": "db", "content": "Production runs PostgreSQL"})
    return io.StringIO("\n".join(map(json.dumps, rows)))


def _valid(dsn: str) -> bool | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (INDEX,)
        ).fetchone()
    return None if row is None else bool(row[0])


def _table_locks(dsn: str) -> list[str]:
    """The modes of the locks granted on the table right now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT mode FROM pg_locks WHERE relation = to_regclass('memories') AND granted"
        ).fetchall()
    return [str(m) for (m,) in rows]


def _slow_build(monkeypatch: pytest.MonkeyPatch, started: threading.Event) -> None:
    """The rebuild statements, with a sleep of BUILD_S first and ``started`` set before it."""
    rebuild = hnsw.rebuild_statements

    def slow(names: Any) -> list[sql.SQL | sql.Composed]:
        started.set()
        sleep = sql.SQL("SELECT pg_sleep({})").format(sql.Literal(BUILD_S))
        return [sleep, *rebuild(names)]

    monkeypatch.setattr(hnsw, "rebuild_statements", slow)


def _import_beside_a_write(
    loader: PostgresStore, other: PostgresStore, begun: threading.Event, when: str
) -> dict[str, Any]:
    """Import 201 rows with ``loader`` while ``other`` writes row ``w`` 0.3 s after ``begun``;
    the write's ``seconds``, or its ``error``."""
    outcome: dict[str, Any] = {}

    def write() -> None:
        begun.wait(30)
        time.sleep(0.3)  # inside the step's sleep
        t0 = time.perf_counter()
        try:
            other.store("w", f"a note written {when}")
            outcome["seconds"] = time.perf_counter() - t0
        except Exception as exc:
            outcome["error"] = repr(exc)

    writer = threading.Thread(target=write)
    writer.start()
    assert 201 == loader.import_jsonl(_lines(200))
    writer.join(30)
    return outcome


class TestTheBuildLocksNoWriterOut:
    def test_a_write_during_the_build_goes_through(
        self, open_store: Factory, db: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Another store (lock timeout 0.5 s) writes while the index is being built."""
        loader = open_store()
        other = open_store(namespace="other", timeout=0.5)
        monkeypatch.setattr(loader._engine, "hnsw_rebuild_at", 50)
        started = threading.Event()
        _slow_build(monkeypatch, started)
        outcome = _import_beside_a_write(loader, other, started, "during the build")
        assert "error" not in outcome, outcome
        assert outcome["seconds"] < BUILD_S  # it did not wait for the build
        assert True is _valid(db)
        assert "db" == loader.recall("postgress", 3)[0].key
        assert "w" == other.recall("note written during the build", 1)[0].key

    def test_the_import_holds_no_table_lock_while_building(
        self, open_store: Factory, db: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """During the build no session holds the table's ACCESS EXCLUSIVE lock."""
        loader = open_store()
        monkeypatch.setattr(loader._engine, "hnsw_rebuild_at", 50)
        started = threading.Event()
        _slow_build(monkeypatch, started)
        seen: list[str] = []

        def look() -> None:
            started.wait(30)
            time.sleep(0.3)
            seen.extend(_table_locks(db))

        looker = threading.Thread(target=look)
        looker.start()
        loader.import_jsonl(_lines(200))
        looker.join(30)
        assert "AccessExclusiveLock" not in seen
        assert "ShareLock" not in seen  # a plain CREATE INDEX's, which blocks writes

    def test_a_write_during_the_merge_goes_through(
        self, open_store: Factory, db: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The index is dropped without ACCESS EXCLUSIVE: a write while the merge's
        transaction is open does not wait for it."""
        loader = open_store()
        other = open_store(namespace="other", timeout=0.5)
        monkeypatch.setattr(loader._engine, "hnsw_rebuild_at", 50)
        merging = threading.Event()
        check = bulk._check_staged

        def slow_check(q: Any, cur: psycopg.Cursor[Any]) -> None:
            check(q, cur)
            merging.set()
            cur.execute(sql.SQL("SELECT pg_sleep({})").format(sql.Literal(BUILD_S)))

        monkeypatch.setattr(bulk, "_check_staged", slow_check)
        outcome = _import_beside_a_write(loader, other, merging, "during the merge")
        assert "error" not in outcome, outcome
        assert True is _valid(db)
        assert 202 == loader.count() + other.count()


class TestAFailedBuild:
    def test_the_rows_stay_and_the_next_open_builds_the_index(
        self,
        open_store: Factory,
        db: str,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A build that fails is logged; the import's rows are in; the next open builds it."""
        loader = open_store()
        monkeypatch.setattr(loader._engine, "hnsw_rebuild_at", 50)
        monkeypatch.setattr(hnsw, "rebuild_statements", lambda names: [sql.SQL("SELECT 1 / 0")])
        with caplog.at_level(logging.WARNING, logger="memory_inject"):
            assert 201 == loader.import_jsonl(_lines(200))
        assert "could not be built" in caplog.text
        assert None is _valid(db)
        assert 201 == loader.count()
        assert "db" == loader.recall("postgress", 3)[0].key  # vectors scanned, no index
        monkeypatch.undo()
        open_store().close()
        assert True is _valid(db)

    def test_an_invalid_index_is_dropped_and_built_at_open(
        self, open_store: Factory, db: str
    ) -> None:
        """What a concurrent build that died leaves (an invalid index) is rebuilt at open."""
        store = open_store()
        store.store("a", "alpha note")
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(
                "UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)",
                (INDEX,),
            )
        assert False is _valid(db)
        open_store().close()
        assert True is _valid(db)
        assert ["a"] == [e.key for e in store.recall("alpha", 3)]

    def test_an_index_being_built_is_left_to_its_builder(
        self, open_store: Factory, db: str
    ) -> None:
        """An invalid index whose table another session holds (an import's concurrent build
        does) is left alone: the open does not wait for the build, nor fail."""
        open_store().store("a", "alpha note")
        with psycopg.connect(db) as builder:
            builder.execute(
                "UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)",
                (INDEX,),
            )
            builder.commit()
            builder.execute("LOCK TABLE memories IN SHARE UPDATE EXCLUSIVE MODE")
            open_store().close()  # no StoreLockedError: it did not wait for the table
            assert False is _valid(db)
        open_store().close()  # the table free again: the next open builds it
        assert True is _valid(db)


class TestARefusedLoad:
    def test_nothing_is_written_and_the_index_is_built_again(
        self, open_store: Factory, db: str
    ) -> None:
        """A forced rebuild whose import is refused (a key another session owns): the index
        was dropped before the checks, so it is built again; no row was written."""
        store = open_store()
        store.store("k1", "alice's own note", session_id="alice")
        lines = io.StringIO(
            json.dumps({"key": "k0", "content": "fine", "session_id": "bob"})
            + "\n"
            + json.dumps({"key": "k1", "content": "bob takes it", "session_id": "bob"})
        )
        with pytest.raises(KeyOwnedError):
            store.import_jsonl(lines, rebuild_index=True)
        assert True is _valid(db)
        assert 1 == store.count()
        rec = store.get("k1")
        assert rec is not None
        assert "alice's own note" == rec.content


class TestAnOpenThatBuildsTheIndex:
    def test_a_big_table_gets_its_index_without_locking_writers_out(
        self, open_store: Factory, db: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An open that finds no index on a table of CONCURRENT_AT rows or more builds it
        concurrently after its transaction: a write meanwhile goes through (lock timeout
        0.5 s), no session holds a SHARE or ACCESS EXCLUSIVE lock on the table, and the
        index is valid after the open."""
        monkeypatch.setattr(hnsw, "CONCURRENT_AT", 50)
        first = open_store()
        first.import_jsonl(_lines(100), rebuild_index=False)
        other = open_store(namespace="other", timeout=0.5)
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(INDEX)))
        started = threading.Event()
        _slow_build(monkeypatch, started)
        seen: list[str] = []
        outcome: dict[str, Any] = {}

        def meanwhile() -> None:
            if not started.wait(30):
                return
            time.sleep(0.3)
            seen.extend(_table_locks(db))
            try:
                other.store("w", "a note written while the index is built")
                outcome["ok"] = True
            except Exception as exc:
                outcome["error"] = repr(exc)

        side = threading.Thread(target=meanwhile)
        side.start()
        opened = open_store()
        side.join(30)
        assert started.is_set()  # built by the concurrent path, after the open's transaction
        assert {"ok": True} == outcome
        assert not {"ShareLock", "AccessExclusiveLock"} & set(seen)
        assert True is _valid(db)
        assert "db" == opened.recall("postgress", 3)[0].key

    def test_a_small_table_gets_it_at_once(self, open_store: Factory, db: str) -> None:
        """Below CONCURRENT_AT the open builds the missing index inside its transaction."""
        open_store().store("a", "alpha note")
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(INDEX)))
        assert None is _valid(db)
        open_store().close()
        assert True is _valid(db)
