"""Issue 13 item 9: the deadline is a bound, whatever the store does.

Each test builds a store that misbehaves in one way the deadline used to miss,
and checks the render returns by the deadline (bounded by HANG_BOUND_S, far
below the misbehaviour's own length) and reports it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memory_inject import (
    MemoryEntry,
    MemoryInjectConfig,
    _deadline,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.testing import recording

DEADLINE = MemoryInjectConfig(deadline_ms=100)
FACT = MemoryEntry("fact", "server is prod-3", "core", None, score=0.9)
#: Every misbehaviour below lasts at least this long unless released.
HANG_BOUND_S = 5.0


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


class LazyHang:
    """``recall`` returns at once, but a generator whose first item hangs."""

    name = "lazy"

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def recall(self, query: str, limit: int, **kw: Any) -> Iterator[MemoryEntry]:
        def rows() -> Iterator[MemoryEntry]:
            self.gate.wait(HANG_BOUND_S * 2)
            yield FACT

        return rows()


def test_a_lazy_batch_is_iterated_under_the_deadline(gate: threading.Event) -> None:
    t0 = time.perf_counter()
    with recording() as rec:
        result = render_memory_context(LazyHang(gate), "deploy", config=DEADLINE)  # type: ignore[arg-type]
    assert time.perf_counter() - t0 < HANG_BOUND_S
    assert ("", True) == (result.text, rec.events[0].partial)


class AsyncLazyHang(LazyHang):
    """``arecall`` answers at once, with a generator whose first item hangs (issue 25)."""

    async def arecall(self, query: str, limit: int, **kw: Any) -> Iterator[MemoryEntry]:
        return self.recall(query, limit, **kw)


def test_an_async_lazy_batch_is_iterated_off_the_loop_under_the_deadline(
    gate: threading.Event,
) -> None:
    """The generator is read on a recall thread, not on the event loop: the loop's other
    tasks keep running, and the render returns at its deadline saying so."""

    async def turn() -> tuple[Any, int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.ensure_future(ticker())
        with recording() as rec:
            hung: Any = AsyncLazyHang(gate)  # a lazy batch is not what the contract promises
            result = await arender_memory_context(hung, "deploy", config=DEADLINE)
        seen = ticks
        stop.set()
        await task
        return (result.text, rec.events[0].partial, rec.events[0].degraded[0][:9]), seen

    t0 = time.perf_counter()
    outcome, ticks = asyncio.run(turn())
    assert time.perf_counter() - t0 < HANG_BOUND_S
    assert ("", True, "deadline:") == outcome
    assert ticks > 1  # the loop was not held while the generator hung


class LazyAnswer(LazyHang):
    """``answer`` returns at once, with entries that are a generator whose first item hangs."""

    def answer(self, q: RecallQuery) -> RecallAnswer:
        return RecallAnswer(self.recall(q.query, q.limit))  # type: ignore[arg-type]


def test_an_answers_lazy_entries_are_read_under_the_deadline(gate: threading.Event) -> None:
    t0 = time.perf_counter()
    with recording() as rec:
        result = render_memory_context(LazyAnswer(gate), "deploy", config=DEADLINE)  # type: ignore[arg-type]
    assert time.perf_counter() - t0 < HANG_BOUND_S
    assert ("", True) == (result.text, rec.events[0].partial)


def test_a_lazy_batch_that_answers_renders() -> None:
    class Lazy:
        name = "lazy"

        def recall(self, query: str, limit: int, **kw: Any) -> Iterator[MemoryEntry]:
            return iter([FACT])

    result = render_memory_context(Lazy(), "deploy", config=DEADLINE)  # type: ignore[arg-type]
    assert "prod-3" in result.text


class Stubborn:
    """An ``arecall`` that swallows every cancellation for a while."""

    name = "stubborn"

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        return [FACT]

    async def arecall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        end = time.monotonic() + HANG_BOUND_S * 2
        while time.monotonic() < end:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue
        return [FACT]


def test_an_arecall_that_swallows_cancellation_does_not_hold_the_turn() -> None:
    async def turn() -> tuple[str, bool, float]:
        t0 = time.perf_counter()
        with recording() as rec:
            result = await arender_memory_context(Stubborn(), "deploy", config=DEADLINE)
        elapsed = time.perf_counter() - t0
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()  # the test's own clean-up; it keeps swallowing
        return result.text, rec.events[0].partial, elapsed

    text, partial, elapsed = asyncio.run(asyncio.wait_for(turn(), 60))
    assert elapsed < HANG_BOUND_S
    assert ("", True) == (text, partial)


class SyncHang:
    """A store with no ``arecall`` whose ``recall`` hangs until released."""

    def __init__(self, gate: threading.Event, name: str = "hung") -> None:
        self.gate = gate
        self.name = name

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        self.gate.wait(HANG_BOUND_S * 4)
        return []


class Healthy:
    name = "healthy"

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        return [FACT]


@pytest.mark.usefixtures("hung_at_deadline")
def test_hung_async_renders_of_one_store_leave_threads_for_the_others(
    gate: threading.Event,
) -> None:
    hung = SyncHang(gate)

    async def turns() -> tuple[list[bool], str, tuple[str, ...]]:
        with recording() as rec:
            await asyncio.gather(
                *(arender_memory_context(hung, "deploy", config=DEADLINE) for _ in range(40))
            )
        healthy = await arender_memory_context(Healthy(), "deploy", config=DEADLINE)
        with recording() as later:
            await arender_memory_context(hung, "deploy", config=DEADLINE)
        return [e.partial for e in rec.events], healthy.text, later.events[0].degraded

    partial, healthy, later = asyncio.run(turns())
    assert [True] * 40 == partial
    # One store never holds more than its share of the threads, so the others get theirs.
    assert "prod-3" in healthy
    assert _deadline.stuck_calls(hung) <= _deadline.MAX_RUNNING_PER_STORE
    # Once its calls are past their deadline the store is skipped at once, saying why.
    assert [True] == [d.startswith("store_busy: ") for d in later]


@pytest.mark.usefixtures("hung_at_deadline")
def test_distinct_hung_stores_cannot_grow_threads_without_bound(gate: threading.Event) -> None:
    stores = [SyncHang(gate, f"hung-{i}") for i in range(_deadline.MAX_THREADS + 20)]
    with recording() as rec:
        for store in stores:
            render_memory_context(store, "deploy", config=MemoryInjectConfig(deadline_ms=20))
    assert _deadline._THREADS.count <= _deadline.MAX_THREADS
    notes = [d for e in rec.events for d in e.degraded]
    assert any(d.startswith("recall_threads_exhausted") for d in notes)
    assert all(e.partial for e in rec.events)


CHILD = """
import time
from memory_inject import MemoryInjectConfig, render_memory_context

class Stuck:
    name = "stuck"
    def recall(self, query, limit, **kw):
        time.sleep(60)
        return []

render_memory_context(Stuck(), "deploy", config=MemoryInjectConfig(deadline_ms=50))
print("rendered")
"""


def test_a_stuck_store_does_not_keep_the_host_from_exiting() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30, check=False
    )
    assert (0, "rendered") == (proc.returncode, proc.stdout.strip())


class HungEntities(Healthy):
    """A store whose entity listing (a plan's company query) hangs."""

    name = "hung-entities"

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def known_entities(self) -> dict[str, str]:
        self.gate.wait(HANG_BOUND_S * 2)
        return {"acme": "company:acme"}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hung_entity_listing_is_under_the_deadline(gate: threading.Event, mode: str) -> None:
    from memory_inject.config import RecallPlanConfig

    cfg = MemoryInjectConfig(
        deadline_ms=100, recall_plan=RecallPlanConfig(enabled=True, preset="founder_os")
    )
    store = HungEntities(gate)
    t0 = time.perf_counter()
    with recording() as rec:
        if mode == "sync":
            render_memory_context(store, "what did acme say about billing?", config=cfg)
        else:
            asyncio.run(
                arender_memory_context(store, "what did acme say about billing?", config=cfg)
            )
    assert time.perf_counter() - t0 < HANG_BOUND_S
    assert rec.events[0].partial
