"""A store's slots under an async server: busy loops, hung-up clients, stopped loops.

Found by a helper who embedded the library in an asyncio server (twenty-seventh
round). Each was a healthy store leaving turns without their memory, with a reason on
the event that was not true of the turn:

* a slot freed by a recall thread was handed to the next waiting task through its
  event loop, so on a loop busy with other requests the store served about one
  render per loop iteration, and turns waited out their deadline (``recall_wait``);
* a task cancelled while its recall ran (a client that hung up) counted that healthy
  call as stuck, so two cancellations made the next user's turn ``store_busy``;
* a loop stopped (not closed) while tasks waited in line kept the slot handed to
  one of them for ever: every later render of the store was ``recall_wait``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from memory_inject import (
    MemoryInjectConfig,
    TurnMeta,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.models import MemoryEntry
from memory_inject.signals import MemoryRecall, memory_recall


class Slow:
    """A store of one memory per session whose recall takes ``pause`` seconds (or waits
    for ``gate``); it cannot stop itself, so every recall runs on a recall thread."""

    name = "slow"

    def __init__(self, slots: int, pause: float = 0.0, gate: threading.Event | None = None):
        self.recall_slots = slots
        self.pause = pause
        self.gate = gate
        self.calls = 0

    def recall(
        self, query: str, limit: int, *, session_id: str | None = None, **_: Any
    ) -> list[MemoryEntry]:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(10)
        if self.pause:
            time.sleep(self.pause)
        return [
            MemoryEntry(f"m_{session_id}", f"codeword of {session_id}", "core", None, score=0.9)
        ]


def _events() -> tuple[dict[str, MemoryRecall], Any]:
    seen: dict[str, MemoryRecall] = {}

    def on(_sender: object, *, event: MemoryRecall) -> None:
        seen[event.turn_id or ""] = event

    memory_recall.connect(on, weak=False)
    return seen, on


async def _turn(store: Any, user: str, config: MemoryInjectConfig | None = None) -> bool:
    r = await arender_memory_context(
        store,
        "what is my codeword?",
        sessions=[user],
        origin="interactive",
        turn=TurnMeta("web", "a", user),
        config=config,
    )
    return f"codeword of {user}" in r.text


class TestBusyLoop:
    def test_every_turn_gets_its_memory_while_other_requests_hold_the_loop(self) -> None:
        """200 renders on 2 slots beside 4 tasks that each hold the loop 5 ms a step: a
        freed slot goes on at once, so every turn gets its memory, no event waits."""
        store = Slow(slots=2, pause=0.001)
        seen, on = _events()

        async def other_request(stop: asyncio.Event) -> None:
            while not stop.is_set():
                t = time.perf_counter()
                while time.perf_counter() - t < 0.005:
                    pass
                await asyncio.sleep(0)

        async def main() -> list[bool]:
            stop = asyncio.Event()
            busy = [asyncio.create_task(other_request(stop)) for _ in range(4)]
            await asyncio.sleep(0.02)
            try:
                return await asyncio.gather(*(_turn(store, f"u{i}") for i in range(200)))
            finally:
                stop.set()
                await asyncio.gather(*busy)

        try:
            got = asyncio.run(main())
        finally:
            memory_recall.disconnect(on)
        assert 200 == sum(got)
        assert [] == [e.degraded for e in seen.values() if e.degraded]


class TestHungUpClients:
    def test_cancelled_renders_do_not_make_the_next_turn_store_busy(self) -> None:
        """Eight requests cancelled while their recalls run (40 ms each, 2 s deadline):
        the next user's turn gets its memory, and its event names no stuck call."""
        store = Slow(slots=2, pause=0.04)
        seen, on = _events()

        async def main() -> bool:
            tasks = [asyncio.create_task(_turn(store, f"gone{k}")) for k in range(8)]
            await asyncio.sleep(0.01)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return await _turn(store, "alice")

        try:
            got = asyncio.run(main())
        finally:
            memory_recall.disconnect(on)
        assert got
        assert seen["alice"].success
        assert () == seen["alice"].degraded

    @pytest.mark.usefixtures("hung_at_deadline")
    def test_a_cancelled_call_still_running_past_the_deadline_is_stuck(self) -> None:
        """The other side: a call whose client hung up and which then hangs past its
        turn's deadline counts against the store, and the next turn is told so."""
        gate = threading.Event()
        store = Slow(slots=1, gate=gate)
        config = MemoryInjectConfig(deadline_ms=200)
        seen, on = _events()

        async def main() -> bool:
            task = asyncio.create_task(_turn(store, "gone", config))
            await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await asyncio.sleep(0.3)  # the cancelled turn's deadline has passed
            return await _turn(store, "alice", config)

        try:
            got = asyncio.run(main())
        finally:
            gate.set()
            memory_recall.disconnect(on)
        assert not got
        assert ["store_busy"] == [d.split(":")[0] for d in seen["alice"].degraded]


class TestStoppedLoop:
    def test_a_loop_stopped_with_turns_in_line_leaks_no_slot(self) -> None:
        """Three renders in line for one slot, their loop stopped (not closed): the calls
        handed the slot still run and give it back, so later renders get memory."""
        store = Slow(slots=1, pause=0.2)
        config = MemoryInjectConfig(deadline_ms=1000)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        for k in range(3):
            asyncio.run_coroutine_threadsafe(_turn(store, f"s{k}", config), loop)
        time.sleep(0.1)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        time.sleep(0.8)  # every call handed the slot has run
        try:
            r = render_memory_context(
                store, "what is my codeword?", sessions=["bob"], config=config
            )
            assert "codeword of bob" in r.text
            assert isinstance(r.event, MemoryRecall)
            assert () == r.event.degraded
        finally:
            loop.close()
