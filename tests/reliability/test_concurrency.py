"""Concurrency and crashes on one SQLite file (WAL): no lost writes, no lock errors, no damage.

Writers in threads and in other processes print or record every key whose
write *returned*; afterwards each of those keys must be in the file with the
content written last. A writer killed with SIGKILL in the middle of a bulk
import must leave a file that passes ``PRAGMA integrity_check`` and holds every
acknowledged row, and no batch may be half there.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryRecall, render_memory_context
from memory_inject.config import MemoryInjectConfig
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")

WRITER = r"""
import sys
from memory_inject.storage.sqlite import SQLiteStore

path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SQLiteStore(path) as store:
    for i in range(n):
        key = f"{name}-{i % (n // 2)}"  # every key is written twice: insert, then update
        try:
            store.store(key, f"deploy server by {name} write {i}", session_id=name)
        except Exception as exc:
            print("ERR", key, type(exc).__name__, exc, flush=True)
            continue
        print("ACK", key, i, flush=True)
"""

BULK = r"""
import io, json, sys
from memory_inject.storage.sqlite import SQLiteStore

def ack(line):  # one write per line: a kill never leaves half a line (PYTHONUNBUFFERED)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

path, batches, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with SQLiteStore(path) as store:
    for b in range(batches):
        lines = "".join(json.dumps({
            "key": f"bulk-{b}-{i}", "content": f"imported deploy memory {b} {i} " + "z" * 120,
            "session_id": f"s{i % 50}", "tags": ["import", f"batch{b}"],
        }) + "\n" for i in range(size))
        store.import_jsonl(io.StringIO(lines), batch_size=size)
        ack(f"BATCH {b}")
        single = f"single-{b}"
        store.store(single, f"one deploy write after batch {b}")
        ack(f"SINGLE {single}")
"""


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rest_of(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[list[str], str]:
    """Read a child's output to the end (after any readline), then reap it."""
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()  # not communicate(): it would skip what readline buffered
    err = proc.stderr.read()
    proc.wait(timeout=timeout)
    proc.stdout.close()
    proc.stderr.close()
    return out.splitlines(), err


def finish(proc: subprocess.Popen[str]) -> list[str]:
    """Wait for a child that must succeed; its stdout lines."""
    lines, err = rest_of(proc)
    assert 0 == proc.returncode, err
    return lines


def integrity(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def contents(path: Path) -> dict[str, str]:
    with SQLiteStore(path) as store:
        return {r.key: r.content for r in store.list()}


class Renderer:
    """One thread per store rendering until stopped; every event and failure is kept."""

    def __init__(self, stores: list[SQLiteStore], config: MemoryInjectConfig | None = None) -> None:
        self.stores = stores
        self.config = config
        self.events: list[MemoryRecall] = []
        self.failures: list[BaseException] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(s,)) for s in stores]
        self.lock = threading.Lock()

    def _run(self, store: SQLiteStore) -> None:
        rng = random.Random(id(store))
        while not self.stop.is_set():
            query = rng.choice(["deploy server", "imported deploy memory", "", "budget"])
            try:
                out = render_memory_context(
                    store, query, sessions=[f"s{rng.randrange(50)}"], config=self.config
                )
            except BaseException as exc:  # a render must never raise: keep it for the assert
                with self.lock:
                    self.failures.append(exc)
                return
            assert isinstance(out.event, MemoryRecall)  # no policy or origin: every turn injects
            with self.lock:
                self.events.append(out.event)

    def __enter__(self) -> Renderer:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)

    def outcome(self) -> tuple[list[BaseException], list[str], list[bool]]:
        return (
            self.failures,
            [e.error for e in self.events if e.error],
            sorted({e.partial for e in self.events}),
        )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "shared" / "memory.db"


@contextlib.contextmanager
def stores(path: Path, n: int) -> Iterator[list[SQLiteStore]]:
    opened = [SQLiteStore(path) for _ in range(n)]
    try:
        yield opened
    finally:
        for s in opened:
            s.close()


class TestThreads:
    def test_threads_writing_and_rendering_lose_nothing(self, db: Path) -> None:
        """8 writer threads (4 on one shared store, 4 with their own) and 4 renderers."""
        acked: dict[str, str] = {}
        errors: list[BaseException] = []
        lock = threading.Lock()

        def write(store: SQLiteStore, name: str) -> None:
            for i in range(60):
                key, content = f"{name}-{i % 30}", f"deploy server by {name} write {i}"
                try:
                    store.store(key, content, session_id=f"s{i % 30}")  # one scope per key
                except BaseException as exc:
                    with lock:
                        errors.append(exc)
                    continue
                with lock:
                    acked[key] = content

        with stores(db, 5) as (shared, *own), stores(db, 3) as readers:
            writers = [
                threading.Thread(target=write, args=(shared, f"shared{t}")) for t in range(4)
            ]
            writers += [
                threading.Thread(target=write, args=(s, f"own{t}")) for t, s in enumerate(own)
            ]
            with Renderer([shared, *readers]) as renderer:
                for t in writers:
                    t.start()
                for t in writers:
                    t.join(timeout=120)
            assert ([], [], [False]) == renderer.outcome()
            assert len(renderer.events) > 20
        assert [] == errors
        assert acked == contents(db)
        assert "ok" == integrity(db)


class TestProcesses:
    def test_processes_and_threads_writing_at_once_lose_nothing(self, db: Path) -> None:
        """3 writer processes and 2 writer threads, all racing to create the file first."""
        procs = [spawn(WRITER, db, f"proc{p}", 300) for p in range(3)]
        acked: dict[str, str] = {}
        errors: list[BaseException] = []

        def write(name: str) -> None:
            try:
                with SQLiteStore(db) as store:
                    for i in range(300):
                        key = f"{name}-{i % 150}"
                        content = f"deploy server by {name} write {i}"
                        store.store(key, content, session_id=name)
                        acked[key] = content
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(f"thread{t}",)) for t in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        lock_errors = []
        for p, proc in enumerate(procs):
            for line in finish(proc):
                kind, key, *rest = line.split(" ", 3)
                if kind == "ACK":
                    acked[key] = f"deploy server by proc{p} write {rest[0]}"
                else:
                    lock_errors.append(line)
        assert ([], []) == (errors, lock_errors)
        assert 5 * 150 == len(acked)
        assert acked == contents(db)
        assert "ok" == integrity(db)

    def test_renders_keep_working_during_a_bulk_import(self, db: Path) -> None:
        """Renders from 3 threads while another process imports 24,000 rows: all succeed.

        The renders' deadline is 30 s, not the default 2 s: a render the import blocked
        would reach it, one slowed by a machine busy with other jobs (CI's, the
        importer's) would not, and the test is about the first (it failed twice on a
        loaded machine with a render cut at 2 s, no lock involved)."""
        with SQLiteStore(db) as seed:
            seed.store("seed", "deploy server seed row", session_id="s1")
        proc = spawn(BULK, db, 24, 1000)
        patient = MemoryInjectConfig(deadline_ms=30_000)
        with stores(db, 3) as readers, Renderer(readers, patient) as renderer:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # renders overlap the import from its first batch on
            lines = [first.strip(), *finish(proc)]
        assert ("BATCH 0", 48) == (lines[0], len(lines))
        assert ([], [], [False]) == renderer.outcome()
        assert len(renderer.events) > 30
        assert 1 + 24 * 1000 + 24 == len(contents(db))
        assert "ok" == integrity(db)


def kill_mid_import(db: Path, acks_before_kill: int, extra_delay: float) -> list[str]:
    """Start a bulk import, SIGKILL it after that many acknowledgements; the lines it printed."""
    proc = spawn(BULK, db, 400, 250)
    assert proc.stdout is not None
    seen: list[str] = []
    while len(seen) < acks_before_kill:
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        seen.append(line.strip())
    time.sleep(extra_delay)
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = rest_of(proc)
    assert -signal.SIGKILL == proc.returncode
    return seen + rest


class TestCrash:
    @pytest.mark.parametrize("run", range(6))
    def test_sigkill_mid_bulk_import_keeps_every_acknowledged_row(self, db: Path, run: int) -> None:
        """A writer killed mid-import: integrity ok, every acknowledged row there, no torn batch."""
        rng = random.Random(run)
        lines = kill_mid_import(db, rng.randint(2, 14), rng.random() * 0.05)
        # Only whole lines acknowledge: a kill may cut the last one short.
        acked_batches = [int(m[1]) for m in map(re.compile(r"BATCH (\d+)").fullmatch, lines) if m]
        acked_singles = [
            m[1] for m in map(re.compile(r"SINGLE (single-\d+)").fullmatch, lines) if m
        ]
        assert "ok" == integrity(db)
        found = contents(db)
        per_batch: dict[int, int] = {}
        for key in found:
            if key.startswith("bulk-"):
                b = int(key.split("-")[1])
                per_batch[b] = per_batch.get(b, 0) + 1
        assert acked_batches and dict.fromkeys(acked_batches, 250) == {
            b: per_batch.get(b, 0) for b in acked_batches
        }
        assert set(per_batch.values()) == {250}  # the batch in flight is all there or absent
        assert [] == [k for k in acked_singles if k not in found]

    def test_reopened_after_a_kill_the_store_keeps_working(self, db: Path) -> None:
        """After a SIGKILL the next process opens, recalls and writes as usual."""
        kill_mid_import(db, 3, 0.01)
        with SQLiteStore(db) as store:
            with recording() as rec:
                out = render_memory_context(store, "imported deploy memory", sessions=["s3"])
            store.store("after-crash", "written after the crash")
            event: Any = rec.events[0]
            after: Any = store.get("after-crash")
            assert (True, True, "written after the crash") == (
                event.success,
                bool(out.entries),
                after.content,
            )
