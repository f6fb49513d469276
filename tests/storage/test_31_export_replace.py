"""``export FILE`` onto a full disk (thirty-first round, found by a tester).

The export opened FILE with ``"w"`` and wrote in place: a disk that filled up midway
left the previous backup cut short (402 lines of 1,200, the last one half written),
though the command line says an export is a full backup. It is now written beside FILE
and renamed over it once complete and ``fsync``-ed.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_inject.storage import SQLiteStore
from memory_inject.storage._jsonl import write_jsonl
from memory_inject.storage.records import MemoryRecord


def _records(n: int, fail_after: int | None = None) -> Iterator[MemoryRecord]:
    for i in range(n):
        if i == fail_after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        yield MemoryRecord(key=f"k{i}", content=f"note {i} " + "x" * 200)


def test_a_write_that_fails_midway_keeps_the_previous_file(tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    assert 5 == write_jsonl(dump, _records(5))
    before = dump.read_bytes()
    dump.chmod(0o600)
    with pytest.raises(OSError, match="No space left"):
        write_jsonl(dump, _records(50, fail_after=20))
    assert (before, ["dump.jsonl"]) == (dump.read_bytes(), os.listdir(tmp_path))
    assert 7 == write_jsonl(str(dump), _records(7))
    assert (7, 0o600) == (len(dump.read_text().splitlines()), dump.stat().st_mode & 0o777)
    assert ["dump.jsonl"] == os.listdir(tmp_path)


def test_a_path_that_is_not_a_regular_file_is_written_in_place(tmp_path: Path) -> None:
    """``/dev/null`` is written, never replaced by a file (this test may run as root)."""
    assert 3 == write_jsonl(os.devnull, _records(3))
    assert not Path(os.devnull).is_file()
    link = tmp_path / "latest.jsonl"
    (tmp_path / "real.jsonl").write_text("old\n")
    link.symlink_to("real.jsonl")
    assert 2 == write_jsonl(link, _records(2))
    assert (True, 2) == (link.is_symlink(), len((tmp_path / "real.jsonl").read_text().splitlines()))


_CHILD = r"""
import resource, sys
from memory_inject.cli import cli
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # the disk fills at `limit`
sys.argv = ["memory-inject", "export", sys.argv[2], "--db", sys.argv[3]]
cli()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_the_cli_export_onto_a_full_disk_keeps_the_backup(tmp_path: Path) -> None:
    db, dump = tmp_path / "m.db", tmp_path / "dump.jsonl"
    store = SQLiteStore(db)
    for i in range(40):
        store.store(f"k{i}", f"note {i} " + "x" * 300, "core")
    store.export_jsonl(dump)
    for i in range(40, 400):
        store.store(f"k{i}", f"note {i} " + "x" * 300, "core")
    store.close()
    before = dump.read_bytes()
    limit = max(len(before) + 4096, 65536)  # above the -shm file, below the export
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(limit), str(dump), str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (1, f"Error: cannot write {dump}: File too large") == (
        done.returncode,
        done.stderr.strip(),
    )
    assert before == dump.read_bytes()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
