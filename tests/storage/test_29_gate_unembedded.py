"""The prompt gate never hides a memory that has no vector of the store's embedder
(twenty-eighth round).

Found by a helper: ``min_prompt_similarity`` gates a turn on the similarity of the
nearest embedded row, and a row written without the embedder (another process, a
store opened before the embedder was set) has none. Its exact keyword answer was then
dropped as ``unrelated_prompt`` (similarity 0.000), with nothing on the event to say
why. Now a keyword hit without a vector makes the similarity unknown (the gate passes)
and the event says so (``unembedded_rows``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryInjectConfig, MemoryRecall, render_memory_context
from memory_inject.embedders import HashingEmbedder
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import make_sqlite_store

GATED = MemoryInjectConfig(min_prompt_similarity=0.5)


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """A store without an embedder, and one with it on the same database."""
    plain: Any
    if request.param == "sqlite":
        plain = make_sqlite_store(tmp_path)
    else:
        plain = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"))
    maker = make_sqlite_store if request.param == "sqlite" else pgb.make_postgres_store
    first: Any = tmp_path if request.param == "sqlite" else None
    embedded = maker(first, same_database_as=plain, embedder=HashingEmbedder(64))
    yield plain, embedded
    embedded.close()
    plain.close()


def test_a_row_without_a_vector_is_not_gated(stores: tuple[Any, Any]) -> None:
    plain, embedded = stores
    embedded.store("cat", "The office cat is called Miso.")
    plain.store("dog", "My dog is called Biscuit.")  # written without the embedder
    result = render_memory_context(embedded, "what is my dog called?", config=GATED)
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert "dog" in [e.key for e in result.entries]
    assert event.prompt_similarity is None
    assert any(d.startswith("unembedded_rows: 1 keyword hits") for d in event.degraded)


def test_embedded_rows_are_gated_as_before(stores: tuple[Any, Any]) -> None:
    _, embedded = stores
    embedded.store("cat", "The office cat is called Miso.")
    embedded.store("dog", "My dog is called Biscuit.")
    result = render_memory_context(embedded, "what is my dog called?", config=GATED)
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert event.prompt_similarity is not None
    assert not any("unembedded_rows" in d for d in event.degraded)


def test_embed_missing_gives_those_rows_their_vectors(stores: tuple[Any, Any]) -> None:
    """PostgreSQL had no ``embed_missing()`` (twenty-eighth round): nothing repaired such
    rows there. Both stores now embed them, once."""
    plain, embedded = stores
    embedded.store("cat", "The office cat is called Miso.")
    plain.store("dog", "My dog is called Biscuit.")
    plain.store("gone", "My old dog was called Rex.")
    plain.forget("gone")
    assert 1 == embedded.embed_missing()
    assert 0 == embedded.embed_missing()
    assert embedded.get("dog").embedding is not None
    result = render_memory_context(embedded, "what is my dog called?", config=GATED)
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert event.prompt_similarity is not None
    assert not any("unembedded_rows" in d for d in event.degraded)
