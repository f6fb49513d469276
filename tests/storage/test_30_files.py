"""The file system as it is: a relative path and ``chdir``, hard links, odd names, permissions.

Found by a helper working as an operator (round 30): a store opened with a relative path
read another agent's file after the process changed directory (its reads open connections
lazily, by the path as given), and two processes writing one file through two hard-linked
names lost 30 returned writes without an error.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory_inject import render_memory_context
from memory_inject.exceptions import StorageError
from memory_inject.storage import SQLiteStore
from memory_inject.storage.sqlite import migrations


def test_a_relative_path_stays_the_file_it_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    other = SQLiteStore(bob / ".memory" / "m.db")
    other.store("bob_secret", "Bob's bank PIN for production deploys is 4471.")
    other.close()
    monkeypatch.chdir(alice)
    store = SQLiteStore(".memory/m.db", readers=2)
    try:
        monkeypatch.chdir(bob)
        store.store("alice_note", "Alice deploys production on Tuesdays.")
        out = render_memory_context(store, "who deploys production and what is the PIN?")
        assert [e.key for e in out.entries] == ["alice_note"]
        assert store.get("bob_secret") is None
        assert store.get("alice_note") is not None
        assert store.path == str(alice / ".memory" / "m.db")
    finally:
        store.close()


def test_a_file_with_two_names_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    SQLiteStore(db).close()
    os.link(db, tmp_path / "hard.db")
    for name in (db, tmp_path / "hard.db"):
        with pytest.raises(StorageError, match="2 names \\(hard links\\)"):
            SQLiteStore(name)


def test_a_symbolic_link_is_one_file(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    SQLiteStore(db).close()
    (tmp_path / "soft.db").symlink_to(db)
    a, b = SQLiteStore(db), SQLiteStore(tmp_path / "soft.db")
    try:
        a.store("k", "Written through the real name.")
        assert b.get("k") is not None
    finally:
        a.close()
        b.close()


def test_a_nul_in_the_path_is_refused_before_any_file_is_made(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'path' must not hold a NUL character"):
        SQLiteStore(str(tmp_path / "a\0b.db"))
    assert list(tmp_path.iterdir()) == []


def test_a_name_too_long_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="too long"):
        SQLiteStore(tmp_path / ("x" * 300 + ".db"))


def test_permissions_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root, for whom every file is writable: the check is given the answers."""
    db = tmp_path / "m.db"
    db.write_bytes(b"")
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != db)
    assert "the file must be readable and writable" in migrations.access_hint(db)
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != tmp_path)
    hint = migrations.access_hint(db)
    assert "its directory" in hint and "-wal and -shm" in hint
    monkeypatch.setattr(os, "access", lambda p, mode: True)
    assert migrations.access_hint(db) == ""


def test_dot_dot_after_a_linked_directory_is_where_the_system_finds_it(tmp_path: Path) -> None:
    """``current/../data/m.db`` with ``current`` a link: the link's target's parent holds
    ``data``, as the OS resolves it (folding ``..`` as text opened another, empty file)."""
    real = tmp_path / "srv" / "releases" / "v2"
    real.mkdir(parents=True)
    (tmp_path / "srv" / "releases" / "data").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / "current").symlink_to(real)
    first = SQLiteStore(tmp_path / "srv" / "releases" / "data" / "m.db")
    first.store("bank", "Alice banks with Chase.")
    first.close()
    store = SQLiteStore(str(home / "current" / ".." / "data" / "m.db"), create=False)
    try:
        assert store.get("bank") is not None
    finally:
        store.close()
    assert not (home / "data").exists()


def test_a_link_made_under_an_open_store_leaves_its_reads_working(tmp_path: Path) -> None:
    """Checked at open: read connections opened later do not fail while writes go on."""
    store = SQLiteStore(tmp_path / "m.db", readers=4)
    try:
        store.store("car", "Drives a blue Corolla.")
        os.link(tmp_path / "m.db", tmp_path / "backup.db")
        store.store("bike", "Rides a red bike.")
        out = render_memory_context(store, "what car do I drive?")
        assert [e.key for e in out.entries] == ["car"]
    finally:
        store.close()


def test_a_bytes_path_is_a_clear_type_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'path' must be a str"):
        SQLiteStore(os.fsencode(tmp_path / "m.db"))  # type: ignore[arg-type]
