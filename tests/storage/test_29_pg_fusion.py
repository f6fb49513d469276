"""Issue 29: PostgreSQL ranks ``"minmax"`` fusion as SQLite does, and picks it by default.

``MODEL_FUSION`` ranks by ``0.5 * keyword / max(keyword) + 0.5 * (cos - low) /
(high - low)``: the keyword window's raw scores, the cosine of every candidate
(keyword hits too) and the scope's least and greatest cosine. On PostgreSQL
the raw keyword score is the hit's idf-weighted coverage (there is no BM25),
the keyword hits' cosines come with the keyword statement, and the scope's
extremes from pgvector's index (the nearest rows, and the row nearest the
negated query). A small store with a deterministic model-like embedder ranks
the same on both engines for prompts whose keyword hits the two raw keyword
scores cannot tell apart (one hit: both rescale it to 1); where several hits
hold different words, BM25's and coverage's ratios differ, and so may the order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memory_inject.storage.fusion import MODEL_FUSION, Fusion
from memory_inject.storage.postgres import PostgresStore
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import make_sqlite_store

pytestmark = pytest.mark.postgres


class TopicEmbedder:
    """A deterministic stand-in for a sentence model: a text's vector counts its topic words.

    Not a :class:`~memory_inject.embedders.HashingEmbedder`, so a store's default
    fusion for it is :data:`MODEL_FUSION`.
    """

    dim = 6
    calibration = (0.2, 0.6)
    TOPICS: ClassVar[dict[str, int]] = {
        **dict.fromkeys(("hiking", "trail", "mountain", "alps", "climb", "walk", "summit"), 0),
        **dict.fromkeys(("cat", "dog", "pet", "vet"), 1),
        **dict.fromkeys(("deploy", "release", "production", "server"), 2),
        **dict.fromkeys(("bread", "bake", "oven", "recipe", "cake"), 3),
        **dict.fromkeys(("trip", "travel", "weekend", "saturday"), 4),
    }

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text: topic counts plus a constant that its length varies."""
        out = []
        for text in texts:
            v = [0.0] * self.dim
            v[5] = 0.3 + len(text) / 1000
            for word in text.lower().replace(",", " ").replace(".", " ").split():
                if word in self.TOPICS:
                    v[self.TOPICS[word]] += 1.0
            norm = math.sqrt(sum(x * x for x in v))
            out.append([x / norm for x in v])
        return out


MEMORIES = [
    ("h1", "hiking trip plans for saturday"),
    ("h2", "plans for the bake sale, cake and bread"),
    ("h3", "the alps trail and a mountain climb"),
    ("h4", "trip to the vet with the cat"),
    ("h5", "oven recipe plans"),
    ("h6", "deploy the release to production"),
    ("h7", "a walk with the dog on the trail"),
    ("h8", "server release plans"),
    ("h9", "notes about a zebra and bread"),
]
#: Prompts with one keyword hit each (the rest of the ranking is the vector stage's).
PROMPTS = ["zebra summit", "vet visit", "production outage", "saturday", "alps climb"]

Pair = tuple[Any, PostgresStore]


@pytest.fixture
def engines(tmp_path: Path, pg_dsn: str) -> Iterator[Callable[..., Pair]]:
    """``engines(**kwargs)`` opens a SQLite and a PostgreSQL store holding :data:`MEMORIES`."""
    made: list[Any] = []

    def factory(**kwargs: Any) -> Pair:
        pair = (
            make_sqlite_store(tmp_path / f"e{len(made)}", embedder=TopicEmbedder(), **kwargs),
            pgb.make_postgres_store(pg_dsn, embedder=TopicEmbedder(), **kwargs),
        )
        made.extend(pair)
        for store in pair:
            for key, content in MEMORIES:
                store.store(key, content)
        return pair

    yield factory
    for s in made:
        s.close()


def _ranked(store: Any, prompt: str, limit: int = 5) -> list[tuple[str, float]]:
    return [(e.key, round(e.score or 0.0, 3)) for e in store.recall(prompt, limit)]


class TestMinmaxParity:
    def test_default_fusion_follows_the_embedder(self, engines: Callable[..., Pair]) -> None:
        """Without a ``fusion``, both engines pick MODEL_FUSION for a model embedder."""
        sqlite, pg = engines()
        assert (MODEL_FUSION, MODEL_FUSION) == (sqlite._engine._fusion, pg._engine.fusion)

    @pytest.mark.parametrize("limit", [1, 2, 5])
    def test_same_order_and_scores(self, engines: Callable[..., Pair], limit: int) -> None:
        """Each prompt's fused hits come in the same order with the same scores on both
        (with a small limit the keyword hit is outside the nearest rows, and the scope's
        lowest cosine is no candidate's)."""
        sqlite, pg = engines()
        for prompt in PROMPTS:
            assert (prompt, _ranked(sqlite, prompt, limit)) == (prompt, _ranked(pg, prompt, limit))

    def test_minmax_is_not_weighted(self, engines: Callable[..., Pair]) -> None:
        """On PostgreSQL too, MODEL_FUSION ranks differently from Fusion() somewhere."""
        _, minmax = engines()
        _, weighted = engines(fusion=Fusion())
        assert any(
            [k for k, _ in _ranked(minmax, p)] != [k for k, _ in _ranked(weighted, p)]
            for p in PROMPTS
        )
