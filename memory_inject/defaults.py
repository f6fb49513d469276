"""zeroclaw's named constants (spec section 4), as the default configuration resolves them.

Each value is read from ``MemoryInjectConfig()`` (or the bound it is checked
against), never written twice, so a constant cannot drift from what a
default render does. The four of zeroclaw's ``memory_inject`` module
(``DEFAULT_RECALL_LIMIT``, ``DEFAULT_MAX_ENTRIES``, ``DEFAULT_ENTRY_MAX_CHARS``,
``DEFAULT_MAX_TOTAL_CHARS``) are also exported by the package root.

Two groups belong to the stores and live there, because the core does not
import storage: heuristic importance
(:mod:`memory_inject.storage.importance`: ``IMPORTANCE_BY_CATEGORY``,
``CUSTOM_IMPORTANCE``, ``HIGH_SIGNAL_KEYWORDS``, ``KEYWORD_BONUS``,
``MAX_KEYWORD_BONUS``) and the hot cache (:mod:`memory_inject.storage.hot_cache`:
``HOT_CACHE_SIZE``, ``HOT_CACHE_TTL_S``).
"""

from __future__ import annotations

import attrs

from memory_inject.config import MAX_CANDIDATE_POOL, MemoryInjectConfig, RerankConfig
from memory_inject.render import MEMORY_CONTEXT_CLOSE, MEMORY_CONTEXT_OPEN

__all__ = [
    "DEFAULT_CANDIDATE_MULTIPLIER",
    "DEFAULT_DEADLINE_MS",
    "DEFAULT_ENTRY_MAX_CHARS",
    "DEFAULT_HALF_LIFE_DAYS",
    "DEFAULT_IMPORTANCE_WEIGHT",
    "DEFAULT_KEYWORD_WEIGHT",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_TOTAL_CHARS",
    "DEFAULT_MIN_RELEVANCE_SCORE",
    "DEFAULT_MMR_LAMBDA",
    "DEFAULT_NEAR_DUPLICATE_THRESHOLD",
    "DEFAULT_RECALL_LIMIT",
    "DEFAULT_RECENCY_WEIGHT",
    "DEFAULT_RERANK_THRESHOLD",
    "DEFAULT_RETRIEVAL_STAGES",
    "DEFAULT_VECTOR_WEIGHT",
    "MAX_CANDIDATE_POOL",
    "MAX_MEMORY_RERANK_CANDIDATE_MULTIPLIER",
    "MEMORY_CONTEXT_CLOSE",
    "MEMORY_CONTEXT_OPEN",
]

_DEFAULT = MemoryInjectConfig()

#: Entries asked of the store per session scope (zeroclaw: 5).
DEFAULT_RECALL_LIMIT: int = _DEFAULT.recall_limit
#: Most entries rendered (zeroclaw: 4).
DEFAULT_MAX_ENTRIES: int = _DEFAULT.budget.max_entries
#: Characters of one entry's content before it is cut with ``...`` (zeroclaw: 800).
DEFAULT_ENTRY_MAX_CHARS: int = _DEFAULT.budget.entry_max_chars
#: Characters of all entry lines together (zeroclaw: 4000).
DEFAULT_MAX_TOTAL_CHARS: int = _DEFAULT.budget.max_total_chars
#: The relevance floor, ``memory.min_relevance_score`` (zeroclaw's config default: 0.4).
DEFAULT_MIN_RELEVANCE_SCORE: float = _DEFAULT.min_relevance_score
#: Half-life of the decay arm and of the rerank blend's recency, days (``decay::``: 7.0).
DEFAULT_HALF_LIFE_DAYS: float = _DEFAULT.decay.half_life_days
#: Bigram-shingle Jaccard at which two entries collapse (``rerank::``: 0.92).
DEFAULT_NEAR_DUPLICATE_THRESHOLD: float = _DEFAULT.rerank.near_duplicate_threshold
#: The rerank blend's importance weight (``rerank::``: 0.2).
DEFAULT_IMPORTANCE_WEIGHT: float = _DEFAULT.rerank.importance_weight
#: The rerank blend's recency weight (``rerank::``: 0.1).
DEFAULT_RECENCY_WEIGHT: float = _DEFAULT.rerank.recency_weight
#: MMR's relevance-versus-diversity balance (``memory.mmr_lambda``: 0.7).
DEFAULT_MMR_LAMBDA: float = _DEFAULT.rerank.mmr_lambda
#: Fewest candidates for the rerank strategy to run (``memory.rerank_threshold``: 5).
DEFAULT_RERANK_THRESHOLD: int = _DEFAULT.rerank.threshold
#: The rerank arm's over-fetch factor (``memory.candidate_multiplier``: 4).
DEFAULT_CANDIDATE_MULTIPLIER: int = _DEFAULT.rerank.candidate_multiplier
#: The largest over-fetch factor accepted (``MAX_MEMORY_RERANK_CANDIDATE_MULTIPLIER``: 20).
MAX_MEMORY_RERANK_CANDIDATE_MULTIPLIER: int = attrs.fields(
    RerankConfig
).candidate_multiplier.metadata["le"]
#: Weighted fusion's vector weight (``memory.vector_weight``: 0.7).
DEFAULT_VECTOR_WEIGHT: float = _DEFAULT.backend.vector_weight
#: Weighted fusion's keyword weight (``memory.keyword_weight``: 0.3).
DEFAULT_KEYWORD_WEIGHT: float = _DEFAULT.backend.keyword_weight
#: ``memory.retrieval_stages`` (zeroclaw: ``["fts", "vector"]``; ``"cache"`` adds the hot cache).
DEFAULT_RETRIEVAL_STAGES: tuple[str, ...] = _DEFAULT.retrieval_stages
#: The per-turn recall deadline, milliseconds (ours: zeroclaw has none).
DEFAULT_DEADLINE_MS: int | None = _DEFAULT.deadline_ms
