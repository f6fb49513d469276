"""Text embedders for the stores' vector stage, and the cosine top-k they share.

:class:`HashingEmbedder` needs nothing beyond the standard library and is the
default for hybrid recall: hashed character n-grams make it robust to typos
("postgress" still lands near "postgres"), which is what a lexical index
cannot do. The model-backed embedders are optional extras and import their
packages only when constructed, so ``import memory_inject`` stays light:
``sentence-transformers`` (torch) and ``minilm-onnx`` (the same MiniLM,
int8 on onnxruntime, no torch) for quality, ``model2vec`` for speed.

Owns the :class:`Embedder` protocol, :class:`HashingEmbedder`, the helpers a
store reads an embedder through and :func:`cosine_top_k`; the model-backed
embedders live in ``_model_embedders`` and ``_onnx_embedder``, re-exported here.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import importlib
import math
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from memory_inject._model_embedders import Model2VecEmbedder, SentenceTransformerEmbedder
from memory_inject._onnx_embedder import OnnxMiniLMEmbedder
from memory_inject.exceptions import EmbedderError

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "Model2VecEmbedder",
    "OnnxMiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "cosine_top_k",
    "embedder_dim",
    "embedder_name",
    "embeds_meaning",
    "make_embedder",
    "reads_script",
    "similarity_calibration",
]

_WORD = re.compile(r"\w+", re.UNICODE)


@functools.cache
def numpy_or_none() -> Any:
    """numpy if installed (the ``vectors`` extra), imported on first vector use only."""
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-size vectors; a store calls it on write and on recall.

    ``name`` identifies the model (vectors from two models are not comparable);
    ``dim`` is the vector length. ``embed`` returns one vector per text.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@functools.lru_cache(maxsize=1 << 16)
def _bucket(gram: str, dim: int) -> tuple[int, float]:
    # blake2b, not hash(): Python's str hash is salted per process, and vectors
    # written by one process must match queries embedded by another.
    digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return (value >> 1) % dim, (1.0 if value & 1 else -1.0)


#: HashingEmbedder's noise line, ``_NOISE_BASE + _NOISE_SCALE / sqrt(dim)`` (its ``calibration``).
_NOISE_BASE, _NOISE_SCALE, _NOISE_CAP = 0.33, 2.11, 0.9
#: How far above the noise line a hashing cosine scores 1.
_RELATED_SPAN = 0.3


class HashingEmbedder:
    """Signed feature hashing of character n-grams; deterministic and dependency-free.

    Each lower-cased word is padded as ``<word>`` so n-grams at a word's edges
    differ from those inside it, then every n-gram of length ``ngram_range[0]``
    to ``ngram_range[1]`` adds +1 or -1 to one of ``dim`` buckets. The sign
    cancels hash collisions on average. Vectors are L2-normalised.
    """

    #: Its vectors are of spelling, not meaning (:func:`embeds_meaning`).
    semantic = False

    def __init__(self, dim: int = 256, ngram_range: tuple[int, int] = (3, 5)) -> None:
        """``ValueError`` unless ``dim`` >= 1 and ``ngram_range`` is ``(lo, hi)``, 1 <= lo <= hi."""
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"'dim' must be an integer >= 1 (got {dim!r})")
        lo, hi = ngram_range
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
            raise ValueError(
                f"'ngram_range' must be (lo, hi) with 1 <= lo <= hi (got {ngram_range!r})"
            )
        self._dim = dim
        self._range = (lo, hi)

    @property
    def name(self) -> str:
        """``hashing-<dim>-<lo>-<hi>``: other settings give vectors that do not compare."""
        return f"hashing-{self._dim}-{self._range[0]}-{self._range[1]}"

    @property
    def dim(self) -> int:
        """The vector length, ``dim`` as given."""
        return self._dim

    @property
    def calibration(self) -> tuple[float, float]:
        """The ``(unrelated, related)`` cosine pair, by ``dim`` (see ``similarity_calibration``).

        Hashed n-grams of unrelated texts still meet in common buckets, the
        fewer the buckets the more: against a chat store an off-topic prompt's
        best cosine is 0.71 at 32 dimensions, 0.55 at 64, 0.45 at 256 and 0.40
        at 1,024 (99th percentile, LoCoMo dev). "Unrelated" is that noise
        line, ``0.33 + 2.11 / sqrt(dim)`` (a fit of those figures, at most
        0.9); "related" is 0.3 above it, at most 1.
        """
        lo = min(_NOISE_CAP, _NOISE_BASE + _NOISE_SCALE / math.sqrt(self._dim))
        return (lo, min(1.0, lo + _RELATED_SPAN))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text (all zeros for a text without words).

        ``TypeError`` for a single string.
        """
        if isinstance(texts, str):
            raise TypeError("'texts' must be a sequence of strings, not a single string")
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self._dim
        lo, hi = self._range
        for word in _WORD.findall(text.lower()):
            padded = f"<{word}>"
            size = len(padded)
            for n in range(lo, min(hi, size) + 1):
                for i in range(size - n + 1):
                    idx, sign = _bucket(padded[i : i + n], self._dim)
                    vec[idx] += sign
            if size < lo:
                idx, sign = _bucket(padded, self._dim)
                vec[idx] += sign
        norm = math.sqrt(sum(v * v for v in vec))
        if norm == 0.0:
            return vec
        return [v / norm for v in vec]

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim}, ngram_range={self._range})"


def embedder_name(embedder: object) -> str:
    """The embedder's ``name`` for messages; its class name when ``name`` raises or is no text.

    A third-party embedder is untrusted code: reading an attribute of it must
    not turn a clear ``EmbedderError`` into a bare exception from a property.
    """
    try:
        name = getattr(embedder, "name", None)
    except Exception:  # noqa: BLE001 - any property may raise
        name = None
    return name if isinstance(name, str) and name else type(embedder).__qualname__


def embedder_dim(embedder: object) -> int | None:
    """The embedder's ``dim``, ``None`` when it has none; ``EmbedderError`` naming it otherwise.

    ``dim`` is required by :class:`Embedder`, but SQLite always took an embedder
    without one. One that raises, or is not a positive integer, is refused.
    """
    try:
        dim = getattr(embedder, "dim", None)
    except Exception as exc:
        raise EmbedderError(
            f"embedder {embedder_name(embedder)!r}: reading 'dim' raised {type(exc).__name__}: "
            f"{exc}"
        ) from exc
    if dim is None:
        return None
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise EmbedderError(
            f"embedder {embedder_name(embedder)!r}: 'dim' must be an integer >= 1 (got {dim!r:.40})"
        )
    return dim


def similarity_calibration(embedder: object) -> tuple[float, float]:
    """The embedder's ``(unrelated, related)`` cosine pair for calibrated scores.

    Its ``calibration`` attribute when it has a valid one, else ``(0.0, 1.0)``
    (raw cosine); see :func:`memory_inject.storage.calibration.vector_score`.
    """
    try:
        pair = getattr(embedder, "calibration", None)
        lo, hi = (float(v) for v in pair)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - missing, malformed, or a property that raises
        return (0.0, 1.0)
    return (lo, hi) if -1.0 <= lo < hi <= 1.0 else (0.0, 1.0)


def embeds_meaning(embedder: object) -> bool:
    """Whether a recall may rank by ``embedder``'s vectors alone (a plan's ``semantic`` query).

    False when it declares ``semantic = False``, as :class:`HashingEmbedder` does: its
    vectors are of spelling (hashed character n-grams), made to back a keyword index
    (typos), and alone they score a row that holds the prompt's words 0 (the cosine of
    a short prompt and a longer row sits under its ``calibration``'s "unrelated" line).
    The stores answer a semantic query with such an embedder by their own recall, the
    keyword stage with the vectors' sure hits. Without the attribute (or when reading
    it raises), True.
    """
    try:
        return getattr(embedder, "semantic", True) is not False
    except Exception:  # noqa: BLE001 - a third-party property may raise
        return True


#: Letters of Chinese, Japanese and Korean: ideographs, kana, Hangul syllables.
_CJK_LETTER = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def reads_script(embedder: object, text: str) -> bool:
    """Whether ``embedder``'s vector of ``text`` can be trusted to say what it is about.

    False when the embedder declares ``scripts = ("latin",)`` (a model trained on
    English text, as all-MiniLM-L6-v2) and most of ``text``'s letters are Chinese,
    Japanese or Korean: such a model gives any two CJK texts a cosine of 0.3-0.75, over
    its "unrelated" line, so every memory would pass the floor on its cosine alone
    (``benchmarks/facts.py --prompts benchmarks/facts_zh.json --embedder minilm-onnx``).
    The stores then recall such a prompt by keywords alone. Without ``scripts``, or with
    ``"cjk"`` among them, True.
    """
    scripts = getattr(embedder, "scripts", None)
    if not isinstance(scripts, tuple | list | frozenset | set) or "cjk" in scripts:
        return True
    letters = sum(1 for ch in text if ch.isalpha())
    return 2 * len(_CJK_LETTER.findall(text)) < letters or not letters


def cosine_top_k(query_vec: Sequence[float], matrix: Any, k: int) -> list[tuple[int, float]]:
    """The ``k`` rows of ``matrix`` most cosine-similar to ``query_vec``.

    Returns ``(row_index, similarity)`` best first, ties by index. ``matrix`` is
    a sequence of vectors or a 2-D numpy array; numpy is used when importable,
    plain Python otherwise. Zero vectors have similarity 0.
    """
    if k <= 0:
        return []
    if numpy_or_none() is not None:
        return _top_k_numpy(query_vec, matrix, k)
    return _top_k_python(query_vec, matrix, k)


def _top_k_numpy(query_vec: Sequence[float], matrix: Any, k: int) -> list[tuple[int, float]]:
    _np = numpy_or_none()
    m = _np.asarray(matrix, dtype=_np.float32)
    if m.size == 0:
        return []
    q = _np.asarray(query_vec, dtype=_np.float32)
    qn = float(_np.linalg.norm(q))
    if qn == 0.0:
        sims = _np.zeros(m.shape[0], dtype=_np.float32)
    else:
        norms = _np.linalg.norm(m, axis=1)
        norms[norms == 0.0] = _np.inf
        sims = (m @ q) / (norms * qn)
    n = sims.shape[0]
    if k < n:
        part = _np.argpartition(-sims, k - 1)[:k]
        # argpartition is not stable: widen to every row tied with the k-th so
        # the index tie-break below picks the same rows as the Python path.
        kth = sims[part].min()
        part = _np.nonzero(sims >= kth)[0]
    else:
        part = _np.arange(n)
    order = sorted(part.tolist(), key=lambda i: (-float(sims[i]), i))
    return [(i, float(sims[i])) for i in order[:k]]


def _top_k_python(query_vec: Sequence[float], matrix: Any, k: int) -> list[tuple[int, float]]:
    q = [float(x) for x in query_vec]
    qn = math.sqrt(sum(x * x for x in q))
    scored: list[tuple[float, int]] = []
    for i, row in enumerate(matrix):
        rn = math.sqrt(sum(float(x) * float(x) for x in row))
        sim = (
            0.0
            if qn == 0.0 or rn == 0.0
            else sum(a * float(b) for a, b in zip(q, row, strict=True)) / (qn * rn)
        )
        scored.append((sim, i))
    best = heapq.nsmallest(k, scored, key=lambda p: (-p[0], p[1]))
    return [(i, s) for s, i in best]


def make_embedder(kind: str = "none", model: str | None = None) -> Embedder | None:
    """The embedder a ``memory.backend.embedder`` setting names (None for ``none``)."""
    if kind == "none":
        return None
    if kind == "hashing":
        return HashingEmbedder()
    if kind == "sentence-transformers":
        return SentenceTransformerEmbedder(model or "all-MiniLM-L6-v2")
    if kind == "minilm-onnx":
        return OnnxMiniLMEmbedder(model)
    if kind == "model2vec":
        if not model:
            raise ValueError("'embedder_model' must name a local model2vec path (got None)")
        return Model2VecEmbedder(model)
    raise ValueError(
        "'embedder' must be one of 'none', 'hashing', 'sentence-transformers', 'minilm-onnx', "
        "'model2vec' "
        f"(got {kind!r})"
    )
