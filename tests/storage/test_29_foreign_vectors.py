"""A scope whose vectors are all another model's says so (twenty-eighth round).

Found by a helper: a SQLite store reopened with an embedder of another size searched by
keyword only, silently (``prompt_similarity`` None, nothing degraded). The event now
names the rows, and ``embed_missing()`` (which embeds them again) ends it.
"""

from __future__ import annotations

from pathlib import Path

from memory_inject import MemoryRecall, render_memory_context
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.sqlite import SQLiteStore


def test_another_models_vectors_are_named_until_embedded_again(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path, embedder=HashingEmbedder(256)) as old:
        for i in range(5):
            old.store(f"k{i}", f"fact {i} about my dog Biscuit")
    with SQLiteStore(path, embedder=HashingEmbedder(64)) as store:
        result = render_memory_context(store, "tell me about my dog Biscuit")
        event = result.event
        assert isinstance(event, MemoryRecall)
        assert result.entries  # the keyword hits still come
        assert any(d.startswith("foreign_vectors: 5 rows") for d in event.degraded)
        assert 5 == store.embed_missing()
        again = render_memory_context(store, "tell me about my dog Biscuit").event
        assert isinstance(again, MemoryRecall)
        assert not any("foreign_vectors" in d for d in again.degraded)


def test_an_empty_scope_says_nothing(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder(64)) as store:
        store.store("k", "my dog is called Biscuit", session_id="a")
        event = render_memory_context(store, "tell me about my dog Biscuit", sessions=["b"]).event
        assert isinstance(event, MemoryRecall)
        assert () == event.degraded
