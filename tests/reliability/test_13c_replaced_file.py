"""Finding F6: a database file deleted or replaced under an open store.

SQLite keeps writing to the inode it opened, so after ``rm`` or a restore over
the path every write "succeeded" into a file nobody will open again. A write
now checks the file at the path is still the one the store holds, and refuses
with StoreMissingError (nothing written) when it is not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_inject.exceptions import StoreMissingError
from memory_inject.storage.sqlite import SQLiteStore


@pytest.mark.parametrize("how", ["deleted", "replaced", "moved away"])
def test_a_write_after_the_file_changed_under_the_store_is_refused(
    tmp_path: Path, how: str
) -> None:
    path = tmp_path / "m.db"
    other = tmp_path / "other.db"
    with SQLiteStore(other) as o:
        o.store("theirs", "the restored copy")
    with SQLiteStore(path) as store:
        store.store("before", "written while the file was there")
        if how == "deleted":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        elif how == "replaced":
            os.replace(other, path)
        else:
            shutil.move(str(path), str(tmp_path / "elsewhere.db"))
        with pytest.raises(StoreMissingError, match="deleted or replaced while the store was open"):
            store.store("after", "would have been lost")


def test_writes_go_on_while_the_file_is_the_same(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        for i in range(3):
            store.store(f"k{i}", f"fact {i}")
        os.utime(path)  # touched, not replaced
        store.store("k3", "fact 3")
    with SQLiteStore(path) as reopened:
        assert 4 == reopened.count()


@pytest.mark.parametrize("side", ["-wal", "-shm"])
def test_a_write_after_the_log_was_deleted_is_refused(tmp_path: Path, side: str) -> None:
    """A cleanup job deletes the write-ahead log (or its index) under an open store:
    writes went to the unlinked log and were lost at a crash, each having returned. Now
    the write is refused, and what was written before survives a clean close."""
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        store.store("before", "written while the log was there")
        Path(f"{path}{side}").unlink()
        with pytest.raises(StoreMissingError, match=f"its {side} file was deleted or replaced"):
            store.store("after", "would have been lost")
    with SQLiteStore(path) as reopened:
        assert reopened.get("before") is not None
        assert reopened.get("after") is None


def test_a_write_after_a_crash_with_the_log_deleted_is_never_acknowledged(tmp_path: Path) -> None:
    """The helper's case end to end: the log is deleted, the writer is killed; no write
    that returned is missing after reopening."""
    path = tmp_path / "m.db"
    child = (
        "import os, sys\n"
        "from memory_inject.storage.sqlite import SQLiteStore\n"
        "s = SQLiteStore(sys.argv[1])\n"
        "s.store('before', 'written before')\n"
        "os.remove(sys.argv[1] + '-wal'); os.remove(sys.argv[1] + '-shm')\n"
        "acked = []\n"
        "for i in range(5):\n"
        "    try:\n"
        "        s.store(f'after{i}', 'written after'); acked.append(f'after{i}')\n"
        "    except Exception:\n"
        "        pass\n"
        "print(' '.join(acked), flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", child, str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    acked = out.stdout.split()
    with SQLiteStore(path) as reopened:
        assert [] == [k for k in acked if reopened.get(k) is None]
