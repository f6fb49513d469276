"""A render embeds its prompt once, not once per session scope (twenty-eighth round).

Found by a helper: a channel turn asks the store once per scope with the same prompt,
and each call embedded it again, one after another: with a 1.2 s model two scopes ran
past the 2 s deadline and the second scope's memory was lost. Both stores keep the
last prompts' vectors (a vector depends on the text alone); a failure is not kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryRecall, render_memory_context
from memory_inject.embedders import HashingEmbedder
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
