"""``memory.backend``: where an agent's memories live, and the PostgreSQL pool.

Owns :class:`BackendConfig` (the engine, its file or DSN, the search mode,
the embedder, the fusion, what a missing or unopenable store does) and
:class:`PoolConfig`. Re-exported by ``memory_inject.config.schema``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import frozen

from memory_inject.config._constraints import check_class, group, loaded_values, setting

__all__ = ["BackendConfig", "PoolConfig", "check_backend"]


@frozen
class PoolConfig:
    """The PostgreSQL store's connection pool (``memory.backend.pool``), per process."""

    min_size: int = setting(1, "int", "connections kept open", ge=0, le=1000)
    max_size: int = setting(
        8, "int", "connections at most; turns beyond them wait, within the deadline", ge=1, le=1000
    )

    def __attrs_post_init__(self) -> None:
        if self.min_size > self.max_size:
            raise ValueError(
                f"'min_size' must be at most 'max_size' ({self.max_size}) (got {self.min_size})"
            )


def _check_pool(raw: Any, path: str) -> list[str]:
    """The pool group's keys, then ``min_size`` <= ``max_size`` when both are valid."""
    problems = check_class(PoolConfig, raw, path)
    if not isinstance(raw, Mapping):
        return problems
    bounds = loaded_values(PoolConfig, raw)
    lo, hi = bounds.get("min_size"), bounds.get("max_size")
    if lo is not None and hi is not None and lo > hi:
        problems.append(
            f"'min_size' must be at most 'max_size' ({hi}) (got {lo}) @ {path}.min_size"
        )
    return problems


@frozen
class BackendConfig:
    """Where the agent's memories live (``memory.backend``)."""

    kind: str = setting(
        "sqlite",
        "str",
        "sqlite, postgres, memory, markdown (human-readable files) or none (no memory)",
        choices=("sqlite", "postgres", "memory", "markdown", "none"),
    )
    path: str = setting(
        ".memory/memory.db",
        "str",
        "SQLite file, or the markdown folder (the default: .memory), relative to the agent file",
        nonempty=True,
    )
    dsn: str | None = setting(None, "str", "PostgreSQL connection string", nullable=True)
    namespace: str = setting("default", "str", "namespace inside the store", nonempty=True)
    search_mode: str = setting(
        "hybrid", "str", "bm25, embedding or hybrid", choices=("bm25", "embedding", "hybrid")
    )
    embedder: str = setting(
        "none",
        "str",
        "none, hashing, sentence-transformers, minilm-onnx or model2vec",
        choices=("none", "hashing", "sentence-transformers", "minilm-onnx", "model2vec"),
    )
    embedder_model: str | None = setting(None, "str", "model name or local path", nullable=True)
    fusion: str = setting(
        "auto",
        "str",
        "auto (the embedder's: minmax 0.5/0.5 for a model, max for hashing), "
        "weighted (zeroclaw), rrf, minmax or max",
        choices=("auto", "weighted", "rrf", "minmax", "max"),
    )
    vector_weight: float = setting(
        0.7, "float", "a named weighted, rrf or minmax fusion: vector weight", ge=0, le=1
    )
    keyword_weight: float = setting(
        0.3, "float", "a named weighted, rrf or minmax fusion: keyword weight", ge=0, le=1
    )
    rrf_k: int = setting(60, "int", "reciprocal-rank fusion constant", ge=1, le=100_000)
    readers: int | None = setting(
        None,
        "int",
        "SQLite: read connections per store, used side by side (null: one per core, 2 to 8)",
        ge=1,
        le=64,
        nullable=True,
    )
    vector_index: str = setting(
        "auto",
        "str",
        "SQLite: auto (an HNSW graph past 50k embedded rows when the ann extra is installed, "
        "saved next to the database file), memory (the same graph, never saved) "
        "or exact (always scan the vectors)",
        choices=("auto", "memory", "exact"),
    )
    recall_in_place: bool = setting(
        False,
        "bool",
        "SQLite without an embedder: run recalls on the turn's thread, not a recall thread "
        "(about half a small store's render; SQLite still stops them at the deadline, but "
        "another process's WAL recovery or a hung file system can hold the turn past it)",
    )
    pool: PoolConfig = group(PoolConfig, check=_check_pool)
    missing: str = setting(
        "create",
        "str",
        "a SQLite file that does not exist: create it, degrade (no memory, a status) or error",
        choices=("create", "degrade", "error"),
    )
    unavailable: str = setting(
        "raise",
        "str",
        "a store that cannot be opened (corrupt, locked, unreachable): raise, or degrade",
        choices=("raise", "degrade"),
    )
    open_timeout_ms: int | None = setting(
        None,
        "int",
        "SQLite: how long opening waits for another process's lock on the file (null: 60 s "
        "with unavailable: raise, for another process's schema upgrade; 2 s with degrade)",
        ge=0,
        le=3_600_000,
        nullable=True,
    )


def _dsn_problem(dsn: str) -> str | None:
    """What libpq finds wrong with ``dsn`` (None without the ``postgres`` extra: the store
    says so when it opens)."""
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return None
    try:
        conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def check_backend(raw: Any, path: str) -> list[str]:
    """The backend group's keys, then what ``open_store`` would refuse: ``kind: postgres``
    without a ``dsn``, and a ``path`` holding a NUL character (``validate`` said "ok" to
    both, and the agent failed when it opened its store); and what it would ignore: a
    ``dsn`` for a kind that is not postgres, a ``path`` for postgres.

    The checks that compare keys run beside the keys' own problems, on the keys that
    have none (:func:`loaded_values`), so a file's every problem is reported at once.
    """
    problems = check_class(BackendConfig, raw, path)
    if not isinstance(raw, Mapping):
        return problems
    v = loaded_values(BackendConfig, raw)
    before = len(problems)
    if v.get("kind") == "postgres" and "dsn" in v and not (v["dsn"] or "").strip():
        got = "null" if v["dsn"] is None else repr(v["dsn"])
        problems.append(f"'dsn' must be set when 'kind' is postgres (got {got}) @ {path}.dsn")
    elif isinstance(v.get("dsn"), str) and (bad := _dsn_problem(v["dsn"])) is not None:
        problems.append(f"'dsn' is not a PostgreSQL connection string: {bad} @ {path}.dsn")
    kind = v.get("kind")
    dsn_ok = len(problems) == before  # a dsn with a problem of its own is reported once
    if (
        kind in ("sqlite", "markdown", "memory")
        and isinstance(v.get("dsn"), str)
        and v["dsn"]
        and dsn_ok
    ):
        # The operator moving an agent to the shared server forgot the kind: the agent
        # would keep a file of its own on each host and nothing would reach the server.
        problems.append(
            f"'dsn' is read only when 'kind' is postgres (kind is {kind}): set 'kind: "
            f"postgres', or remove the dsn @ {path}.dsn"
        )
    if kind == "postgres" and "path" in raw and "path" in v:  # a bad path is reported once
        problems.append(
            f"'path' is not read when 'kind' is postgres (the rows live on the server named "
            f"by 'dsn'): remove it @ {path}.path"
        )
    where = v.get("path")
    if isinstance(where, str) and "\0" in where:
        problems.append(f"'path' must not hold a NUL character (got {where!r:.60}) @ {path}.path")
    model = v.get("embedder_model", False)  # False: the key has a problem of its own
    if v.get("embedder") == "model2vec" and (model is None or str(model).strip() == ""):
        problems.append(
            "'embedder_model' must name a local model2vec path when 'embedder' is model2vec "
            f"(got {'null' if model is None else repr(model)}) @ {path}.embedder_model"
        )
    if v.get("embedder") == "hashing" and model:
        problems.append(
            "'embedder_model' must be null when 'embedder' is hashing, which has no model "
            f"(got {model!r:.60}) @ {path}.embedder_model"
        )
    vector, keyword = v.get("vector_weight"), v.get("keyword_weight")
    named = v.get("fusion") not in (None, "auto")
    if named and vector is not None and keyword is not None and vector + keyword <= 0.0:
        problems.append(
            f"'vector_weight' + 'keyword_weight' must be > 0 when 'fusion' is "
            f"{v['fusion']} (got {raw.get('vector_weight', vector)} + "
            f"{raw.get('keyword_weight', keyword)}) @ {path}.vector_weight"
        )
    return problems
