"""Issue 29: an embedder never costs the keyword stage its hits, and the YAML path gets the
fusion measured for its embedder.

``HashingEmbedder``'s cosines are noise up to a line that falls with ``dim``; its
``calibration`` puts "unrelated" on that line and its store fusion
(:data:`WEAK_FUSION`, ``mode="max"``) reports the larger of a hit's two calibrated
scores. Before, a hashing store ranked by zeroclaw's weighted mean (vector 0.7) of
the raw cosine: a keyword hit whose cosine was low fell under the floor, and at 64
dimensions an off-topic prompt's best noise cosine passed it. An agent file's
``fusion`` defaults to ``auto``: the store's own choice for the embedder (a model's
``MODEL_FUSION``), where it used to be ``weighted`` whatever the embedder.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_inject import open_store, render_memory_context
from memory_inject.config import AgentConfig, MemoryInjectConfig, load_agent_config
from memory_inject.config.loading import parse_agent_config
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import ConfigError
from memory_inject.storage import MODEL_FUSION, WEAK_FUSION, Fusion, SQLiteStore
from memory_inject.storage.fusion import fuse

#: A person's notes and chat turns (varied topics, everyday words).
MEMORIES = [
    "Maria adopted a white puppy named Coco from the shelter two weeks ago",
    "John organised a basketball camp for kids in his hometown last summer",
    "The wifi password at the lake house is bluebird42",
    "Bob prefers aisle seats on long flights and always packs a neck pillow",
    "Carol's dentist is Dr. Okafor on Main Street, appointments on Tuesdays",
    "The quarterly report for the board is due on the 15th of each quarter",
    "Water the ficus every Sunday and turn the pot a quarter turn",
    "Joanna finished her screenplay and is submitting it to film festivals",
    "Nate won his third gaming tournament and bought a bigger turtle tank",
    "Tim is writing a fantasy novel and reads a lot of fantasy books",
    "We went camping by the lake and watched the Perseids all night",
    "Maria volunteers at the homeless shelter on weekends, serving dinner",
    "John's team lost the final game but he scored forty points",
    "The car needs new winter tyres before the trip to the mountains",
    "Anna's birthday dinner is at the Italian place on Friday at eight",
    "The landlord said the boiler will be replaced next month",
    "Grandma's lemon cake recipe uses three eggs and a cup of sugar",
    "I started learning the piano again, mostly film themes",
    "The team retro decided to ship the search feature behind a flag",
    "Sam is allergic to peanuts and shellfish",
]
#: Prompts none of the memories can answer, sharing few or no words with them.
OFFTOPIC = [
    "how do I rebase a git branch onto main?",
    "what's the capital of Peru?",
    "convert 30 degrees celsius to fahrenheit",
    "explain the difference between TCP and UDP",
    "what does HTTP status 418 mean?",
    "write a SQL query that counts rows per customer",
    "how many moons does Jupiter have?",
    "translate good morning into Japanese",
]
#: Prompts the memories answer, each through the keyword stage.
ONTOPIC = [
    "what is the wifi password at the lake house?",
    "when is Anna's birthday dinner?",
    "what is Sam allergic to?",
    "what did the team retro decide?",
    "what is the name of Maria's puppy?",
    "which seats does Bob prefer on flights?",
]


def _store(path: Path, embedder: Any, fusion: Fusion | None = None) -> SQLiteStore:
    store = SQLiteStore(path, embedder=embedder, fusion=fusion)
    for i, text in enumerate(MEMORIES):
        store.store(f"m{i}", text, "core")
    return store


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[dict[str, SQLiteStore]]:
    """The memories without an embedder and with hashing vectors of 32, 64 and 256 dims."""
    made = {"none": _store(tmp_path / "none.db", None)}
    for dim in (32, 64, 256):
        made[f"hashing-{dim}"] = _store(tmp_path / f"h{dim}.db", HashingEmbedder(dim))
    yield made
    for s in made.values():
        s.close()


def _block(store: Any, prompt: str) -> list[str]:
    return [
        e.key for e in render_memory_context(store, prompt, config=MemoryInjectConfig()).entries
    ]


class TestHashingCalibration:
    def test_the_noise_line_falls_with_dim(self) -> None:
        """ "Unrelated" falls as dimensions grow (fewer shared buckets), "related" is above it."""
        pairs = [HashingEmbedder(d).calibration for d in (1, 8, 32, 64, 256, 1024, 4096)]
        assert all(-1.0 <= lo < hi <= 1.0 for lo, hi in pairs)
        los = [lo for lo, _ in pairs]
        assert los == sorted(los, reverse=True)
        assert los[0] < los[1] or los[0] == los[1] == 0.9  # capped for tiny vectors

    @pytest.mark.parametrize("dim", [32, 64, 256])
    def test_off_topic_cosines_sit_under_the_line(self, dim: int) -> None:
        """Every off-topic prompt's best cosine against the memories is below "unrelated"."""
        emb = HashingEmbedder(dim)
        rows = emb.embed(MEMORIES)
        lo, _ = emb.calibration
        for prompt in OFFTOPIC:
            (q,) = emb.embed([prompt])
            best = max(sum(a * b for a, b in zip(q, r, strict=True)) for r in rows)
            assert (prompt, best < lo) == (prompt, True)

    def test_a_near_copy_scores_above_the_line(self) -> None:
        """A row the prompt nearly repeats scores high on the vector scale."""
        emb = HashingEmbedder(64)
        (q, r) = emb.embed(["the wifi password at the lake house", MEMORIES[2]])
        cosine = sum(a * b for a, b in zip(q, r, strict=True))
        lo, hi = emb.calibration
        assert cosine > lo + 0.5 * (hi - lo)


class TestMaxFusion:
    def test_reports_the_larger_score_and_ranks_by_it(self) -> None:
        """mode max: a keyword-only hit keeps its keyword score; the weights play no part."""
        kw = [("a", 0.9), ("b", 0.5)]
        vec = [("b", 0.7), ("c", 0.95), ("a", 0.0)]
        for weights in ((0.7, 0.3), (0.0, 1.0), (1.0, 0.0)):
            f = Fusion(mode="max", vector_weight=weights[0], keyword_weight=weights[1])
            assert [("c", 0.95), ("a", 0.9), ("b", 0.7)] == fuse(kw, vec, f, 10)

    def test_weighted_would_have_halved_a_keyword_hit(self) -> None:
        """The same inputs under zeroclaw's weighted mean: the keyword hit falls under 0.4."""
        (top,) = [s for k, s in fuse([("a", 0.9)], [("a", 0.0)], Fusion(), 10) if k == "a"]
        assert math.isclose(0.27, top)


class TestHashingStores:
    def test_off_topic_prompts_inject_nothing(self, stores: dict[str, SQLiteStore]) -> None:
        """With hashing vectors of any size, no off-topic prompt renders an entry."""
        for name, store in stores.items():
            for prompt in OFFTOPIC:
                assert (name, prompt, []) == (name, prompt, _block(store, prompt))

    def test_keyword_hits_keep_their_scores(self, stores: dict[str, SQLiteStore]) -> None:
        """Each keyword hit scores at least what it scores without an embedder."""
        plain = stores["none"]
        for name, store in stores.items():
            for prompt in ONTOPIC:
                base = {e.key: e.score or 0.0 for e in plain.recall(prompt, 5)}
                got = {e.key: e.score or 0.0 for e in store.recall(prompt, 10)}
                for key, score in base.items():
                    assert (name, prompt, key, got.get(key, -1.0) >= score - 1e-9) == (
                        name,
                        prompt,
                        key,
                        True,
                    )

    def test_on_topic_prompts_render_their_memory(self, stores: dict[str, SQLiteStore]) -> None:
        """The answering memory is in every store's block, first."""
        answers = ["m2", "m14", "m19", "m18", "m0", "m3"]
        for name, store in stores.items():
            for prompt, key in zip(ONTOPIC, answers, strict=True):
                block = _block(store, prompt)
                assert (name, prompt, key) == (name, prompt, block[0] if block else None)


YAML = """\
agent: helper
memory:
  backend:
    kind: sqlite
    path: m.db
    embedder: {embedder}
{extra}"""


def _agent(tmp_path: Path, embedder: str, extra: str = "") -> AgentConfig:
    f = tmp_path / "agent.yaml"
    f.write_text(YAML.format(embedder=embedder, extra=extra), encoding="utf-8")
    return load_agent_config(f)


def _open(agent: AgentConfig) -> SQLiteStore:
    store = open_store(agent)
    assert isinstance(store, SQLiteStore)
    return store


class TestAgentFileFusion:
    def test_auto_is_the_default(self) -> None:
        """An agent file that names no fusion gets ``auto``."""
        cfg = parse_agent_config({"agent": "a", "memory": {"backend": {"embedder": "hashing"}}})
        assert "auto" == cfg.memory.backend.fusion

    def test_hashing_gets_the_weak_fusion(self, tmp_path: Path) -> None:
        """``embedder: hashing`` without ``fusion`` ranks and scores as the library default."""
        store = _open(_agent(tmp_path, "hashing"))
        try:
            assert WEAK_FUSION == store._engine._fusion
            for i, text in enumerate(MEMORIES):
                store.store(f"m{i}", text, "core")
            assert [] == _block(store, OFFTOPIC[1])
            assert "m2" == _block(store, ONTOPIC[0])[0]
        finally:
            store.close()

    def test_a_model_gets_model_fusion(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A sentence model named in the file gets MODEL_FUSION (it used to get weighted)."""

        class Model:
            name, dim = "stub-model", 2

            def embed(self, texts: Sequence[str]) -> list[list[float]]:
                return [[1.0, 0.0] for _ in texts]

        monkeypatch.setattr("memory_inject.embedders.make_embedder", lambda *_a: Model())
        store = _open(_agent(tmp_path, "minilm-onnx"))
        try:
            assert MODEL_FUSION == store._engine._fusion
        finally:
            store.close()

    def test_search_mode_is_kept_under_auto(self, tmp_path: Path) -> None:
        """``auto`` picks the mode and weights; ``search_mode`` still applies."""
        store = _open(_agent(tmp_path, "hashing", "    search_mode: bm25\n"))
        try:
            fusion = store._engine._fusion
            assert ("max", "bm25") == (fusion.mode, fusion.search_mode)
        finally:
            store.close()

    def test_a_named_fusion_is_kept(self, tmp_path: Path) -> None:
        """``fusion: weighted`` keeps zeroclaw's weighted mean and the file's weights."""
        extra = "    fusion: weighted\n    vector_weight: 0.6\n    keyword_weight: 0.4\n"
        store = _open(_agent(tmp_path, "hashing", extra))
        try:
            assert Fusion(vector_weight=0.6, keyword_weight=0.4) == store._engine._fusion
        finally:
            store.close()

    def test_an_unknown_fusion_names_the_file_and_key(self, tmp_path: Path) -> None:
        """A fusion that is not one of the choices is refused with the file and the key."""
        with pytest.raises(ConfigError) as err:
            _agent(tmp_path, "hashing", "    fusion: maximum\n")
        assert "agent.yaml" in str(err.value)
        assert "fusion" in str(err.value)


@pytest.mark.postgres
class TestPostgresHashing:
    def test_same_scores_as_sqlite(self, tmp_path: Path, pg_dsn: str) -> None:
        """PostgreSQL picks the same fusion for hashing vectors and scores the same: no
        off-topic prompt injects, each keyword hit keeps its keyword-only score."""
        from tests.storage import _pg_backend as pgb

        pg = pgb.make_postgres_store(pg_dsn, embedder=HashingEmbedder(64))
        plain = pgb.make_postgres_store(pg_dsn)
        try:
            assert WEAK_FUSION == pg._engine.fusion
            for store in (pg, plain):
                for i, text in enumerate(MEMORIES):
                    store.store(f"m{i}", text, "core")
            for prompt in OFFTOPIC:
                assert (prompt, []) == (prompt, _block(pg, prompt))
            for prompt in ONTOPIC:
                base = {e.key: e.score or 0.0 for e in plain.recall(prompt, 5)}
                got = {e.key: e.score or 0.0 for e in pg.recall(prompt, 10)}
                assert (prompt, True) == (
                    prompt,
                    all(got.get(k, -1.0) >= s - 1e-9 for k, s in base.items()),
                )
        finally:
            pg.close()
            plain.close()
