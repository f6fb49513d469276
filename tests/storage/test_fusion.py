"""Score fusion of calibrated stage scores and the Fusion options."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.fusion import (
    MODEL_FUSION,
    WEAK_FUSION,
    Fusion,
    RawScores,
    default_fusion,
    fuse,
)

W = Fusion()
RRF = Fusion(mode="rrf")


class TestWeighted:
    def test_keyword_only_keeps_the_calibrated_scores(self) -> None:
        """Without vector hits the keyword scores are the scores: no division by the best."""
        assert [("a", 0.5), ("b", 0.25)] == fuse([("a", 0.5), ("b", 0.25)], [], W, 5)

    def test_out_of_range_scores_are_clamped(self) -> None:
        """A store bug cannot push a score outside 0..1."""
        assert [("a", 1.0), ("b", 0.0)] == fuse([("a", 4.0), ("b", -1.0)], [], W, 5)

    def test_vector_only_is_the_calibrated_cosine(self) -> None:
        """Without keyword hits the score is the vector stage's own."""
        assert [("c", 0.8), ("d", 0.25)] == fuse([], [("d", 0.25), ("c", 0.8)], W, 5)

    def test_both_use_the_weighted_mean_and_a_miss_counts_zero(self) -> None:
        """An id one stage missed gets 0 from it, so ids both stages found rank first."""
        got = dict(fuse([("a", 1.0), ("b", 0.5)], [("b", 0.8), ("c", 0.5)], W, 5))
        assert {
            "a": pytest.approx(0.3),
            "b": pytest.approx(0.7 * 0.8 + 0.3 * 0.5),
            "c": pytest.approx(0.35),
        } == got

    def test_a_score_does_not_depend_on_the_other_hits(self) -> None:
        """The same id and stage scores give the same fused score whatever else was found."""
        alone = dict(fuse([("a", 0.4)], [("a", 0.6)], W, 5))["a"]
        crowd = dict(fuse([("a", 0.4), ("b", 1.0)], [("a", 0.6), ("c", 1.0)], W, 5))["a"]
        assert alone == crowd

    def test_ties_keep_the_store_order(self) -> None:
        """Equal scores keep the order the store ranked them in (BM25 for keyword hits)."""
        assert ["c", "a", "b"] == [
            k for k, _ in fuse([("c", 1.0), ("a", 1.0), ("b", 1.0)], [], W, 5)
        ]

    def test_limit_truncates(self) -> None:
        """At most ``limit`` pairs; a non-positive limit gives none."""
        pairs = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
        assert (["a", "b"], []) == ([k for k, _ in fuse(pairs, [], W, 2)], fuse(pairs, [], W, 0))

    def test_duplicate_ids_keep_their_best(self) -> None:
        """An id listed twice in one stage keeps its higher score."""
        assert [("a", 0.9), ("b", 0.5)] == fuse([("a", 0.1), ("a", 0.9), ("b", 0.5)], [], W, 5)

    def test_weights_are_configurable(self) -> None:
        """The vector and keyword weights set the mix for ids found by both."""
        f = Fusion(vector_weight=1.0, keyword_weight=1.0)
        # typed as object: mypy's strict equality cannot see pytest.Approx's __eq__ inside a list
        expected: list[tuple[str, object]] = [("a", pytest.approx(0.75))]
        assert expected == fuse([("a", 1.0)], [("a", 0.5)], f, 5)


class TestRrf:
    def test_order_follows_reciprocal_rank(self) -> None:
        """RRF orders by weighted 1/(k + rank): second in both lists beats first in one."""
        kw = [("a", 0.9), ("b", 0.8)]
        vec = [("c", 0.9), ("b", 0.8)]
        assert "b" == fuse(kw, vec, RRF, 5)[0][0]

    def test_scores_are_the_calibrated_mean(self) -> None:
        """The reported score is the weighted calibrated mean, so the floor keeps its meaning."""
        got = dict(fuse([("a", 0.9), ("b", 0.8)], [("c", 0.9), ("b", 0.8)], RRF, 5))
        assert {
            "a": pytest.approx(0.3 * 0.9),
            "b": pytest.approx(0.8),
            "c": pytest.approx(0.7 * 0.9),
        } == got

    def test_single_list_is_that_lists_scores(self) -> None:
        """With only keyword hits RRF changes nothing."""
        assert [("a", 0.6), ("b", 0.3)] == fuse([("a", 0.6), ("b", 0.3)], [], RRF, 5)


class TestFusionOptions:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"mode": "sum"},
                "'mode' must be one of 'weighted', 'rrf', 'minmax', 'max' (got 'sum')",
            ),
            ({"search_mode": "fts"}, "'search_mode' must be one of"),
            ({"vector_weight": -0.1}, "'vector_weight' must be >= 0 (got -0.1)"),
            ({"vector_weight": 0, "keyword_weight": 0}, "must be > 0"),
            ({"rrf_k": -1}, "'rrf_k' must be an integer >= 0 (got -1)"),
            ({"rrf_k": True}, "'rrf_k' must be an integer"),
        ],
    )
    def test_bad_values_are_rejected(self, kwargs: dict[str, Any], message: str) -> None:
        """Each bad option is a ValueError naming the field and the value."""
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            Fusion(**kwargs)

    def test_defaults_are_the_spec(self) -> None:
        """Weighted fusion, 0.7 / 0.3, k = 60, hybrid search."""
        assert ("weighted", 0.7, 0.3, 60, "hybrid") == (
            W.mode,
            W.vector_weight,
            W.keyword_weight,
            W.rrf_k,
            W.search_mode,
        )


MINMAX = MODEL_FUSION


class TestMinMax:
    def test_orders_by_rescaled_raw_scores(self) -> None:
        """A moderate BM25 hit with the scope's best cosine beats the best BM25 hit far from it."""
        raw = RawScores(bm25={"a": 10.0, "b": 6.0}, cosine={"a": 0.1, "b": 0.7}, low=0.1, high=0.7)
        got = fuse([("a", 1.0), ("b", 0.5)], [("b", 0.6), ("a", 0.0)], MINMAX, 5, raw)
        # a: 0.5 * 1.0 + 0.5 * 0 = 0.5; b: 0.5 * 0.6 + 0.5 * 1 = 0.8
        assert ["b", "a"] == [k for k, _ in got]

    def test_reports_the_calibrated_mean_not_the_rank_value(self) -> None:
        """Scores are the weighted mean of the calibrated inputs, so the floor keeps its meaning."""
        raw = RawScores(bm25={"a": 3.0}, cosine={"a": 0.4, "c": 0.9}, low=0.0, high=0.9)
        got = dict(fuse([("a", 0.8)], [("c", 0.9), ("a", 0.2)], MINMAX, 5, raw))
        assert {"a": pytest.approx(0.5), "c": pytest.approx(0.45)} == got

    def test_a_score_does_not_depend_on_the_other_hits(self) -> None:
        """The rescaling moves the order only: the same row scores the same in any company."""
        alone = fuse(
            [("a", 0.4)], [("a", 0.6)], MINMAX, 5, RawScores({"a": 2.0}, {"a": 0.5}, 0.0, 0.5)
        )
        crowd = fuse(
            [("b", 1.0), ("a", 0.4)],
            [("c", 0.9), ("a", 0.6)],
            MINMAX,
            5,
            RawScores({"b": 9.0, "a": 2.0}, {"c": 0.95, "a": 0.5}, -0.2, 0.95),
        )
        assert dict(alone)["a"] == dict(crowd)["a"]

    @given(
        st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 30), max_size=6),
        st.dictionaries(st.sampled_from("cdefgh"), st.floats(-1, 1), min_size=1, max_size=6),
    )
    def test_scores_are_bounded(self, bm25: dict[str, float], cosine: dict[str, float]) -> None:
        """Whatever the raw scores, every reported score is in 0..1 and ids are unique."""
        raw = RawScores(bm25, cosine, min(cosine.values()), max(cosine.values()))
        kw = [(k, min(1.0, b / 30)) for k, b in bm25.items()]
        vec = [(k, max(0.0, c)) for k, c in cosine.items()]
        got = fuse(kw, vec, MINMAX, 20, raw)
        assert all(0.0 <= s <= 1.0 for _, s in got)
        assert len({k for k, _ in got}) == len(got)

    def test_without_raw_scores_it_ranks_as_weighted(self) -> None:
        """A store that cannot give raw scores (PostgreSQL today) gets the weighted order."""
        kw, vec = [("a", 1.0), ("b", 0.5)], [("b", 0.8), ("c", 0.5)]
        weighted = Fusion(vector_weight=0.5, keyword_weight=0.5)
        assert fuse(kw, vec, weighted, 5) == fuse(kw, vec, MINMAX, 5)

    def test_model_embedders_get_model_fusion_by_default(self) -> None:
        """No embedder keeps Fusion(), the hashing one gets WEAK_FUSION (``max``), any other
        embedder MODEL_FUSION."""

        class Model:
            name, dim = "m", 2

            def embed(self, texts: list[str]) -> list[list[float]]:
                return [[1.0, 0.0] for _ in texts]

        assert (Fusion(), WEAK_FUSION, MODEL_FUSION) == (
            default_fusion(None),
            default_fusion(HashingEmbedder()),
            default_fusion(Model()),
        )
        assert "max" == WEAK_FUSION.mode
