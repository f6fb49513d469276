"""Where memories live. Depends only on ``memory_inject.models`` and ``exceptions``."""

from memory_inject.storage.memory import InMemoryStore

__all__ = ["InMemoryStore"]
