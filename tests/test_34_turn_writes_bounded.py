"""A turn's own writes (autosave, session row) never hold it past its deadline.

With another connection holding the SQLite file's write lock (a bulk import), a
``MemoryLoop(autosave=True)`` turn rendered its block at once and then waited
10.3 s for the autosave (a busy timeout, a pause, a busy timeout more) whatever
``deadline_ms`` said (round 34's attack). The writes now wait within the turn's
deadline on the library's worker threads; one still running goes on alone, the
turn's ``error`` says ``autosave_deferred`` / ``session_deferred``, and the rows
land once the lock is gone.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import SQLiteStore
from memory_inject import _bounded_writes as bw
from memory_inject.config import AgentConfig, parse_agent_config
from memory_inject.sessions import session_key
from tests.test_32_lock_bounds import _held, _returned_while_held

if TYPE_CHECKING:  # the adapters ship as memory_inject.adapters from the adapters/ folder
    from adapters import LoopInjection, MemoryLoop
else:
    from memory_inject.adapters import LoopInjection, MemoryLoop

_PROMPT = "where do production deploys go? please tell me now"


def _agent(record: bool = False, deadline_ms: int = 300) -> AgentConfig:
    memory: dict[str, Any] = {"deadline_ms": deadline_ms}
    if record:
        memory["sessions"] = {"record": True}
    return parse_agent_config({"agent": "a", "memory": memory})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "m.db") as opened:
        opened.store("deploy_target", "Production deploys go to prod-3.", "core")
        yield opened


def _messages(text: str = _PROMPT) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _inject(loop: MemoryLoop, session: str, *, asynchronous: bool, text: str = _PROMPT) -> Any:
    if asynchronous:
        return asyncio.run(loop.ainject(_messages(text), sessions=[session]))
    return loop.inject(_messages(text), sessions=[session])


def _landed(store: SQLiteStore, keys: list[str]) -> list[str]:
    """The ``keys`` still missing after waiting up to 30 s for them to land."""
    missing = list(keys)
    for _ in range(300):
        missing = [k for k in missing if store.get(k) is None]
        if not missing:
            break
        threading.Event().wait(0.1)
    return missing


def _autosaved(store: SQLiteStore) -> list[str]:
    return sorted(r.key for r in store.list() if r.key.startswith("user_msg_"))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_locked_store_defers_the_autosave(
    store: SQLiteStore, tmp_path: Path, asynchronous: bool
) -> None:
    """The turn gets its block and returns while the lock is held; its error says the
    autosave was deferred; the message lands once the lock is gone."""
    loop = MemoryLoop(store, _agent(), autosave=True)
    with _held(tmp_path / "m.db"):
        result = _returned_while_held(lambda: _inject(loop, "s1", asynchronous=asynchronous))
        assert isinstance(result, LoopInjection)
        assert "prod-3" in result.block
        inj = result.injection
        assert inj is not None
        assert inj.autosaved_key is None
        assert inj.error is not None
        assert inj.error.startswith("autosave_deferred: the write of 'user_msg_"), inj.error
        assert _autosaved(store) == []
    assert len(_landed_autosaves(store, 1)) == 1


def _landed_autosaves(store: SQLiteStore, n: int) -> list[str]:
    for _ in range(300):
        got = _autosaved(store)
        if len(got) >= n:
            return got
        threading.Event().wait(0.1)
    return _autosaved(store)


def _writers() -> int:
    return sum(t.name == "memory-inject-store-writer" for t in threading.enumerate())


def test_many_turns_on_a_locked_store_hold_a_few_threads_and_all_land(
    store: SQLiteStore, tmp_path: Path
) -> None:
    """40 turns from 8 threads while the file is locked: each returns with its block and
    a deferred autosave; the store's writers (``PER_STORE`` threads at most) make its
    writes, the others wait in its line; every one of the 40 messages lands afterwards."""
    loop = MemoryLoop(store, _agent(), autosave=True)
    before = _writers()  # other tests' stores' writers, idle until IDLE_S
    threads: list[int] = []

    def turn(i: int) -> LoopInjection:
        out = loop.inject(_messages(f"{_PROMPT} ({i})"), sessions=[f"s{i}"])
        threads.append(_writers())
        return out

    with _held(tmp_path / "m.db"):

        def all_turns() -> list[LoopInjection]:
            with ThreadPoolExecutor(8) as pool:
                return list(pool.map(turn, range(40)))

        results = _returned_while_held(all_turns)
        assert isinstance(results, list) and len(results) == 40
        assert all("prod-3" in r.block for r in results)
        errors = [(r.injection.error if r.injection else None) or "" for r in results]
        assert all(e.startswith("autosave_deferred") for e in errors), errors
        assert max(threads) <= before + bw.PER_STORE
    assert len(_landed_autosaves(store, 40)) == 40


def test_deferred_messages_land_in_turn_order(store: SQLiteStore, tmp_path: Path) -> None:
    """Eight turns of one chat, one after another, while the file is locked: each returns
    at once, and their messages land in the order the turns came (a row's timestamp is
    when it was written: four writes at once had taken the lock in any order)."""
    loop = MemoryLoop(store, _agent(), autosave=True)
    with _held(tmp_path / "m.db"):
        for n in range(8):
            inj = loop.inject(_messages(f"{_PROMPT} step {n}"), sessions=["s1"]).injection
            assert inj is not None and (inj.error or "").startswith("autosave_deferred")
    _landed_autosaves(store, 8)
    rows = [r for r in store.list() if r.key.startswith("user_msg_")]
    by_time = [r.content for r in sorted(rows, key=lambda r: r.timestamp)]
    assert by_time == [f"{_PROMPT} step {n}" for n in range(8)]


def test_locked_stores_do_not_hold_a_healthy_stores_writes(
    store: SQLiteStore, tmp_path: Path
) -> None:
    """Forty other stores, each locked with an autosave deferred, leave a healthy store's
    autosave done before its turn returns (the shared worker pool, 32 threads, had been
    filled by locked stores' writes)."""
    import contextlib

    with contextlib.ExitStack() as stack:
        loops = []
        for n in range(40):
            path = tmp_path / f"locked{n}.db"
            other = stack.enter_context(SQLiteStore(path))
            other.store("deploy_target", "Production deploys go to prod-3.", "core")
            stack.enter_context(_held(path))
            loops.append(MemoryLoop(other, _agent(), autosave=True))
        with ThreadPoolExecutor(20) as pool:  # their writes all start within a second
            injected = list(pool.map(lambda lp: lp.inject(_messages(), sessions=["s1"]), loops))
        for result in injected:
            inj = result.injection
            assert inj is not None and (inj.error or "").startswith("autosave_deferred")
        healthy = MemoryLoop(store, _agent(), autosave=True)
        inj = healthy.inject(_messages(), sessions=["s1"]).injection
        assert inj is not None and inj.error is None and inj.autosaved_key is not None
        assert store.get(inj.autosaved_key) is not None


def test_an_unlocked_store_writes_before_the_turn_returns(store: SQLiteStore) -> None:
    """32 concurrent turns on a healthy store: each returns with its key, its row already
    there, nothing deferred. The deadline is long: with 300 ms a loaded machine (CI's two
    test workers) ran out of it, and a write past it is deferred by design."""
    loop = MemoryLoop(store, _agent(record=True, deadline_ms=30_000), autosave=True)

    def turn(i: int) -> tuple[str | None, str | None, bool, bool]:
        inj = loop.inject(_messages(), sessions=[f"s{i}"]).injection
        assert inj is not None
        key = inj.autosaved_key
        here = key is not None and store.get(key) is not None
        return key, inj.error, here, store.get(session_key(f"s{i}")) is not None

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(turn, range(32)))
    assert [(e, here, row) for _, e, here, row in got] == [(None, True, True)] * 32
    assert len({k for k, *_ in got}) == 32


class _FailsLater(SQLiteStore):
    """A store whose autosave write waits for ``go`` and then fails."""

    go = threading.Event()

    def store(self, key: str, content: str, *args: Any, **kwargs: Any) -> Any:
        if key.startswith("user_msg_"):
            self.go.wait(30)
            raise OSError("disk gone")
        return super().store(key, content, *args, **kwargs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_deferred_write_that_fails_is_logged_as_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, asynchronous: bool
) -> None:
    """Nobody waits for a deferred write any more: its failure is a warning on the
    ``memory_inject`` logger naming the write, once."""
    _FailsLater.go = threading.Event()
    with _FailsLater(tmp_path / "m.db") as failing:
        failing.store("deploy_target", "Production deploys go to prod-3.", "core")
        loop = MemoryLoop(failing, _agent(), autosave=True)
        with caplog.at_level(logging.WARNING, logger="memory_inject"):
            inj = _inject(loop, "s1", asynchronous=asynchronous).injection
            assert inj is not None
            assert (inj.error or "").startswith("autosave_deferred"), inj.error
            _FailsLater.go.set()
            for _ in range(300):
                if any("lost" in r.getMessage() for r in caplog.records):
                    break
                threading.Event().wait(0.1)
        lost = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
        assert len(lost) == 1, lost
        assert "the autosave of 'user_msg_" in lost[0] and "OSError: disk gone" in lost[0]


@pytest.mark.parametrize(
    "error",
    [OSError("read-only file system"), TimeoutError("timed out connecting to the service")],
    ids=["oserror", "timeouterror"],
)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_write_that_fails_in_time_is_an_error_not_a_deferral(
    tmp_path: Path, error: Exception, asynchronous: bool
) -> None:
    """A write that fails within the wait is ``autosave_failed``, as before; a
    ``TimeoutError`` of the store's own (``socket.timeout``) was taken for the wait's
    and reported as deferred."""

    class Broken(SQLiteStore):
        def store(self, key: str, content: str, *args: Any, **kwargs: Any) -> Any:
            if key.startswith("user_msg_"):
                raise error
            return super().store(key, content, *args, **kwargs)

    with Broken(tmp_path / "m.db") as broken:
        loop = MemoryLoop(broken, _agent(), autosave=True)
        inj = _inject(loop, "s1", asynchronous=asynchronous).injection
        assert inj is not None
        assert inj.error == f"autosave_failed: {type(error).__name__}: {error}"
        assert inj.autosaved_key is None


class _SlowAsync:
    """A store with a native async write that takes 0.8 s (beyond a 300 ms deadline)."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.name = "slow-async"

    def recall(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.recall(*args, **kwargs)

    async def astore(self, key: str, content: str, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.8)
        return self.inner.store(key, content, *args, **kwargs)


def test_a_deferred_async_write_its_loop_ends_before_is_logged_lost(
    store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A native async write still running when ``asyncio.run`` ends is cancelled with the
    loop: a warning says so (it had vanished without a word)."""
    loop = MemoryLoop(_SlowAsync(store), _agent(), autosave=True)
    with caplog.at_level(logging.WARNING, logger="memory_inject"):
        inj = asyncio.run(loop.ainject(_messages(), sessions=["s1"])).injection
    assert inj is not None and (inj.error or "").startswith("autosave_deferred")
    lost = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert len(lost) == 1 and "its event loop ended before it did" in lost[0], lost


def test_a_cancelled_async_turn_still_lands_its_write(store: SQLiteStore, tmp_path: Path) -> None:
    """An async turn cancelled while it waits for its write leaves the write to land."""
    loop = MemoryLoop(store, _agent(), autosave=True)

    async def cancelled() -> None:
        task = asyncio.ensure_future(loop.ainject(_messages(), sessions=["s1"]))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with _held(tmp_path / "m.db"):
        _returned_while_held(lambda: asyncio.run(cancelled()))
    assert len(_landed_autosaves(store, 1)) == 1


def test_the_wait_is_what_is_left_of_the_deadline() -> None:
    """Without a deadline 2 s; with one, what is left of it, at least the floor."""
    import time

    assert bw.write_wait(None, time.perf_counter()) == bw.WRITE_WAIT_S
    assert bw.write_wait(100, time.perf_counter() - 10) == bw.WRITE_WAIT_FLOOR_S
    assert 9.0 < bw.write_wait(10_000, time.perf_counter()) <= 10.0


class _SlowWrites(SQLiteStore):
    """A healthy store that takes 60 ms a write (a remote memory service) and may take
    several at once; with ``astore`` too, as ``MarkdownStore`` has."""

    def store(self, key: str, content: str, *args: Any, **kwargs: Any) -> Any:
        if key.startswith("user_msg_"):
            threading.Event().wait(0.06)
        return super().store(key, content, *args, **kwargs)

    async def astore(self, key: str, content: str, *args: Any, **kwargs: Any) -> Any:
        from memory_inject._workers import in_worker

        return await in_worker(self.store, key, content, *args, **kwargs)


def test_a_healthy_slow_store_is_written_beside_other_chats(tmp_path: Path) -> None:
    """Eight chats' turns at once, 60 ms a write, a 50 ms deadline (so the 0.25 s floor):
    the store's writers take several chats' writes at once and none is deferred (one
    writer per store had deferred six of eight)."""
    with _SlowWrites(tmp_path / "m.db") as slow:
        slow.store("deploy_target", "Production deploys go to prod-3.", "core")
        agent = parse_agent_config({"agent": "a", "memory": {"deadline_ms": 50}})
        loop = MemoryLoop(slow, agent, autosave=True)
        with ThreadPoolExecutor(8) as pool:
            got = list(
                pool.map(lambda i: loop.inject(_messages(), sessions=[f"s{i}"]).injection, range(8))
            )
        assert [(i.error if i else "none") for i in got] == [None] * 8


def test_an_async_turn_on_a_store_that_also_writes_sync_is_never_logged_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store with ``store`` and ``astore`` (``MarkdownStore``): a deferred async autosave
    runs on the store's writers, lands after ``asyncio.run`` ended, and no warning calls it
    lost (the task path logged it lost while its thread wrote it)."""

    class Slower(_SlowWrites):
        def store(self, key: str, content: str, *args: Any, **kwargs: Any) -> Any:
            if key.startswith("user_msg_"):
                threading.Event().wait(0.8)
            return super().store(key, content, *args, **kwargs)

    with Slower(tmp_path / "m.db") as slow:
        slow.store("deploy_target", "Production deploys go to prod-3.", "core")
        loop = MemoryLoop(slow, _agent(), autosave=True)
        with caplog.at_level(logging.WARNING, logger="memory_inject"):
            inj = asyncio.run(loop.ainject(_messages(), sessions=["s1"])).injection
            assert inj is not None and (inj.error or "").startswith("autosave_deferred")
            assert len(_landed_autosaves(slow, 1)) == 1
        assert not [r for r in caplog.records if "lost" in r.getMessage()]
