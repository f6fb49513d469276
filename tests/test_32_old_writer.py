"""An older library still writing to a store a newer one opened: its writes fail.

A process of an older release (SQLite schema 11, PostgreSQL schema 9) that had the store
open before a current one upgraded it never checked the schema again: it went on storing
and forgetting, and its forgets left the forgotten row's words in the neighbours' context
("my office door code is sunflower22", forgotten, still lifted the reply after it). The
writer guard (``storage/*/writers.py``) makes every write of a connection that is not
this library's fail. An old writer is simulated by a raw connection: it registers no
SQLite function and sets no PostgreSQL setting, as no released library did.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from memory_inject.exceptions import SchemaMismatchError
from memory_inject.records import MemoryRecord
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.sqlite import SQLiteStore, writers

WRITES = (
    "INSERT INTO memories (id, key, content, category, timestamp, updated_at, namespace) "
    "SELECT 'raw', 'raw', 'a raw row', category, timestamp, updated_at, namespace "
    "FROM memories WHERE key = 'a'",
    "UPDATE memories SET content = 'changed by hand' WHERE key = 'a'",
    "UPDATE memories SET deleted_at = '2026-12-01T10:00:00.000000Z' WHERE key = 'a'",
    "DELETE FROM memories WHERE key = 'a'",
)
FORGOTTEN_TEXT = "my office door code is sunflower22"


def _session(store: SQLiteStore | PostgresStore, keys: tuple[str, str] = ("t1", "t2")) -> None:
    store.store(
        keys[0], FORGOTTEN_TEXT, "conversation", session_id="u1", timestamp="2026-12-01T10:00:00Z"
    )
    store.store(
        keys[1],
        "thanks, noted for the visit tomorrow",
        "conversation",
        session_id="u1",
        timestamp="2026-12-01T10:01:00Z",
    )


@pytest.mark.parametrize("statement", WRITES)
def test_sqlite_a_connection_without_the_guard_function_cannot_write(
    tmp_path: Path, statement: str
) -> None:
    path = str(tmp_path / "m.db")
    with SQLiteStore(path) as store:
        store.store("a", "a row the old writer wants to change", "core")
        raw = sqlite3.connect(path, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match=f"no such function: {writers.FUNCTION}"):
            raw.execute(statement)
        assert "file_upgraded_restart_on_new_release" in writers.FUNCTION
        assert raw.execute("SELECT content FROM memories WHERE key = 'a'").fetchall() == [
            ("a row the old writer wants to change",)
        ]  # its reads go on
        raw.close()
        assert store.get("a") is not None and store.get("raw") is None


def test_sqlite_a_writer_open_before_the_upgrade_fails_after_it(tmp_path: Path) -> None:
    """The bug's shape: the other process opened (and wrote) before this library opened the
    file, so its statement is prepared and cached; it never checks the schema again."""
    path = str(tmp_path / "m.db")
    with SQLiteStore(path) as made:
        made.store("a", "first", "core")
    unguarded = sqlite3.connect(path, isolation_level=None)
    for op in ("insert", "update", "delete"):  # a file as the releases before the guard left it
        unguarded.execute(f"DROP TRIGGER memory_inject_writer_1_{op}")
    old = sqlite3.connect(path, isolation_level=None)
    forget = "UPDATE memories SET deleted_at = '2026-12-01T10:02:00.000000Z' WHERE key = ?"
    old.execute(forget, ("nothing",))  # prepared before the upgrade: in the statement cache
    with SQLiteStore(path) as store:
        _session(store)
        with pytest.raises(sqlite3.OperationalError, match="no such function"):
            old.execute(forget, ("t1",))
        store.forget("t1")
        assert store.recall("sunflower22", 5, session_id="u1") == []
    old.close()
    unguarded.close()


def test_sqlite_a_script_that_registers_the_function_may_write(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with SQLiteStore(path) as store:
        store.store("a", "first", "core")
        raw = sqlite3.connect(path, isolation_level=None)
        writers.register(raw)
        raw.execute("UPDATE memories SET content = 'repaired by hand' WHERE key = 'a'")
        raw.close()
        assert (got := store.get("a")) is not None and got.content == "repaired by hand"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_write_of_the_library_passes_the_guard(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    dump = tmp_path / "dump.jsonl"

    def opened(name: str) -> SQLiteStore | PostgresStore:
        if backend == "sqlite":
            return SQLiteStore(str(tmp_path / f"{name}.db"))
        return PostgresStore(request.getfixturevalue("pg_scratch_dsn"), table=name)

    with opened("m") as store:
        _session(store)
        store.store("b", "to be superseded", "core")
        store.supersede("b", MemoryRecord(key="b2", content="its successor"))
        store.upsert(MemoryRecord(key="c", content="upserted"))
        assert store.mark_used(["t2"]) == 1
        assert store.forget("t1") and store.erase("b2") and store.erase_forgotten() == 1
        store.export_jsonl(dump)
    with opened("copy") as copy:
        assert copy.import_jsonl(dump) == 3
        assert {r.key for r in copy.list()} == {"t2", "b", "c"}


def test_sqlite_a_file_guarded_for_a_newer_writer_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with SQLiteStore(path) as store:
        store.store("a", "first", "core")
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(
        "CREATE TRIGGER memory_inject_writer_2_insert BEFORE INSERT ON memories "
        "WHEN 0 BEGIN SELECT memory_inject_writer_2(); END"
    )
    raw.close()
    with pytest.raises(SchemaMismatchError, match="writer generation 2"):
        SQLiteStore(path)


def test_sqlite_an_older_generations_guard_is_replaced(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with SQLiteStore(path) as store:
        store.store("a", "first", "core")
    raw = sqlite3.connect(path, isolation_level=None)
    for op in ("insert", "update", "delete"):
        raw.execute(f"DROP TRIGGER memory_inject_writer_1_{op}")
        raw.execute(
            f"CREATE TRIGGER memory_inject_writer_0_{op} BEFORE {op.upper()} ON memories "
            "WHEN 0 BEGIN SELECT memory_inject_writer_0(); END"
        )
    with SQLiteStore(path) as store:
        store.store("b", "second", "core")
    names = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    raw.close()
    assert {f"memory_inject_writer_1_{op}" for op in ("insert", "update", "delete")} <= names
    assert not any(n.startswith("memory_inject_writer_0") for n in names)


@pytest.mark.postgres
@pytest.mark.parametrize("statement", WRITES)
def test_postgres_a_session_without_the_writer_setting_cannot_write(
    pg_scratch_dsn: str, statement: str
) -> None:
    with PostgresStore(pg_scratch_dsn) as store:
        store.store("a", "a row the old writer wants to change", "core")
        with (
            psycopg.connect(pg_scratch_dsn) as raw,
            pytest.raises(
                psycopg.errors.ObjectNotInPrerequisiteState,
                match=r"upgraded by a newer memory-inject.*restart it on the new release",
            ),
        ):
            raw.execute(statement.replace("'2026-12-01T10:00:00.000000Z'", "now()"))
        with psycopg.connect(pg_scratch_dsn, autocommit=True) as raw:
            raw.execute("SET memory_inject.writer = '0'")
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                raw.execute(statement.replace("'2026-12-01T10:00:00.000000Z'", "now()"))
            assert raw.execute("SELECT count(*) FROM memories").fetchone() == (1,)
        assert store.get("a") is not None


@pytest.mark.postgres
def test_postgres_a_writer_open_before_the_upgrade_fails_after_it(pg_scratch_dsn: str) -> None:
    with PostgresStore(pg_scratch_dsn) as made:
        made.store("a", "first", "core")
    with psycopg.connect(pg_scratch_dsn, autocommit=True) as old:
        old.execute("DROP TRIGGER memory_inject_writer_1 ON memories")  # as before the guard
        old.execute("UPDATE memories SET content = content WHERE key = 'a'")  # it writes
        with PostgresStore(pg_scratch_dsn) as store:
            _session(store)
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                old.execute("UPDATE memories SET deleted_at = now() WHERE key = 't1'")
            assert store.forget("t1")
            assert store.recall("sunflower22", 5, session_id="u1") == []
            store.mark_used(["t2"])
            assert store.erase("t2")


@pytest.mark.postgres
def test_postgres_a_table_guarded_for_a_newer_writer_is_refused(pg_scratch_dsn: str) -> None:
    with PostgresStore(pg_scratch_dsn) as made:
        made.store("a", "first", "core")
    with psycopg.connect(pg_scratch_dsn, autocommit=True) as raw:
        raw.execute(
            "CREATE TRIGGER memory_inject_writer_2 BEFORE INSERT ON memories "
            "FOR EACH STATEMENT EXECUTE FUNCTION memories_w1()"
        )
    with pytest.raises(SchemaMismatchError, match="writer generation 2"):
        PostgresStore(pg_scratch_dsn)
