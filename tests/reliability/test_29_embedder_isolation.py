"""One slow prompt's embedding costs no other turn its memory (twenty-ninth round).

Found by a tester: with a model slow only for some prompts, four such turns in flight
held the store's few embedding threads and its recall slots (a turn held its slot while
it waited half its deadline for the vector). A healthy turn of another session then
said ``embedder ... is still embedding 4 earlier prompts``, and under many async turns
a third of the healthy ones got no memory at all (``recall_wait``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memory_inject import (
    MemoryInjectConfig,
    MemoryRecall,
    SQLiteStore,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage._query_vectors import EMBEDDING_AT_ONCE, SLOW_AT_ONCE
from tests.storage._sqlite_backend import make_sqlite_store

SLOW_WORD = "slowword"


class SlowForSome:
    """A hashing model that hangs on prompts holding :data:`SLOW_WORD` until released."""

    name = "slow-for-some"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)
        self.gate = threading.Event()
        self.started: list[str] = []
        self.asked: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.asked.extend(texts)
        if any(SLOW_WORD in t for t in texts):
            self.started.extend(texts)
            self.gate.wait(30)
        return [list(v) for v in self.inner.embed(texts)]

    def wait_started(self, n: int) -> None:
        """Until ``n`` slow prompts are on the model (at most 10 s)."""
        for _ in range(1000):
            if len(self.started) >= n:
                return
            time.sleep(0.01)
        raise AssertionError(f"{len(self.started)} slow prompts started, not {n}")


@pytest.fixture
def model() -> Iterator[SlowForSome]:
    made = SlowForSome()
    yield made
    made.gate.set()


@pytest.fixture
def store(tmp_path: Path, model: SlowForSome) -> Iterator[SQLiteStore]:
    made = make_sqlite_store(tmp_path, embedder=model)
    for s in ("s0", "s1", "s2", "s3", "s4", "s5", "healthy"):
        made.store(f"{s}_fact", f"The {s}zeb widget setting is blue.", session_id=s)
    model.asked.clear()
    yield made
    model.gate.set()
    made.close()


def slow_prompt(i: int) -> str:
    return f"what is the s{i}zeb {SLOW_WORD} widget setting?"


HEALTHY = "what is the healthyzeb widget setting?"


def slow_turns(store: SQLiteStore, n: int, deadline_ms: int) -> list[threading.Thread]:
    """``n`` turns of slow prompts, each of its own session, started in threads."""
    config = MemoryInjectConfig(deadline_ms=deadline_ms)
    threads = [
        threading.Thread(
            target=render_memory_context,
            args=(store, slow_prompt(i)),
            kwargs={"sessions": [f"s{i}"], "config": config},
        )
        for i in range(n)
    ]
    for t in threads:
        t.start()
    return threads


class TestSlowPromptsInFlight:
    """Turns whose prompts the model is slow for, while a healthy turn runs."""

    def test_a_healthy_turn_gets_its_vector_and_its_memory(
        self, store: SQLiteStore, model: SlowForSome
    ) -> None:
        """Four slow prompts on the model leave a healthy prompt its own thread: its turn
        is hybrid and says nothing degraded."""
        threads = slow_turns(store, EMBEDDING_AT_ONCE, 4000)
        model.wait_started(EMBEDDING_AT_ONCE)
        try:
            result = render_memory_context(
                store, HEALTHY, sessions=["healthy"], config=MemoryInjectConfig(deadline_ms=2000)
            )
        finally:
            model.gate.set()
            for t in threads:
                t.join()
        assert isinstance(result.event, MemoryRecall)
        assert ("healthy_fact",) == result.event.rendered_keys
        assert () == result.event.degraded

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_turns_waiting_for_a_vector_do_not_hold_the_store(
        self, store: SQLiteStore, model: SlowForSome, mode: str
    ) -> None:
        """More slow turns than the store's recall slots, each waiting 2 s for its vector:
        a healthy turn of a 600 ms deadline gets its memory, not ``recall_wait``."""
        n = min(store.recall_slots + 2, EMBEDDING_AT_ONCE + SLOW_AT_ONCE)
        threads = slow_turns(store, n, 4000)
        model.wait_started(n)
        config = MemoryInjectConfig(deadline_ms=600)
        try:
            if mode == "sync":
                result = render_memory_context(store, HEALTHY, sessions=["healthy"], config=config)
            else:
                result = asyncio.run(
                    arender_memory_context(store, HEALTHY, sessions=["healthy"], config=config)
                )
        finally:
            model.gate.set()
            for t in threads:
                t.join()
        assert isinstance(result.event, MemoryRecall)
        assert ("healthy_fact",) == result.event.rendered_keys
        assert not any(d.startswith("recall_wait") for d in result.event.degraded)


class TestKnownSlowPrompts:
    """A prompt whose embedding already ran past a turn's wait."""

    def test_its_next_turn_does_not_wait_for_it_again(
        self, store: SQLiteStore, model: SlowForSome
    ) -> None:
        """The second turn of a slow prompt searches by keywords at once and names its own
        prompt as the reason; the model is not asked for it again."""
        config = MemoryInjectConfig(deadline_ms=200)
        first = render_memory_context(store, slow_prompt(0), sessions=["s0"], config=config)
        second = render_memory_context(store, slow_prompt(0), sessions=["s0"], config=config)
        assert isinstance(first.event, MemoryRecall)
        assert isinstance(second.event, MemoryRecall)
        assert ("s0_fact",) == first.event.rendered_keys
        assert ("s0_fact",) == second.event.rendered_keys
        assert any("gave no vector in" in d for d in first.event.degraded)
        assert any(
            "is still embedding this prompt for an earlier turn" in d for d in second.event.degraded
        )
        assert [slow_prompt(0)] == model.asked

    def test_every_thread_held_by_slow_prompts_leaves_a_true_reason_and_the_memory(
        self, store: SQLiteStore, model: SlowForSome
    ) -> None:
        """Once slow prompts hold every embedding thread, a healthy turn searches by keywords
        at once, says the model is busy with other turns' slow prompts, and its prompt is
        embedded once a thread frees, for its next turn."""
        bound = EMBEDDING_AT_ONCE + SLOW_AT_ONCE
        quick = MemoryInjectConfig(deadline_ms=60)
        for i in range(bound):
            render_memory_context(store, f"{slow_prompt(0)} {i}", sessions=["s0"], config=quick)
        busy = render_memory_context(
            store, HEALTHY, sessions=["healthy"], config=MemoryInjectConfig(deadline_ms=2000)
        )
        assert isinstance(busy.event, MemoryRecall)
        assert ("healthy_fact",) == busy.event.rendered_keys
        note = f"is busy with {bound} slow prompts of other turns"
        assert [True] == [note in d for d in busy.event.degraded]
        assert HEALTHY not in model.asked
        model.gate.set()
        for _ in range(500):
            if HEALTHY in model.asked:
                break
            time.sleep(0.01)
        later = render_memory_context(store, HEALTHY, sessions=["healthy"])
        assert isinstance(later.event, MemoryRecall)
        assert () == later.event.degraded
        assert 1 == model.asked.count(HEALTHY)
