"""A child of ``fork()`` (gunicorn ``--preload``, multiprocessing's ``fork`` start method)
uses a ``SQLiteStore`` its parent opened.

Before: the child's first write hung for good on a lock a parent's thread held at the
fork, and every render waited out its deadline for "2 recalls of this store" that ran
only in the parent. Each child reports through a pipe and is killed
if it hangs (``SIGALRM``), which the test sees as a non-zero exit status.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memory_inject import render_memory_context
from memory_inject.signals import MemoryRecall
from memory_inject.storage.sqlite import SQLiteStore

QUESTION = "what is the project codename?"
CHILD_GIVES_UP_S = 30  # far past any deadline: a child still running then has hung


def start_child(work: Callable[[], Any]) -> tuple[int, int]:
    """Fork a child that runs ``work()`` and writes its JSON result to a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; coverage is not collected there
        os.close(read)
        signal.alarm(CHILD_GIVES_UP_S)  # SIGALRM's default ends a child that hangs
        try:
            out = json.dumps({"ok": work()})
        except BaseException as exc:
            out = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    return pid, read


def child_result(pid: int, read: int) -> Any:
    """The child's result, or a failure naming how it ended."""
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert 0 == status, f"the child hung or died (wait status {status})"
    answer = json.loads(b"".join(chunks) or b"{}")
    assert "error" not in answer, answer.get("error")
    return answer["ok"]


def in_child(work: Callable[[], Any]) -> Any:
    """``work()`` run in a forked child; its JSON result."""
    return child_result(*start_child(work))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "m.db")
    s.store("codename", "The project codename is zebra.", "core", session_id="s1")
    for _ in range(3):
        assert "zebra" in render_memory_context(s, QUESTION, sessions=["s1"]).text
    yield s
    s.close()


@contextmanager
def busy(store: SQLiteStore, what: str, threads: int = 4) -> Iterator[None]:
    """Parent threads rendering or writing the whole time (so some are mid-call at fork)."""
    stop = threading.Event()

    def run(w: int) -> None:
        n = 0
        while not stop.is_set():
            if what == "render":
                render_memory_context(store, QUESTION, sessions=["s1"])
            else:
                store.store(f"p{w}_{n}", f"parent note {n}", "core", session_id="sp")
                n += 1

    pool = [threading.Thread(target=run, args=(w,)) for w in range(threads)]
    for t in pool:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in pool:
            t.join()


def child_turns(store: SQLiteStore) -> Callable[[], Any]:
    def work() -> Any:
        out = []
        for _ in range(3):
            r = render_memory_context(store, QUESTION, sessions=["s1"])
            event = r.event
            assert isinstance(event, MemoryRecall)
            out.append([list(event.rendered_keys), list(event.degraded)])
        store.store("child_note", "written by the child", "core", session_id="s1")
        return out

    return work


def test_a_child_writes_though_a_parent_thread_held_the_writer_at_the_fork(
    store: SQLiteStore,
) -> None:
    """The parent's writer lock is held at the fork (deterministically: by this thread)."""
    held = store._engine.connections._lock
    with held:
        turns = in_child(child_turns(store))
    assert 3 * [[["codename"], []]] == turns
    row = store.get("child_note")  # durable, and the parent sees it
    assert row is not None and "written by the child" == row.content


@pytest.mark.parametrize("what", ["render", "write"])
def test_a_child_of_a_busy_parent_gets_its_memory_and_writes(store: SQLiteStore, what: str) -> None:
    """Forked while the parent's threads render (their recalls in flight) or write."""
    with busy(store, what):
        threading.Event().wait(0.3)
        child = start_child(child_turns(store))
    # The parent's writers stopped: a writer looping in the parent may hold the file's
    # lock past any busy timeout, which is SQLite's fairness, not the fork's.
    turns = child_result(*child)
    assert 3 * [[["codename"], []]] == turns
    assert store.get("child_note") is not None


def test_a_store_closed_before_the_fork_stays_closed_in_the_child(store: SQLiteStore) -> None:
    store.close()

    def work() -> Any:
        r = render_memory_context(store, QUESTION, sessions=["s1"])
        return [r.event.success, r.text]

    success, text = in_child(work)
    assert (False, "") == (success, text)


def test_the_parent_keeps_its_own_engine(store: SQLiteStore) -> None:
    """A fork changes nothing in the process that forked."""
    before = store._engine
    in_child(child_turns(store))
    assert store._engine is before
    assert "zebra" in render_memory_context(store, QUESTION, sessions=["s1"]).text
