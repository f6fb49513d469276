"""open_store (memory_inject/stores.py): the store an agent file's memory.backend names."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict, Unpack

import pytest

from memory_inject import open_store
from memory_inject.config import AgentConfig, BackendConfig, MemoryInjectConfig
from memory_inject.exceptions import EmbedderError
from memory_inject.storage import InMemoryStore, SQLiteStore


class _Backend(TypedDict, total=False):
    """The keys of memory.backend (BackendConfig's fields)."""

    kind: str
    path: str
    dsn: str | None
    namespace: str
    search_mode: str
    embedder: str
    embedder_model: str | None
    fusion: str
    vector_weight: float
    keyword_weight: float
    rrf_k: int


def agent(**backend: Unpack[_Backend]) -> AgentConfig:
    """An agent whose memory.backend has the given keys."""
    return AgentConfig(agent="a", memory=MemoryInjectConfig(backend=BackendConfig(**backend)))


class TestOpenStore:
    def test_default_is_sqlite_under_base_dir(self, tmp_path: Path) -> None:
        """With no backend section, SQLite opens at .memory/memory.db relative to base_dir."""
        store = open_store(AgentConfig(agent="a"), tmp_path)
        assert isinstance(store, SQLiteStore)
        try:
            assert str(tmp_path / ".memory" / "memory.db") == store.path
            assert "default" == store.namespace
        finally:
            store.close()

    def test_absolute_path_and_namespace_are_kept(self, tmp_path: Path) -> None:
        """An absolute path ignores base_dir; the namespace is the backend's."""
        db = tmp_path / "abs.db"
        store = open_store(agent(path=str(db), namespace="ops"), base_dir=tmp_path / "elsewhere")
        assert isinstance(store, SQLiteStore)
        try:
            assert (str(db), "ops") == (store.path, store.namespace)
        finally:
            store.close()

    def test_memory_backend(self) -> None:
        """kind memory gives an InMemoryStore."""
        assert isinstance(open_store(agent(kind="memory")), InMemoryStore)

    def test_postgres_without_dsn_is_a_value_error(self) -> None:
        """kind postgres needs a dsn, and says so."""
        with pytest.raises(ValueError, match=r"'dsn' must be set for the postgres backend"):
            open_store(agent(kind="postgres"))

    def test_an_embedder_that_cannot_load_is_an_embedder_error(self) -> None:
        """A model2vec embedder pointing at no model fails when the store is opened."""
        with pytest.raises(EmbedderError):
            open_store(agent(embedder="model2vec", embedder_model="/no/such/model"))
