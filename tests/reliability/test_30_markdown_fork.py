"""A child of ``fork()`` (gunicorn ``--preload``, multiprocessing's ``fork`` start method)
uses a ``MarkdownStore`` its parent opened (thirtieth round).

Before: a fork while a parent's thread was in a call of the store (a read or a write)
copied that thread's hold on the folder's lock into the child, where no thread would
ever release it: the child's first call hung for good. A fork during a write also
copied the open ``.lock`` file, and with it the advisory lock on it: the lock stayed
held until the child ended, so the parent's next write (and every other child's) hung
with it. A hung child's rows were lost. Now a fork waits for the calls of the store in
flight in the process, as a fork waits for a SQLite store's writes; each child and the
parent keep every row they write.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryRecall, render_memory_context
from memory_inject.storage import markdown
from memory_inject.storage.markdown import MarkdownStore
from tests.reliability.test_29_fork import child_result, in_child, start_child

QUESTION = "what is the project codename?"
ROWS = 5  # written by each child


@pytest.fixture
def store(tmp_path: Path) -> MarkdownStore:
    s = MarkdownStore(tmp_path / "memory")
    s.store("codename", "The project codename is zebra.", "core", session_id="s1")
    assert "zebra" in render_memory_context(s, QUESTION, sessions=["s1"]).text
    return s


def _child_turns(store: MarkdownStore, i: int) -> Any:
    """A child's work: a turn, its rows written, and what it reads back."""
    result = render_memory_context(store, QUESTION, sessions=["s1"])
    assert isinstance(result.event, MemoryRecall)
    for n in range(ROWS):
        store.store(f"c{i}_{n}", f"child {i} note {n}", "daily", session_id="s1")
    mine = sorted(r.key for r in store.list() if r.key.startswith(f"c{i}_"))
    return [result.event.success, "zebra" in result.text, mine]


def _expected(i: int) -> list[Any]:
    return [True, True, [f"c{i}_{n}" for n in range(ROWS)]]


@contextmanager
def busy(store: MarkdownStore, what: str, threads: int = 3) -> Iterator[list[str]]:
    """Parent threads reading or writing the whole time (so some are mid-call at a fork).

    Yields the keys the parent's threads wrote (complete once the block ends)."""
    stop = threading.Event()
    written: list[str] = []

    def run(w: int) -> None:
        n = 0
        while not stop.is_set():
            if what == "read":
                store.recall("codename", 3, session_id="s1")
            else:
                store.store(f"p{w}_{n}", f"parent {w} note {n}", "core")
                written.append(f"p{w}_{n}")
                n += 1

    pool = [threading.Thread(target=run, args=(w,)) for w in range(threads)]
    for t in pool:
        t.start()
    try:
        yield written
    finally:
        stop.set()
        for t in pool:
            t.join()


@contextmanager
def mid_write(store: MarkdownStore, for_s: float = 0.3) -> Iterator[None]:
    """A parent thread inside a write (both locks held) for ``for_s`` seconds from now."""
    inside, release = threading.Event(), threading.Event()

    def write() -> None:
        with store._writing():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=write)
    thread.start()
    assert inside.wait(10)
    timer = threading.Timer(for_s, release.set)
    timer.start()
    try:
        yield
    finally:
        timer.join()
        thread.join()


def test_a_child_forked_during_a_parent_write_writes_and_so_does_the_parent(
    store: MarkdownStore,
) -> None:
    """Deterministic: a parent thread is inside a write at the fork."""
    with mid_write(store):
        child = start_child(partial(_child_turns, store, 0))
    assert _expected(0) == child_result(*child)
    store.store("after", "the parent writes after the fork", "core")  # hung on the child
    keys = {r.key for r in store.list()}
    assert {"codename", "after", *(f"c0_{n}" for n in range(ROWS))} == keys


def test_a_store_opened_in_a_child_while_a_parent_thread_opened_one(
    store: MarkdownStore, tmp_path: Path
) -> None:
    """A parent thread is opening a store at the fork (the folders' registry's lock)."""
    inside, release = threading.Event(), threading.Event()

    def opening() -> None:
        with markdown._LOCKS_GUARD:
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=opening)
    thread.start()
    assert inside.wait(10)
    try:

        def work() -> Any:
            other = MarkdownStore(tmp_path / "other")
            other.store("k", "opened in the child")
            return [r.key for r in other.list()]

        assert ["k"] == in_child(work)
    finally:
        release.set()
        thread.join()


@pytest.mark.parametrize("what", ["read", "write"])
def test_children_and_a_busy_parent_keep_every_row(store: MarkdownStore, what: str) -> None:
    """Forked while the parent's threads read or write; the parent writes meanwhile too."""
    with busy(store, what) as written:
        children = []
        for i in range(3):
            threading.Event().wait(0.05)
            children.append(start_child(partial(_child_turns, store, i)))
        for n in range(ROWS):
            store.store(f"parent{n}", f"the parent's note {n}", "core")
    answers = [child_result(pid, read) for pid, read in children]
    assert [_expected(i) for i in range(3)] == answers
    keys = {r.key for r in store.list()}
    want = {"codename", *written, *(f"parent{n}" for n in range(ROWS))}
    want |= {f"c{i}_{n}" for i in range(3) for n in range(ROWS)}
    assert set() == want - keys


def _process_work(store: MarkdownStore, i: int) -> None:
    assert _expected(i) == _child_turns(store, i)


def test_multiprocessing_fork_children_of_a_busy_parent(store: MarkdownStore) -> None:
    """multiprocessing's ``fork`` start method, while the parent's threads write."""
    fork: Callable[..., Any] = multiprocessing.get_context("fork").Process
    with busy(store, "write") as written:
        procs = [fork(target=_process_work, args=(store, i)) for i in range(3)]
        for p in procs:
            threading.Event().wait(0.05)
            p.start()
        for p in procs:
            p.join(20)
        hung = [p.pid for p in procs if p.exitcode is None]
        for p in procs:  # before the parent's writers stop: a hung child blocked them
            if p.exitcode is None:
                p.kill()
                p.join()
    assert [] == hung, "children hung"
    assert [0, 0, 0] == [p.exitcode for p in procs]
    keys = {r.key for r in store.list()}
    want = {"codename", *written, *(f"c{i}_{n}" for i in range(3) for n in range(ROWS))}
    assert set() == want - keys
