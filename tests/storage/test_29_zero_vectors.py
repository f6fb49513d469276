"""A vector of zeros is no vector (twenty-ninth round).

A zero vector is near no prompt: its cosine is 0 against every one. A static model
gives one for a text holding no word it knows, and a caller could pass one. Such a
row was stored with it, and stayed so for good: ``embed_missing()`` skipped it (it
had a vector), and ``min_prompt_similarity`` dropped its exact keyword answer as
``unrelated_prompt``. Now a given zero vector is refused by key, an embedder's zero
vector is kept as no vector (the gate then says the similarity is not known), and
an import embeds such a row again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryInjectConfig, MemoryRecall, render_memory_context
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import EmbedderError
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import make_sqlite_store

DIM = 64
GATED = MemoryInjectConfig(min_prompt_similarity=0.5)


class KnownWords:
    """A hashing model that, as a static model does, gives zeros for unknown words."""

    name = "known-words-64"
    dim = DIM

    def __init__(self) -> None:
        self._inner = HashingEmbedder(DIM)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        known = {"what", "is", "my", "dog", "called", "the", "office", "cat", "miso"}
        kept = [" ".join(w for w in t.lower().split() if w.strip("?.") in known) for t in texts]
        return [list(v) for v in self._inner.embed(kept)]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made: Any
    if request.param == "sqlite":
        made = make_sqlite_store(tmp_path, embedder=KnownWords())
    else:
        made = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"), embedder=KnownWords())
    yield made
    made.close()


def test_a_given_zero_vector_is_refused_by_key(store: Any) -> None:
    with pytest.raises(EmbedderError, match=r"^'embedding' of 'z' is all zeros$"):
        store.store("z", "Zanzibar trip", embedding=[0.0] * DIM)
    assert store.get("z") is None


def test_an_embedders_zero_vector_is_kept_as_none(store: Any) -> None:
    store.store("cat", "The office cat is called Miso.")
    store.store("dog", "Quixote names a hound.")  # no word the model knows
    assert store.get("cat").embedding is not None
    assert store.get("dog").embedding is None
    result = render_memory_context(store, "is Quixote a hound?", config=GATED)
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert ["dog"] == [e.key for e in result.entries]
    assert event.prompt_similarity is None
    assert any(d.startswith("unembedded_rows: 1 keyword hits") for d in event.degraded)
    assert 0 == store.embed_missing()  # the model still knows none of its words


def test_an_import_embeds_a_zero_vector_again(store: Any, tmp_path: Path) -> None:
    row = {"key": "cat", "content": "The office cat is called Miso.", "embedding": [0.0] * DIM}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    store.import_jsonl(path)
    got = store.get("cat").embedding
    assert got is not None
    assert any(got)
