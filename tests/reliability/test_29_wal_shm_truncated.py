"""F6, truncated in place: the ``-shm`` or ``-wal`` file cut short under an open store.

A truncated ``-shm`` (SQLite's WAL index, mapped in memory) killed the process with
SIGBUS at the next render; a truncated ``-wal`` keeps its inode, so F6's check missed it:
reads failed with ``disk I/O error`` while writes kept returning, and were lost at a
crash. Both are now seen before SQLite touches the files: the render reports
``corrupt: ...`` naming the file, writes raise ``StoreCorruptError``, nothing written. A
checkpoint of another process, which empties the log legitimately, is not damage.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory_inject import render_memory_context
from memory_inject.exceptions import StoreCorruptError
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

QUERY = "where do production deploys go?"

VICTIM = """
import json, os, sys
from memory_inject import render_memory_context
from memory_inject.exceptions import StoreCorruptError
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
path, size = sys.argv[1], int(sys.argv[2])
store = SQLiteStore(path)
for i in range(30):
    store.store(f"deploy_{i}", f"Production deploys go to prod-{i}.")
os.truncate(path + "-shm", size)
with recording() as rec:
    result = render_memory_context(store, "where do production deploys go?")
try:
    store.store("after", "written after the index was cut")
    wrote = "returned"
except StoreCorruptError as exc:
    wrote = str(exc)
ev = rec.events
print(json.dumps({"events": len(ev), "success": ev[0].success, "error": ev[0].error,
                  "text": result.text, "write": wrote}), flush=True)
store.close()
"""


def run_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a SIGBUS there does not end the test run)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def wal_frames(path: Path) -> int:
    """The committed frames SQLite's index counts (the ``mxFrame`` of its header)."""
    with path.with_name(path.name + "-shm").open("rb") as f:
        return int.from_bytes(f.read(48)[16:20], sys.byteorder)


class TestTruncatedShm:
    """The WAL index cut short under an open store."""

    @pytest.mark.parametrize("size", [0, 100, 32 * 1024 - 1])
    def test_the_render_returns_and_the_process_lives(self, tmp_path: Path, size: int) -> None:
        """The render after the cut sends one failed event naming the -shm file, a write
        is refused, and the process exits normally instead of dying of SIGBUS."""
        path = tmp_path / "m.db"
        out = run_child(VICTIM, str(path), str(size))
        assert 0 == out.returncode, out.stderr[-2000:]
        seen = json.loads(out.stdout)
        assert 1 == seen["events"]
        assert seen["success"] is False
        assert seen["error"].startswith("scope None: corrupt: ")
        assert "its -shm file" in seen["error"]
        assert "" == seen["text"]
        assert "its -shm file" in seen["write"]
        assert str(path) in seen["write"]

    def test_a_clean_close_keeps_every_write(self, tmp_path: Path) -> None:
        """Closing the store after the cut rebuilds the index from the intact log: every
        acknowledged row is there at the next open, and the file is whole."""
        path = tmp_path / "m.db"
        out = run_child(VICTIM, str(path), "0")
        assert 0 == out.returncode, out.stderr[-2000:]
        with SQLiteStore(path) as reopened:
            assert 30 == reopened.count()
            assert reopened.get("after") is None
        with sqlite3.connect(path) as conn:
            assert [("ok",)] == conn.execute("PRAGMA integrity_check").fetchall()

    def test_closing_right_after_the_cut_keeps_the_process_and_the_rows(
        self, tmp_path: Path
    ) -> None:
        """A store closed with no read or write since the cut: SQLite's close reads the
        index; the process exits normally and every row is there at the next open."""
        path = tmp_path / "m.db"
        child = (
            "import os, sys\n"
            "from memory_inject.storage.sqlite import SQLiteStore\n"
            "s = SQLiteStore(sys.argv[1])\n"
            "for i in range(30):\n"
            "    s.store(f'k{i}', f'fact {i}')\n"
            "os.truncate(sys.argv[1] + '-shm', 0)\n"
            "s.close()\n"
        )
        out = run_child(child, str(path))
        assert 0 == out.returncode, out.stderr[-2000:]
        with SQLiteStore(path) as reopened:
            assert 30 == reopened.count()


class TestTruncatedWal:
    """The write-ahead log cut short (same inode) under an open store."""

    @pytest.mark.parametrize("keep", [0.0, 0.5, 0.999])
    def test_a_write_is_refused_naming_the_log(self, tmp_path: Path, keep: float) -> None:
        """A log shorter than its committed frames refuses the write, nothing written, and
        the file is whole after a clean close."""
        path = tmp_path / "m.db"
        with SQLiteStore(path) as store:
            for i in range(10):
                store.store(f"deploy_{i}", f"Production deploys go to prod-{i}.")
            need = 32 + wal_frames(path) * (24 + 4096)
            os.truncate(f"{path}-wal", int(need * keep))
            with pytest.raises(StoreCorruptError, match=r"m\.db: store: its -wal file was trunc"):
                store.store("after", "would have been lost")
        with sqlite3.connect(path) as conn:
            assert [("ok",)] == conn.execute("PRAGMA integrity_check").fetchall()
        with SQLiteStore(path) as reopened:
            assert reopened.get("after") is None

    def test_a_read_that_meets_the_cut_names_the_log(self, tmp_path: Path) -> None:
        """A read of frames the cut took fails with the true reason, not ``disk I/O
        error``: the render's one event says ``corrupt:`` and names the -wal file, and
        so does the error of a plain read."""
        path = tmp_path / "m.db"
        with SQLiteStore(path) as store:
            for i in range(10):
                store.store(f"deploy_{i}", f"Production deploys go to prod-{i}.")
            os.truncate(f"{path}-wal", 0)
            with recording() as rec:
                result = render_memory_context(store, QUERY)
            assert 1 == len(rec.events)
            event = rec.events[0]
            assert event.success is False
            assert "corrupt: " in (event.error or "")
            assert "its -wal file was truncated to 0 bytes" in (event.error or "")
            assert "" == result.text
            with pytest.raises(StoreCorruptError, match="its -wal file was truncated"):
                store.get("deploy_3")

    def test_no_acknowledged_write_is_lost_at_a_crash(self, tmp_path: Path) -> None:
        """The tester's case: the log is emptied, the writer writes on and is killed; every
        write that returned is there after reopening."""
        path = tmp_path / "m.db"
        with SQLiteStore(path) as store:
            for i in range(20):
                store.store(f"old_{i}", f"an older fact {i}")
        child = (
            "import os, sys\n"
            "from memory_inject.storage.sqlite import SQLiteStore\n"
            "s = SQLiteStore(sys.argv[1])\n"
            "s.store('before', 'a fact in the log')\n"
            "os.truncate(sys.argv[1] + '-wal', 0)\n"
            "acked = []\n"
            "for i in range(5):\n"
            "    try:\n"
            "        s.store(f'after{i}', 'written after'); acked.append(f'after{i}')\n"
            "    except Exception:\n"
            "        pass\n"
            "print(' '.join(acked), flush=True)\n"
            "os.kill(os.getpid(), 9)\n"
        )
        out = run_child(child, str(path))
        assert -9 == out.returncode, out.stderr[-2000:]
        acked = out.stdout.split()
        assert [] == acked
        with SQLiteStore(path) as reopened:
            assert 20 == len([i for i in range(20) if reopened.get(f"old_{i}") is not None])


class TestOutsideCheckpoints:
    """Another process's checkpoint empties or shortens the log: that is no damage."""

    @pytest.mark.parametrize(
        "pragmas",
        [
            ["PRAGMA wal_checkpoint(TRUNCATE)"],
            [
                "PRAGMA journal_size_limit = 0",
                "PRAGMA wal_checkpoint",
                "CREATE TABLE IF NOT EXISTS theirs (a)",
                "INSERT INTO theirs VALUES (1)",
            ],
        ],
        ids=["wal_checkpoint_truncate", "journal_size_limit"],
    )
    def test_the_store_reads_and_writes_on(self, tmp_path: Path, pragmas: list[str]) -> None:
        """After another process truncated the log by its own checkpoint, renders succeed
        and writes are kept."""
        path = tmp_path / "m.db"
        with SQLiteStore(path) as store:
            for i in range(10):
                store.store(f"deploy_{i}", f"Production deploys go to prod-{i}.")
            before = os.path.getsize(f"{path}-wal")
            code = (
                "import sqlite3, sys\n"
                "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                f"for p in {pragmas!r}:\n"
                "    c.execute(p).fetchall()\n"
                "c.close()\n"
            )
            out = run_child(code, str(path))
            assert 0 == out.returncode, out.stderr
            assert os.path.getsize(f"{path}-wal") < before
            with recording() as rec:
                render_memory_context(store, QUERY)
            assert [True] == [e.success for e in rec.events]
            store.store("after", "written after their checkpoint")
        with SQLiteStore(path) as reopened:
            assert 11 == reopened.count()

    def test_racing_checkpoints_are_never_called_damage(self, tmp_path: Path) -> None:
        """A process that writes and truncates the log in a loop while this one renders,
        writes and checks the files in a tight loop: no render fails, no write is refused
        and no check sees damage."""
        path = tmp_path / "m.db"
        with SQLiteStore(path) as store:
            store.store("deploy", "Production deploys go to prod-3.")
            code = (
                "import sqlite3, sys, time\n"
                "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=5)\n"
                "c.execute('CREATE TABLE IF NOT EXISTS theirs (a)')\n"
                "end = time.monotonic() + 1.5\n"
                "while time.monotonic() < end:\n"
                "    c.execute('INSERT INTO theirs VALUES (randomblob(5000))')\n"
                "    c.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()\n"
            )
            other = threading.Thread(target=run_child, args=(code, str(path)))
            other.start()
            failures: list[str] = []
            written = 0
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                with recording() as rec:
                    render_memory_context(store, QUERY)
                failures += [e.error or "" for e in rec.events if not e.success]
                store.store(f"k{written}", "written while they checkpoint")
                written += 1
                files = store._engine.connections._files
                failures += [str(files.damage("race", "check")) for _ in range(2000)]
                failures = [f for f in failures if f != "None"]
            other.join()
            assert [] == failures
        with SQLiteStore(path) as reopened:
            assert written + 1 == reopened.count()
