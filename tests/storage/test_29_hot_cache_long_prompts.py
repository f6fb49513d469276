"""The hot cache keeps no answer to a pasted page (twenty-ninth round).

Each answer is filed under its query's text. A helper pasted 300 distinct 1.4 MB
prompts: the cache held 256 of them, 352 MB against 20 MB without it, for prompts no
turn asks twice. A query over ``HOT_CACHE_MAX_QUERY_CHARS`` is answered by the store
and never kept; a short one is kept as before.
"""

from __future__ import annotations

from pathlib import Path

from memory_inject.contract import RecallQuery
from memory_inject.storage import SQLiteStore
from memory_inject.storage.hot_cache import HOT_CACHE_MAX_QUERY_CHARS, HotCacheStore


def test_a_long_query_is_answered_and_not_kept(tmp_path: Path) -> None:
    inner = SQLiteStore(tmp_path / "m.db")
    inner.store("deploy", "Production deploys go to prod-3.")
    cache = HotCacheStore(inner)
    long = "where do production deploys go? " + "x" * HOT_CACHE_MAX_QUERY_CHARS
    for _ in range(2):
        assert ["deploy"] == [e.key for e in cache.answer(RecallQuery(long, 5)).entries]
    info = cache.cache_info()
    assert (0, 0, 0) == (info.hits, info.misses, info.size)
    for _ in range(2):
        assert ["deploy"] == [
            e.key for e in cache.answer(RecallQuery("production deploys", 5)).entries
        ]
    info = cache.cache_info()
    assert (1, 1, 1) == (info.hits, info.misses, info.size)
    inner.close()
