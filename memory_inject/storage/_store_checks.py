"""The checks both persistent stores make before a write reaches their engine.

This module owns the rules ``SQLiteStore`` and ``PostgresStore`` (and the
other stores, where they apply) agree on: who owns a key
(:func:`refuse_owned`), what ``forget``'s scope arguments mean
(:func:`forget_scope`), a valid namespace, and every vector: float32-rounded
so a returned record equals what ``get`` reads back, NaN/inf and a wrong
shape or dimension refused (:func:`embed_checked` raises
:class:`~memory_inject.exceptions.EmbedderError`). :mod:`._base` re-exports
them.
"""

from __future__ import annotations

import builtins
import math
import secrets
import struct
from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs

from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.embedders import embedder_dim, embedder_name
from memory_inject.exceptions import EmbedderError, KeyOwnedError
from memory_inject.models import MemoryEntry
from memory_inject.storage.fusion import RecallInfo
from memory_inject.storage.records import MemoryRecord, is_text

__all__ = [
    "NO_SUCH_SESSION",
    "VectorEmbedder",
    "answer_of",
    "check_namespace",
    "embed_checked",
    "float32",
    "forget_scope",
    "given_vector",
    "matchable",
    "owned",
    "refuse_moves",
    "refuse_owned",
    "scope_keeps",
]


class VectorEmbedder(Protocol):
    """What a store needs of an embedder (``memory_inject.embedders.Embedder`` fits).

    ``dim`` is the vector length, ``name`` identifies the model, and ``embed``
    returns one vector per text.
    """

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


def refuse_owned(record: MemoryRecord | None, session_id: str | None, key: str, what: str) -> None:
    """:class:`KeyOwnedError` when ``record`` (the row under ``key``) is live and belongs to
    another scope than ``session_id``; a forgotten row belongs to no one any more."""
    if record is None or record.deleted_at is not None or record.session_id == session_id:
        return
    raise owned(key, what)


def refuse_moves(
    records: Sequence[MemoryRecord], what: str, lines: Sequence[int] | None = None
) -> None:
    """:class:`KeyOwnedError` when a record of one batch replaces an earlier live record of
    the same key in another scope: the table is checked against the batch's last record
    of each key, so a key written shared then into a session in one import was moved."""
    first: dict[str, MemoryRecord] = {}
    for i, record in enumerate(records):
        prior = first.get(record.key)
        if prior is not None and prior.deleted_at is None and prior.session_id != record.session_id:
            line = "" if lines is None else f" (line {lines[i]})"
            raise owned(record.key, f"{what}{line}")
        first[record.key] = record


def owned(key: str, what: str) -> KeyOwnedError:
    """The refusal of a write to ``key``, whose live row is another scope's."""
    return KeyOwnedError(
        f"{what}: the key {key!r:.80} belongs to another scope (another session, or the "
        "shared rows); nothing was written"
    )


def forget_scope(
    sessions: Iterable[str | None] | None, shared_sources: Iterable[str] | None
) -> tuple[builtins.list[str], bool, tuple[str, ...] | None] | None:
    """``forget``'s scope arguments, checked: the named sessions, whether shared rows may
    go, and the sources a shared row must have (None: any). None: any row (no limit)."""
    if sessions is None:
        return None
    if isinstance(sessions, str):
        raise TypeError("'sessions' must be an iterable of session ids, not a string")
    wanted = builtins.list(sessions)
    named = [s for s in wanted if s is not None]
    if not all(isinstance(s, str) for s in named):
        raise TypeError(f"'sessions' must hold strings or None (got {wanted!r:.80})")
    sources = None if shared_sources is None else tuple(str(x) for x in shared_sources)
    # An id no row can hold (a lone surrogate) names no row: left out, never sent.
    named = [s for s in named if is_text(s)]
    sources = None if sources is None else tuple(s for s in sources if is_text(s))
    return named, None in wanted, sources


def scope_keeps(
    record: MemoryRecord, scope: tuple[builtins.list[str], bool, tuple[str, ...] | None] | None
) -> bool:
    """Whether ``record`` is in ``scope`` (:func:`forget_scope`'s value, None: any row): of
    a named session, or shared when shared rows may go and, with sources, of one of them."""
    if scope is None:
        return True
    named, shared, sources = scope
    if record.session_id is not None:
        return record.session_id in named
    return shared and (sources is None or record.source in sources)


#: A session id no row holds, different in every process and never shown: what a
#: scope named by a value no row can hold (a lone surrogate) is asked as.
NO_SUCH_SESSION = f"\ufdd0no such session {secrets.token_hex(16)}"


def matchable(query: RecallQuery) -> RecallQuery | None:
    """``query`` with the values no row can hold (a lone surrogate) made harmless, or
    None when it asks for nothing else: such a value matches no row, and a store
    answers as for any value it has no rows of, rather than failing on its encoding.

    A session scope of such an id still sees the shared rows a scope sees; an entity
    or source query of one finds nothing; such statuses and profiles keep nothing.
    """
    if not (is_text(query.entity_id) and is_text(query.source)):
        return None
    if not is_text(query.session_id):
        query = attrs.evolve(query, session_id=NO_SUCH_SESSION)
    if query.statuses is not None and not all(map(is_text, query.statuses)):
        query = attrs.evolve(query, statuses=tuple(filter(is_text, query.statuses)))
    if query.profiles is not None and not all(map(is_text, query.profiles)):
        query = attrs.evolve(query, profiles=tuple(filter(is_text, query.profiles)))
    return query


def answer_of(entries: builtins.list[MemoryEntry], info: RecallInfo) -> RecallAnswer:
    """A store's ranked entries and how it found them, as the seam's answer value."""
    return RecallAnswer(
        entries,
        (info.degraded,) if info.degraded else (),
        info.strategy,
        info.keyword_hits,
        info.vector_hits,
        similarity=info.similarity,
    )


def float32(vector: Sequence[float]) -> tuple[float, ...]:
    """``vector`` rounded to float32, as both engines keep it (SQLite stores float32 blobs)."""
    return struct.unpack(f"<{len(vector)}f", struct.pack(f"<{len(vector)}f", *vector))


def given_vector(record: MemoryRecord) -> tuple[float, ...]:
    """The vector passed with a record, as float32: NaN, inf and float32 overflow are refused."""
    vector = record.embedding or ()
    try:
        out = float32(vector)
    except (OverflowError, struct.error):
        out = ()
    if len(out) != len(vector) or not all(math.isfinite(x) for x in out):
        bad = next((x for x in vector if not math.isfinite(x) or abs(x) > _FLOAT32_MAX), None)
        raise ValueError(
            f"'embedding' must hold finite float32 numbers (got {bad!r} in {record.key!r:.80})"
        )
    return out


_FLOAT32_MAX = 3.4028234663852886e38


def check_namespace(namespace: str) -> str:
    """``namespace`` if it is a non-empty string, else ``ValueError``."""
    if not isinstance(namespace, str) or not namespace:
        raise ValueError(f"'namespace' must be a non-empty string (got {namespace!r})")
    if not namespace.isascii():
        try:
            namespace.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"'namespace' holds a lone surrogate, which is not text (got {namespace!r})"
            ) from None
    return namespace


def embed_checked(
    embedder: VectorEmbedder, texts: Sequence[str]
) -> builtins.list[tuple[float, ...]]:
    """One checked float32 vector per text from ``embedder``, or :class:`EmbedderError`
    naming the embedder and what was wrong (it raised, a count, a shape, a dimension,
    NaN or inf)."""
    name = embedder_name(embedder)
    dim = embedder_dim(embedder)
    try:
        vectors = embedder.embed(list(texts))
    except EmbedderError:
        raise
    except Exception as exc:
        raise EmbedderError(f"embedder {name!r} raised: {exc}") from exc
    try:
        if len(vectors) != len(texts):
            raise EmbedderError(
                f"embedder {name!r} returned {len(vectors)} vectors for {len(texts)} texts"
            )
        out = [float32(v) for v in vectors]
    except EmbedderError:
        raise
    except OverflowError as exc:  # 1e39 is a finite float, and no float32
        raise EmbedderError(f"embedder {name!r} returned a value past float32's range") from exc
    except (struct.error, TypeError, ValueError) as exc:
        raise EmbedderError(
            f"embedder {name!r} returned something that is not a list of float vectors: {exc}"
        ) from exc
    for v in out:
        if dim is not None and len(v) != dim:
            raise EmbedderError(
                f"embedder {name!r} returned a vector of {len(v)} dimensions, not {dim}"
            )
        if not all(math.isfinite(x) for x in v):
            raise EmbedderError(f"embedder {name!r} returned a vector with NaN or inf")
    return out
