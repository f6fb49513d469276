"""The turn's session row (``sessions.record``) never holds the turn past its deadline.

Round 34 bounded the autosave; the session row stayed on the turn's thread and waited
out a SQLite file another connection held in ``BEGIN IMMEDIATE`` (two busy timeouts and
a pause: 10.3 s) whatever ``deadline_ms`` said. It is now made by the store's writers,
a session's merges one at a time in turn order: the turn returns with its block, its
``error`` says ``session_deferred``, and the row lands with every turn's decision once
the lock is gone.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import SQLiteStore
from memory_inject.config import AgentConfig, parse_agent_config
from memory_inject.sessions import session_key
from tests.test_32_lock_bounds import _held, _returned_while_held

if TYPE_CHECKING:  # the adapters ship as memory_inject.adapters from the adapters/ folder
    from adapters import LoopInjection, MemoryLoop
else:
    from memory_inject.adapters import LoopInjection, MemoryLoop

_PROMPT = "where do production deploys go? #decision ship on {n}"


def _agent(deadline_ms: int = 300) -> AgentConfig:
    """An agent recording its sessions, whose turns have ``deadline_ms``."""
    return parse_agent_config(
        {"agent": "a", "memory": {"deadline_ms": deadline_ms, "sessions": {"record": True}}}
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "m.db") as opened:
        opened.store("deploy_target", "Production deploys go to prod-3.", "core")
        yield opened


def _messages(n: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": _PROMPT.format(n=n)}]


def _inject(loop: MemoryLoop, n: int, *, asynchronous: bool, session: str = "s1") -> Any:
    if asynchronous:
        return asyncio.run(loop.ainject(_messages(n), sessions=[session]))
    return loop.inject(_messages(n), sessions=[session])


def _decisions(store: SQLiteStore, session: str, n: int) -> list[str]:
    """The row's decisions once it holds ``n`` of them (waiting up to 30 s)."""
    got: list[str] = []
    for _ in range(300):
        row = store.get(session_key(session))
        got = list((row.metadata or {}).get("decisions", ())) if row is not None else []
        if len(got) >= n:
            break
        threading.Event().wait(0.1)
    return got


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_locked_store_defers_the_session_row(
    store: SQLiteStore, tmp_path: Path, asynchronous: bool
) -> None:
    """The turn gets its block and returns while the lock is held; its error says the
    session row was deferred; the row lands once the lock is gone."""
    loop = MemoryLoop(store, _agent())
    with _held(tmp_path / "m.db"):
        result = _returned_while_held(lambda: _inject(loop, 0, asynchronous=asynchronous))
        assert isinstance(result, LoopInjection)
        assert "prod-3" in result.block
        inj = result.injection
        assert inj is not None
        assert inj.session_key is None
        assert (inj.error or "").startswith("session_deferred: the session row's write was")
        assert store.get(session_key("s1")) is None
        released = datetime.now(UTC)
    assert _decisions(store, "s1", 1) == [_PROMPT.format(n=0)]
    row = store.get(session_key("s1"))
    assert row is not None and row.metadata is not None
    # the row says when the turn was, not when its deferred write landed
    assert datetime.fromisoformat(row.metadata["ended_at"]) < released


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_deferred_turns_of_one_session_keep_every_decision_in_order(
    store: SQLiteStore, tmp_path: Path, asynchronous: bool
) -> None:
    """Six turns of one session, one after another, while the file is locked: each
    returns at once, and the row keeps all six decisions in turn order (a merge made
    beside another would lose one)."""
    loop = MemoryLoop(store, _agent())
    with _held(tmp_path / "m.db"):
        for n in range(6):
            result = _returned_while_held(lambda n=n: _inject(loop, n, asynchronous=asynchronous))
            assert isinstance(result, LoopInjection) and result.injection is not None
            assert (result.injection.error or "").startswith("session_deferred")
    assert _decisions(store, "s1", 6) == [_PROMPT.format(n=n) for n in range(6)]


def test_sync_and_async_turns_of_one_session_share_one_line(store: SQLiteStore) -> None:
    """16 turns of one session at once, half from threads and half from event loops: all
    finish in time on a healthy store, and the row keeps all 16 decisions (of 20 at most)."""
    loop = MemoryLoop(store, _agent(deadline_ms=30_000))

    def turn(n: int) -> str | None:
        result: LoopInjection = _inject(loop, n, asynchronous=n % 2 == 1)
        assert result.injection is not None
        return result.injection.error

    with ThreadPoolExecutor(8) as pool:
        errors = list(pool.map(turn, range(16)))
    assert errors == [None] * 16
    assert sorted(_decisions(store, "s1", 16)) == sorted(_PROMPT.format(n=n) for n in range(16))


def test_a_write_that_fails_in_time_is_still_session_failed(tmp_path: Path) -> None:
    """A store whose write raises at once reports ``session_failed``, not a deferral."""

    class Broken(SQLiteStore):
        def store(self, key: str, content: str, *args: Any, **kwargs: Any) -> Any:
            if key.startswith("session:"):
                raise OSError("disk gone")
            return super().store(key, content, *args, **kwargs)

    with Broken(tmp_path / "b.db") as broken:
        inj = (
            MemoryLoop(broken, _agent(deadline_ms=30_000))
            .inject(_messages(0), sessions=["s1"])
            .injection
        )
    assert inj is not None
    assert (inj.error or "").startswith("session_failed: "), inj.error
    assert "disk gone" in (inj.error or "")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_after_a_deferred_autosave_the_row_waits_only_what_is_left(
    store: SQLiteStore, tmp_path: Path, asynchronous: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The floor (``WRITE_WAIT_FLOOR_S``) is taken once per turn: after the autosave was
    deferred, the session row waits what is left of the deadline, not another floor (a
    1 s turn on a locked file took 1.27 s: round 36)."""
    from memory_inject import _bounded_writes as bw

    _autosave = importlib.import_module("memory_inject.adapters._autosave")

    waits: dict[str, float] = {}
    sync_write, async_write = _autosave.write_in_time, _autosave.awrite_in_time

    def spy(store: object, fn: Any, wait: float, what: str, order: object = None) -> Any:
        waits[what.split()[1]] = wait  # "the autosave of ..." / "the session row of ..."
        return sync_write(store, fn, wait, what, order)

    async def aspy(store: object, fn: Any, wait: float, what: str, order: object = None) -> Any:
        waits[what.split()[1]] = wait
        return await async_write(store, fn, wait, what, order)

    monkeypatch.setattr(_autosave, "write_in_time", spy)
    monkeypatch.setattr(_autosave, "awrite_in_time", aspy)
    loop = MemoryLoop(store, _agent(), autosave=True)
    with _held(tmp_path / "m.db"):
        result = _returned_while_held(lambda: _inject(loop, 0, asynchronous=asynchronous))
        assert isinstance(result, LoopInjection) and result.injection is not None
        error = result.injection.error or ""
        assert error.startswith("autosave_deferred") and "session_deferred" in error
    assert waits["autosave"] >= bw.WRITE_WAIT_FLOOR_S
    assert waits["session"] < bw.WRITE_WAIT_FLOOR_S


def test_two_store_objects_on_one_file_take_turns(tmp_path: Path) -> None:
    """An app that opens a store per request: 12 turns of one session at once through two
    objects on one file kept 6 of 12 decisions (the lock was the object's, round 36)."""
    from memory_inject.sessions import record_session

    path = tmp_path / "two.db"
    with SQLiteStore(path) as one, SQLiteStore(path) as two:
        barrier = threading.Barrier(12)

        def turn(i: int) -> None:
            barrier.wait()
            record_session((one, two)[i % 2], session_id="s1", name="work",
                           decisions=[f"decision {i} #decision"])  # fmt: skip

        with ThreadPoolExecutor(12) as pool:
            list(pool.map(turn, range(12)))
        row = one.get(session_key("s1"))
    assert row is not None and row.metadata is not None
    assert sorted(row.metadata["decisions"]) == sorted(f"decision {i} #decision" for i in range(12))
