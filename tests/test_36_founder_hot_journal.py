"""A founder-os file SQLite cannot read as it stands is named so, not called foreign.

A founder-os ``memory.db`` (rollback journal) copied while a write was in flight has a
hot ``-journal`` beside it; the read-only import cannot roll it back, and was refused
with "not a founder-os memory.db" (and by ``memory-inject import`` with a UTF-8 error,
read as JSON Lines), which sent the user looking for the wrong cause (round 35's note).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_inject.cli import cli
from memory_inject.storage.founder_os import read_founder_os
from memory_inject.storage.sqlite import SQLiteStore

_COLUMNS = "id, key, category, content, source_plugin, confidence, status, company_id"


def _cut_off(tmp_path: Path) -> Path:
    """A founder-os file and the hot journal of a write that never ended, as a copy taken
    mid-write leaves them."""
    src = tmp_path / "src" / "memory.db"
    src.parent.mkdir()
    conn = sqlite3.connect(src, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute(f"CREATE TABLE memories ({_COLUMNS})")
    conn.execute("PRAGMA cache_size=1")  # the update below spills into the file
    rows = [(str(i), f"k{i}", "fact", "x" * 200, "p", 0.9, "active", None) for i in range(3000)]
    conn.executemany("INSERT INTO memories VALUES (?,?,?,?,?,?,?,?)", rows)
    conn.execute("BEGIN")
    conn.execute("UPDATE memories SET content = 'y' || content")
    copy = tmp_path / "memory.db"
    shutil.copy(src, copy)
    shutil.copy(f"{src}-journal", f"{copy}-journal")
    conn.execute("ROLLBACK")
    conn.close()
    return copy


def test_a_hot_journal_is_named_as_the_cause(tmp_path: Path) -> None:
    path = _cut_off(tmp_path)
    with pytest.raises(ValueError, match="SQLite cannot read it as it stands") as info:
        list(read_founder_os(path))
    assert "memory.db-journal beside it is a write cut off" in str(info.value)
    assert "not a founder-os" not in str(info.value)


def test_the_cli_says_so_and_opens_no_store(tmp_path: Path) -> None:
    path = _cut_off(tmp_path)
    db = tmp_path / "out.db"
    result = CliRunner().invoke(cli, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 1
    assert "memory.db-journal beside it is a write cut off" in result.output
    assert not db.exists()


def test_another_sqlite_file_is_called_foreign_not_bad_json(tmp_path: Path) -> None:
    """memory-inject's own store given to ``import``: it is not JSON Lines, nor founder-os."""
    with SQLiteStore(tmp_path / "ours.db") as store:
        store.store("k", "a fact", "core")
    out = str(tmp_path / "x.db")
    result = CliRunner().invoke(cli, ["import", str(tmp_path / "ours.db"), "--db", out])
    assert result.exit_code == 1
    assert "not a founder-os memory.db" in result.output
    assert "codec" not in result.output


def test_a_key_on_two_rows_is_refused_naming_both(tmp_path: Path) -> None:
    """A founder-os file without its UNIQUE key (an old schema, a damaged file): one row
    replaced the other in the store and the count said both were imported (round 36)."""
    path = tmp_path / "memory.db"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE memories ({_COLUMNS})")
    for rid in ("a1", "a2"):
        conn.execute(
            "INSERT INTO memories VALUES (?,?,?,?,?,?,?,?)",
            (rid, "acme-billing", "fact", f"billing via {rid}", "p", 90, "confirmed", None),
        )
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match="key 'acme-billing' is on two rows") as info:
        list(read_founder_os(path))
    assert "'a1'" in str(info.value) and "'a2'" in str(info.value)
