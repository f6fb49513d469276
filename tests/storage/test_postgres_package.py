"""The PostgreSQL engine's folder: one package, small modules, psycopg imported only when asked."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memory_inject.storage

ROOT = Path(__file__).resolve().parent.parent.parent
ENGINE = ROOT / "memory_inject" / "storage" / "postgres"
#: The jobs of issue 28's engine folder, one module each (split further where a job outgrew 400).
JOBS = {
    "store",
    "engine",
    "connection",
    "bulk",
    "schema",
    "context",
    "queries",
    "recall",
    "terms",
    "pgvector",
    "local",
}


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter of this environment, from the repository root."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )


class TestEngineFolder:
    def test_every_job_has_its_module_in_the_folder(self) -> None:
        """storage/postgres/ holds a module per job, and the flat folder none of them."""
        found = {p.stem for p in ENGINE.glob("*.py")}
        assert set() == JOBS - found
        flat = {p.name for p in ENGINE.parent.glob("*.py")}
        assert set() == {n for n in flat if n.startswith(("_pg_", "_pgvector", "postgres"))}

    def test_every_module_is_under_400_lines_and_says_what_it_owns(self) -> None:
        """Each module of the engine folder has an opening docstring and fewer than 400 lines."""
        paths = sorted(ENGINE.glob("*.py"))
        assert paths
        for path in paths:
            text = path.read_text(encoding="utf-8")
            assert len(text.splitlines()) < 400, path.name
            assert ast.get_docstring(ast.parse(text)), path.name

    def test_the_store_is_the_engine_store_everywhere(self) -> None:
        """The package, its store module and storage's lazy name give one PostgresStore."""
        from memory_inject.storage.postgres import PostgresStore
        from memory_inject.storage.postgres.store import PostgresStore as engine_store

        assert engine_store is PostgresStore
        assert engine_store is memory_inject.storage.PostgresStore
        assert "memory_inject.storage.postgres.store" == PostgresStore.__module__


class TestLazyImport:
    def test_storage_imports_psycopg_only_when_postgres_store_is_asked_for(self) -> None:
        """``import memory_inject.storage`` leaves psycopg out; PostgresStore loads the engine."""
        done = _run(
            "import sys, memory_inject.storage as s\n"
            "before = sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', "
            "'psycopg_pool') or m.startswith('memory_inject.storage.postgres'))\n"
            "s.PostgresStore\n"
            "print(before, 'memory_inject.storage.postgres.store' in sys.modules)\n"
        )
        assert 0 == done.returncode, done.stderr
        assert "[] True" == done.stdout.strip()


class TestTrialServerCommand:
    def test_the_readme_command_is_the_engine_folders(self) -> None:
        """The README's trial-server command names the engine folder's ``local`` module, and
        the old flat module is gone."""
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        assert "python -m memory_inject.storage.postgres.local start" in readme
        assert "storage.pg_local" not in readme
        assert not (ROOT / "memory_inject" / "storage" / "pg_local.py").exists()

    def test_the_command_runs_from_its_module(self) -> None:
        """``python -m memory_inject.storage.postgres.local --help`` names itself."""
        done = subprocess.run(
            [sys.executable, "-m", "memory_inject.storage.postgres.local", "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert 0 == done.returncode, done.stderr
        assert "usage: python -m memory_inject.storage.postgres.local" in done.stdout
