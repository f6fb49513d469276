"""A Markdown memory written into another file (thirty-first round, found by a tester).

- A memory stored again into another file (``core`` to ``daily``, another day) was
  written one file at a time, ``MEMORY.md`` first without the block: a kill or a full
  disk in between lost the key, though every earlier ``store`` had returned.
- ``supersede`` of a core memory by a daily one marked the old one superseded before
  the new one existed: a full disk left a memory superseded by nothing, recalled by no one.
- A full disk (any ``OSError``) was a raw ``OSError`` naming no file, and the command
  line printed a traceback for it.

The files gaining a block are written first now, and a key found in two files is read
as its later update (the next write removes the other copy).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_inject.cli import cli
from memory_inject.exceptions import StorageError
from memory_inject.storage import MarkdownStore
from memory_inject.storage.markdown import CORE_FILE, DAILY_DIR
from memory_inject.storage.records import MemoryRecord

DAY = "2026-03-01T12:00:00Z"


def _full_disk_at(monkeypatch: pytest.MonkeyPatch, call: int) -> list[str]:
    """``os.replace`` fails with ENOSPC on its ``call``-th use (1-based) from now; the
    names of the files replaced before it are returned (filled in as they are)."""
    real: Callable[..., Any] = os.replace
    done: list[str] = []

    def replace(src: Any, dst: Any, **kw: Any) -> None:
        if len(done) + 1 == call:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(src, dst, **kw)
        done.append(Path(dst).name)

    monkeypatch.setattr(os, "replace", replace)
    return done


def _blocks(root: Path, key: str) -> int:
    files = [root / CORE_FILE, *(root / DAILY_DIR).glob("*.md")]
    return sum(p.read_text().count(f"## {key}\n") for p in files if p.exists())


@pytest.mark.parametrize("call", [1, 2])
@pytest.mark.parametrize(("first", "then"), [("core", "daily"), ("daily", "core")])
def test_a_full_disk_while_a_key_moves_never_loses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: int, first: str, then: str
) -> None:
    store = MarkdownStore(tmp_path)
    store.store("deploy_target", "prod-3", first, timestamp=DAY)
    _full_disk_at(monkeypatch, call)
    with pytest.raises(StorageError, match="store: No space left on device"):
        store.store("deploy_target", "prod-4", then, timestamp=DAY)
    monkeypatch.undo()
    got = MarkdownStore(tmp_path).get("deploy_target")
    assert got is not None
    # The first file written is the one gaining the block: failing it changes nothing.
    assert (got.content, got.category) == (("prod-3", first) if call == 1 else ("prod-4", then))
    store.store("other", "a note", "core")  # the next write removes a stale copy
    assert 1 == _blocks(tmp_path, "deploy_target")
    assert got == MarkdownStore(tmp_path).get("deploy_target")


@pytest.mark.parametrize("call", [1, 2])
def test_a_full_disk_during_supersede_never_leaves_it_dangling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: int
) -> None:
    store = MarkdownStore(tmp_path)
    old = store.store("deploy_target", "Production deploys go to prod-3.", "core")
    new = old.evolve(key="deploy_v2", id="deploy_v2", category="daily", content="prod-4")
    _full_disk_at(monkeypatch, call)
    with pytest.raises(StorageError, match="supersede: No space left on device"):
        store.supersede("deploy_target", new)
    monkeypatch.undo()
    reread = MarkdownStore(tmp_path)
    got, v2 = reread.get("deploy_target"), reread.get("deploy_v2")
    assert got is not None
    # Never superseded by a memory that does not exist: the new one is written first.
    assert (got.superseded_by, v2 is not None) == (None, call == 2)
    assert reread.recall("production deploys", 5)


_CHILD = r"""
import os, sys
from memory_inject.storage import MarkdownStore
store = MarkdownStore(sys.argv[1])
store.store("deploy_target", "prod-3", sys.argv[2], timestamp="2026-03-01T12:00:00Z")
real, n = os.replace, [0]
def replace(src, dst, **kw):
    n[0] += 1
    if n[0] == 2:
        os._exit(9)  # killed between the two files of the next store
    real(src, dst, **kw)
os.replace = replace
store.store("deploy_target", "prod-4", sys.argv[3], timestamp="2026-03-01T12:00:00Z")
"""


@pytest.mark.parametrize(("first", "then"), [("core", "daily"), ("daily", "core")])
def test_a_writer_killed_between_two_files_loses_nothing(
    tmp_path: Path, first: str, then: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path), first, then], timeout=120, check=False
    )
    assert 9 == done.returncode
    store = MarkdownStore(tmp_path)
    got = store.get("deploy_target")
    assert got is not None
    assert (got.content, got.category) == ("prod-4", then)  # the file gaining it came first
    assert [got] == [r for r in store.list() if r.key == "deploy_target"]
    store.store("other", "a note", "core")
    assert 1 == _blocks(tmp_path, "deploy_target")


def test_a_key_in_two_files_reads_as_its_later_update(tmp_path: Path) -> None:
    """Reads, writes and the cleanup agree on which copy is the memory."""
    store = MarkdownStore(tmp_path)
    rec = store.store("deploy_target", "prod-3", "core")
    later = rec.evolve(
        content="prod-4", category="daily", updated_at=datetime(2099, 1, 1, tzinfo=UTC)
    )
    day = MarkdownStore(tmp_path / "other")
    day.upsert(later)
    (tmp_path / DAILY_DIR).mkdir()
    [copy] = (tmp_path / "other" / DAILY_DIR).glob("*.md")
    os.replace(copy, tmp_path / DAILY_DIR / copy.name)
    assert "prod-4" == store.get("deploy_target").content  # type: ignore[union-attr]
    assert ["prod-4"] == [e.content for e in store.recall("prod", 5)]
    store.store("other", "a note", "core")
    assert (1, "prod-4") == (
        _blocks(tmp_path, "deploy_target"),
        store.get("deploy_target").content,  # type: ignore[union-attr]
    )


def test_a_folder_that_cannot_be_written_is_a_storage_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _full_disk_at(monkeypatch, 1)
    with pytest.raises(StorageError) as caught:
        MarkdownStore(tmp_path).store("k", "v")
    assert f"{tmp_path / CORE_FILE}: store: No space left on device" == str(caught.value)
    assert [".lock"] == sorted(p.name for p in tmp_path.iterdir())


def test_the_cli_prints_one_line_for_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text("agent: alice\nmemory:\n  backend: {kind: markdown, path: notes}\n")
    _full_disk_at(monkeypatch, 1)
    result = CliRunner().invoke(cli, ["add", "k", "a fact", "--agent", str(agent)])
    assert 1 == result.exit_code
    assert result.output.strip().startswith("Error: ")
    assert result.output.strip().endswith("MEMORY.md: store: No space left on device")
    assert (1, True) == (len(result.output.strip().splitlines()), "Traceback" not in result.output)


def test_superseded_by_the_record_written_with_it(tmp_path: Path) -> None:
    """The ordinary case still: one locked write, the new record first."""
    store = MarkdownStore(tmp_path)
    store.store("deploy_target", "prod-3", "core")
    new = MemoryRecord(key="deploy_v2", content="prod-4", category="daily", timestamp=DAY)
    made = store.supersede("deploy_target", new)
    assert made.id == store.get("deploy_target").superseded_by  # type: ignore[union-attr]
