"""A plan's semantic query on a store whose embedder is of spellings (thirty-second round).

``preset: founder_os`` ships ``embedder: hashing``. Query A forced the vector stage alone,
where the hashing cosine of "wire transfer terms" and a row holding those words (0.448)
sits under the embedder's "unrelated" line: the row scored 0.0 and the relevance floor
dropped it. Hashed character n-grams are spelling, not meaning
(``embedders.embeds_meaning``): such a store answers a semantic query with its own recall,
on every store with vectors alike. An embedder of meaning still ranks by vectors alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memory_inject.contract import SupportsVectors
from memory_inject.embedders import HashingEmbedder

WIRE = "Zed Ltd pays by wire transfer within 30 days."


class Meaning(HashingEmbedder):
    """The same vectors, declared of meaning (as a sentence model is)."""

    semantic = True


@pytest.mark.needs.with_args(SupportsVectors)
def test_semantic_query_scores_as_the_stores_recall(store_factory: Callable[..., Any]) -> None:
    store = store_factory(embedder=HashingEmbedder())
    store.store("wire", WIRE, "fact", status="confirmed")
    store.store("other", "Weekly reporting goes out on Mondays.", "fact", status="confirmed")
    own = {e.key: e.score for e in store.recall("wire transfer terms", 5)}
    semantic = store.recall_where("wire transfer terms", 5, mode="semantic")
    assert {e.key: e.score for e in semantic} == own
    assert (own["wire"] or 0.0) >= 0.4


@pytest.mark.needs.with_args(SupportsVectors)
def test_an_embedder_of_meaning_still_ranks_by_vectors(store_factory: Callable[..., Any]) -> None:
    store = store_factory(embedder=Meaning())
    store.store("wire", WIRE, "fact", status="confirmed")
    (hit,) = store.recall_where("wire transfer terms", 5, mode="semantic")
    assert hit.key == "wire" and hit.score is not None
    assert hit.score < 0.4  # the cosine alone, under the hashing "unrelated" line
