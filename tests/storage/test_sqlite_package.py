"""The SQLite engine's folder: one package, a module per job, each small, one public store."""

from __future__ import annotations

import ast
import inspect
import io
from pathlib import Path

import pytest

import memory_inject.storage
import memory_inject.storage.sqlite as engine
from memory_inject.exceptions import StorageError

ROOT = Path(__file__).resolve().parent.parent.parent
ENGINE = ROOT / "memory_inject" / "storage" / "sqlite"
#: The jobs of issue 28's engine folder, one module each (split further where a job outgrew 400).
JOBS = {
    "store",
    "engine",
    "connection",
    "pool",
    "bulk",
    "ddl",
    "migrations",
    "codec",
    "errors",
    "recall",
    "locks",
    "keyword_terms",
    "keyword_rank",
    "keyword_mirror",
    "vectors",
}
#: The flat modules the folder replaced.
FLAT = (
    "sqlite.py",
    "_sqlite_conn.py",
    "_sqlite_bulk.py",
    "_sqlite_recall.py",
    "_sqlite_locks.py",
    "_sqlite_schema.py",
    "_fts_mirror.py",
    "_fts_rank.py",
    "_fts_terms.py",
    "_vector_cache.py",
)


class TestEngineFolder:
    def test_every_job_has_its_module_in_the_folder(self) -> None:
        """storage/sqlite/ holds a module per job, and the flat folder none of the old ones."""
        found = {p.stem for p in ENGINE.glob("*.py")}
        assert set() == JOBS - found
        assert [] == [name for name in FLAT if (ENGINE.parent / name).exists()]

    def test_every_module_is_under_400_lines_and_says_what_it_owns(self) -> None:
        """Each module of the engine folder has an opening docstring and fewer than 400 lines."""
        paths = sorted(ENGINE.glob("*.py"))
        assert len(paths) > len(JOBS)
        for path in paths:
            text = path.read_text(encoding="utf-8")
            assert len(text.splitlines()) < 400, path.name
            assert ast.get_docstring(ast.parse(text)), path.name


class TestPublicFace:
    def test_the_store_is_the_engine_store_everywhere(self) -> None:
        """The package, its store module and storage's face give one SQLiteStore."""
        from memory_inject.storage.sqlite.store import SQLiteStore as engine_store

        assert engine_store is engine.SQLiteStore
        assert engine_store is memory_inject.storage.SQLiteStore
        assert "memory_inject.storage.sqlite.store" == engine_store.__module__

    def test_all_is_the_package_public_names(self) -> None:
        """``__all__`` is what the old ``storage.sqlite`` module exported, and every public
        name of the package that is not one of its modules."""
        from memory_inject.storage.sqlite.connection import LOCK_RETRY_DELAY_S

        public = {
            name
            for name, value in vars(engine).items()
            if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
        }
        assert ["LOCK_RETRY_DELAY_S", "SQLiteStore"] == engine.__all__
        assert set(engine.__all__) == public
        assert LOCK_RETRY_DELAY_S == engine.LOCK_RETRY_DELAY_S


class TestComposition:
    def test_the_store_holds_an_engine_over_plain_connections(self, tmp_path: Path) -> None:
        """Issue 28: one level over PersistentStore; the engine and its connections inherit
        nothing; the bulk paths are functions of the store (no class in ``bulk``)."""
        from memory_inject.storage._base import PersistentStore
        from memory_inject.storage.sqlite import bulk
        from memory_inject.storage.sqlite.connection import SQLiteConnection
        from memory_inject.storage.sqlite.engine import SQLiteEngine

        assert (PersistentStore,) == engine.SQLiteStore.__bases__
        assert ((object,), (object,)) == (SQLiteEngine.__bases__, SQLiteConnection.__bases__)
        assert [] == [
            n
            for n, v in vars(bulk).items()
            if inspect.isclass(v) and v.__module__ == bulk.__name__ and not n.startswith("_")
        ]
        with engine.SQLiteStore(tmp_path / "m.db") as store:
            assert isinstance(store._engine, SQLiteEngine)
            assert isinstance(store._engine.connections, SQLiteConnection)
            store.store("k", "the prod-3 deploy window is Friday")
            out = io.StringIO()
            assert 1 == bulk.export_jsonl(store, out) == len(out.getvalue().splitlines())

    def test_a_closed_store_refuses_through_its_engine(self, tmp_path: Path) -> None:
        """The closed state is the engine's; every path names what was refused."""
        store = engine.SQLiteStore(tmp_path / "m.db")
        store.store("k", "the prod-3 deploy window is Friday")
        store.close()
        calls = [
            lambda: store.store("k2", "x"),
            lambda: store.get("k"),
            lambda: store.recall("prod-3", 5),
            store.count,
        ]
        for call in calls:
            with pytest.raises(StorageError, match="the store is closed"):
                call()
