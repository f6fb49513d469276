"""A render embeds its prompt once, not once per session scope (twenty-eighth round).

Found by a helper: a channel turn asks the store once per scope with the same prompt,
and each call embedded it again, one after another: with a 1.2 s model two scopes ran
past the 2 s deadline and the second scope's memory was lost. Both stores keep the
last prompts' vectors (a vector depends on the text alone); a failure is not kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryInjectConfig, MemoryRecall, render_memory_context
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage._query_vectors import EMBEDDING_AT_ONCE, SLOW_AT_ONCE
from memory_inject.storage.fusion import Fusion
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import make_sqlite_store


class Counting:
    """A hashing embedder that counts the texts it is asked for, and can fail."""

    name = "counting"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)
        self.asked: list[str] = []
        self.failing = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.asked.extend(texts)
        if self.failing:
            raise RuntimeError("model offline")
        return [list(v) for v in self.inner.embed(texts)]


PROMPT = "what is my dog called?"


@pytest.fixture(params=["sqlite", "postgres"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def factory(**kwargs: Any) -> Any:
        store: Any
        if request.param == "sqlite":
            store = make_sqlite_store(tmp_path, **kwargs)
        else:
            store = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"), **kwargs)
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()


def test_three_scopes_embed_the_prompt_once(store_factory: Callable[..., Any]) -> None:
    embedder = Counting()
    store = store_factory(embedder=embedder)
    store.store("dog", "My dog is called Biscuit.", session_id="a")
    store.store("cat", "The office cat is called Miso.")
    embedder.asked.clear()
    result = render_memory_context(store, PROMPT, sessions=["a", "b", None])
    assert "dog" in [e.key for e in result.entries]
    assert [PROMPT] == embedder.asked
    render_memory_context(store, PROMPT, sessions=["a", None])
    assert [PROMPT] == embedder.asked  # asked again: not embedded again


def test_a_failure_is_not_kept(store_factory: Callable[..., Any]) -> None:
    embedder = Counting()
    store = store_factory(embedder=embedder)
    store.store("dog", "My dog is called Biscuit.")
    embedder.asked.clear()
    embedder.failing = True
    failed = render_memory_context(store, PROMPT)
    assert isinstance(failed.event, MemoryRecall)
    assert any("embedder_failed" in d for d in failed.event.degraded)
    embedder.failing = False
    healed = render_memory_context(store, PROMPT)
    assert isinstance(healed.event, MemoryRecall)
    assert not any("embedder_failed" in d for d in healed.event.degraded)
    assert [PROMPT, PROMPT] == embedder.asked


class ZeroForUnknown(Counting):
    """A static model's way: a vector of zeros for a text of words it does not know."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = super().embed(texts)
        return [[0.0] * 64 if "Xq7" in t else v for t, v in zip(texts, vectors, strict=True)]


def test_a_prompt_embedded_to_zeros_is_searched_by_keywords_and_says_so(
    store_factory: Callable[..., Any],
) -> None:
    """A vector of zeros is near nothing: a vector-only recall found nothing and said
    nothing (found by a helper). It is a failed embedding now: keywords, and the reason."""
    store = store_factory(embedder=ZeroForUnknown(), fusion=Fusion(search_mode="embedding"))
    store.store("wifi", "Xq7 wifi password is hunter22")
    result = render_memory_context(store, "Xq7 wifi password")
    assert isinstance(result.event, MemoryRecall)
    assert ["wifi"] == [e.key for e in result.entries]
    assert any("gave the prompt a vector of zeros" in d for d in result.event.degraded)


class Stuck(Counting):
    """Hangs on every text until ``gate`` is set, once ``armed``."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.gate = threading.Event()
        self.started: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.armed:
            self.started.extend(texts)
            self.gate.wait(30)
        return super().embed(texts)


SHORT = MemoryInjectConfig(deadline_ms=300)


def settled(store: Any) -> Any:
    """The first render of :data:`PROMPT` that nothing degraded (within about 5 s)."""
    degraded: tuple[str, ...] = ()
    for _ in range(100):
        later = render_memory_context(store, PROMPT, config=SHORT)
        assert isinstance(later.event, MemoryRecall)
        degraded = later.event.degraded
        if not degraded:
            return later
        time.sleep(0.05)
    raise AssertionError(f"still degraded: {degraded}")


def test_a_slow_model_leaves_the_keyword_block_and_its_vector_for_the_next_turn(
    store_factory: Callable[..., Any],
) -> None:
    """Found by a helper: a 3 s model against a 2 s deadline cost the whole block, the
    keyword hit it never needed included. The recall waits half its time for the vector."""
    embedder = Stuck()
    store = store_factory(embedder=embedder)
    store.store("dog", "My dog is called Biscuit.")
    embedder.armed = True
    try:
        first = render_memory_context(store, PROMPT, config=SHORT)
        assert isinstance(first.event, MemoryRecall)
        assert ["dog"] == [e.key for e in first.entries]
        assert first.event.success and not first.event.partial
        assert any("gave no vector in" in d for d in first.event.degraded)
    finally:
        embedder.gate.set()
    for _ in range(100):  # the hung call ends once released
        if len(embedder.asked) == 2:  # the write, then the prompt
            break
        time.sleep(0.05)
    asked = len(embedder.asked)
    later = settled(store)
    assert ["dog"] == [e.key for e in later.entries]
    assert asked == len(embedder.asked)  # served by the vector that came late


def test_a_hung_model_holds_a_bounded_number_of_threads(
    store_factory: Callable[..., Any],
) -> None:
    """Each prompt that ran past its turn's wait is known slow; once such prompts hold
    :data:`EMBEDDING_AT_ONCE` + :data:`SLOW_AT_ONCE` threads, no more start (the bound was
    :data:`EMBEDDING_AT_ONCE` threads in all, so four slow prompts kept every other
    prompt from its vector: ``test_29_embedder_isolation``)."""
    embedder = Stuck()
    store = store_factory(embedder=embedder)
    store.store("dog", "My dog is called Biscuit.")
    embedder.armed = True
    quick = MemoryInjectConfig(deadline_ms=60)
    bound = EMBEDDING_AT_ONCE + SLOW_AT_ONCE
    try:
        events = [
            render_memory_context(store, f"{PROMPT} {i}", config=quick).event
            for i in range(bound + 1)
        ]
        degraded = [e.degraded for e in events if isinstance(e, MemoryRecall)]
        assert all(any("gave no vector in" in d for d in x) for x in degraded[:-1])
        busy = f"is busy with {bound} slow prompts of other turns"
        assert any(busy in d for d in degraded[-1])
        assert bound == len(embedder.started)  # the last never started one
    finally:
        embedder.gate.set()


def test_no_thread_to_embed_on_leaves_the_keyword_block(
    store_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process out of threads: the turn gets its keyword block and the reason, and the
    next turn, with threads again, embeds as before."""
    store = store_factory(embedder=Counting())
    store.store("dog", "My dog is called Biscuit.")
    real = threading.Thread.start

    def refuse(self: threading.Thread) -> None:
        if self.name == "memory-inject-embed":
            raise RuntimeError("can't start new thread")
        real(self)

    monkeypatch.setattr(threading.Thread, "start", refuse)
    first = render_memory_context(store, PROMPT, config=SHORT)
    assert isinstance(first.event, MemoryRecall)
    assert ["dog"] == [e.key for e in first.entries]
    assert any("no thread to embed on" in d for d in first.event.degraded)
    monkeypatch.setattr(threading.Thread, "start", real)
    later = settled(store)
    assert ["dog"] == [e.key for e in later.entries]
