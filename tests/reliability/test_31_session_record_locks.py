"""Issue 29, thirty-first round: async session records never deadlock the host's executor.

Found by a tester running the library inside an asyncio server: with
``memory.sessions.record`` (which ``preset: pi`` sets) on a store with ``astore``, a
turn waiting for a session's lock blocked a thread of asyncio's default executor on
it, while the turn holding the lock needed that executor for its read. 7 concurrent
turns of one session (or 300 users, who share 64 lock stripes): none finished, and
every ``to_thread`` of the host hung after. Turns of one session still take turns,
across threads, tasks and loops (``docs/adapters.md``, Session records).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import InMemoryStore
from memory_inject.config import parse_agent_config
from memory_inject.sessions import arecord_session, record_session, session_key
from memory_inject.storage.markdown import MarkdownStore
from tests.reliability._host_executor import BOUND_S, run

if TYPE_CHECKING:
    from adapters import AgentDirectAdapter
else:
    from memory_inject.adapters import AgentDirectAdapter

NOW = datetime(2026, 5, 20, 12, tzinfo=UTC)


class AsyncNative(InMemoryStore):
    """A user's store whose ``astore`` is async-native (no thread), as the tester's was."""

    async def astore(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.001)  # an async driver's round trip
        return self.store(*args, **kwargs)


def make_store(kind: str, tmp_path: Path) -> Any:
    if kind == "markdown":
        return MarkdownStore(tmp_path / "md")
    if kind == "async-native":
        return AsyncNative()
    return InMemoryStore()  # store() only: the sync writer on a worker thread


def decisions(store: Any, session: str) -> set[str]:
    row = store.get(session_key(session))
    assert row is not None
    return set((row.metadata or {})["decisions"])


def turn(store: Any, session: str, i: int) -> Awaitable[str]:
    return arecord_session(
        store, session_id=session, name="n", decisions=[f"d{i} #decision"], now=NOW
    )


class TestSessionRecords:
    @pytest.mark.parametrize("kind", ["markdown", "async-native", "sync"])
    def test_concurrent_turns_of_one_session_finish_and_keep_every_decision(
        self, kind: str, tmp_path: Path
    ) -> None:
        """12 turns of one session at once: all finish, the row keeps all 12 decisions,
        and the host's ``to_thread`` still works (was: none finished, nor did it)."""
        store = make_store(kind, tmp_path)

        async def main() -> int:
            await asyncio.gather(*(turn(store, "ws-1", i) for i in range(12)))
            return await asyncio.wait_for(asyncio.to_thread(lambda: 1), 5)

        assert 1 == run(main)
        assert {f"d{i} #decision" for i in range(12)} == decisions(store, "ws-1")

    def test_many_sessions_sharing_lock_stripes_all_finish(self) -> None:
        """300 users, one turn each (64 stripes: several sessions share one): all finish."""
        store = AsyncNative()

        async def main() -> None:
            await asyncio.gather(*(turn(store, f"user-{i}", i) for i in range(300)))

        run(main)
        assert all(decisions(store, f"user-{i}") == {f"d{i} #decision"} for i in range(300))

    def test_turns_take_turns_across_threads_tasks_and_loops(self) -> None:
        """Two loops of five tasks each and two threads of four sync turns, one session:
        every decision is kept (each read-merge-write waited for the one before)."""
        store = AsyncNative()
        errors: list[BaseException] = []

        def in_loop(first: int) -> None:
            async def main() -> None:
                await asyncio.gather(*(turn(store, "s", first + i) for i in range(5)))

            try:
                run(main)
            except BaseException as exc:
                errors.append(exc)

        def in_thread(first: int) -> None:
            for i in range(4):
                record_session(
                    store, session_id="s", name="n", decisions=[f"d{first + i} #decision"]
                )

        threads = [  # daemon threads: a deadlocked one cannot keep the process in
            threading.Thread(target=in_loop, args=(0,), daemon=True),
            threading.Thread(target=in_loop, args=(5,), daemon=True),
            threading.Thread(target=in_thread, args=(10,), daemon=True),
            threading.Thread(target=in_thread, args=(14,), daemon=True),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(BOUND_S)
        assert not any(t.is_alive() for t in threads)
        assert [] == errors
        assert {f"d{i} #decision" for i in range(18)} == decisions(store, "s")

    @pytest.mark.parametrize("kind", ["markdown", "sync"])
    def test_a_record_never_waits_for_the_hosts_executor(self, kind: str, tmp_path: Path) -> None:
        """The host's own work holds every thread of its default executor: a session
        record (the read, the merge, Markdown's write) still finishes."""
        store = make_store(kind, tmp_path)
        gate = threading.Event()

        async def main() -> None:
            host = asyncio.ensure_future(asyncio.to_thread(gate.wait, BOUND_S))
            try:
                await asyncio.wait_for(turn(store, "s", 1), 10)
            finally:
                gate.set()
                await host

        run(main, workers=1)
        assert {"d1 #decision"} == decisions(store, "s")

    def test_a_turn_cancelled_while_it_holds_the_lock_lets_its_write_finish(self) -> None:
        """The turn holding a session's lock is cancelled mid-write: its write finishes and
        the lock is held until it does, so the next turn merges it (was: lost)."""
        gate = asyncio.Event()

        class Gated(InMemoryStore):
            async def astore(self, *args: Any, **kwargs: Any) -> Any:
                if "d1 #decision" in str(kwargs.get("metadata")):
                    await gate.wait()
                return self.store(*args, **kwargs)

        store = Gated()

        async def main() -> None:
            first = asyncio.ensure_future(turn(store, "s", 1))
            await asyncio.sleep(0.1)  # it holds the lock, waiting in astore
            second = asyncio.ensure_future(turn(store, "s", 2))
            await asyncio.sleep(0.05)
            first.cancel()
            await asyncio.sleep(0.05)
            assert not second.done()  # the first write has not ended: the lock is held
            gate.set()
            await second
            with pytest.raises(asyncio.CancelledError):
                await first

        run(main)
        assert {"d1 #decision", "d2 #decision"} == decisions(store, "s")

    def test_concurrent_adapter_requests_of_one_session_all_finish(self) -> None:
        """The tester's report: 8 concurrent ``arequest`` turns of one session with
        ``sessions.record`` on a store with an async ``astore``: all 8 finish."""
        agent = parse_agent_config({"agent": "rec", "memory": {"sessions": {"record": True}}})
        store = AsyncNative()
        store.store("fact", "The deploy target is prod-3.", "core")
        api = AgentDirectAdapter(store, agent, channel="wss")

        async def main() -> list[Any]:
            asks = (
                api.arequest(f"where is the deploy target? #{i}", session_id="ws-1")
                for i in range(8)
            )
            return await asyncio.gather(*asks)

        replies = run(main)
        assert 8 == len(replies)
        assert store.get(session_key("ws-1")) is not None
