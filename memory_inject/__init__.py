"""memory-inject: decide, on every agent turn, whether to give the model its memory and what.

One policy keyed on who started the turn (:func:`resolve_inject_policy`) and
one pipeline that recalls, filters, budgets and renders the block
(:func:`render_memory_context`, or :func:`render_turn` with the turn's inputs
as one :class:`TurnInput`), announcing each render on
:data:`memory_inject.signals.memory_recall` (a skipped turn on ``memory_skipped``).
``__all__`` is the README quickstart's vocabulary: ``open_store(agent)`` opens the
store an agent file names (``SQLiteStore`` by default).
"""

from memory_inject.config import (
    AgentConfig,
    BackendConfig,
    BudgetConfig,
    DecayConfig,
    MemoryInjectConfig,
    RerankConfig,
    load_agent_config,
)
from memory_inject.contract import AsyncMemory, Memory
from memory_inject.defaults import (
    DEFAULT_ENTRY_MAX_CHARS,
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MAX_TOTAL_CHARS,
    DEFAULT_RECALL_LIMIT,
)
from memory_inject.exceptions import ConfigError, MemoryInjectError, StorageError
from memory_inject.models import MemoryCategory, MemoryEntry, MemoryKind, TurnMeta, TurnOrigin
from memory_inject.pipeline import (
    RenderResult,
    TurnInput,
    arender_memory_context,
    arender_turn,
    render_memory_context,
    render_turn,
)
from memory_inject.policy import InjectPolicy, resolve_inject_policy
from memory_inject.render import MEMORY_CONTEXT_CLOSE, MEMORY_CONTEXT_OPEN
from memory_inject.signals import MemoryRecall, MemorySkipped, memory_recall, memory_skipped
from memory_inject.stages import StageTrace
from memory_inject.storage.importance import heuristic_importance
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.stores import open_store

__all__ = [
    "AgentConfig",
    "AsyncMemory",
    "BackendConfig",
    "BudgetConfig",
    "ConfigError",
    "DEFAULT_ENTRY_MAX_CHARS",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_TOTAL_CHARS",
    "DEFAULT_RECALL_LIMIT",
    "DecayConfig",
    "InMemoryStore",
    "InjectPolicy",
    "MEMORY_CONTEXT_CLOSE",
    "MEMORY_CONTEXT_OPEN",
    "Memory",
    "MemoryCategory",
    "MemoryEntry",
    "MemoryInjectConfig",
    "MemoryInjectError",
    "MemoryKind",
    "MemoryRecall",
    "MemorySkipped",
    "RenderResult",
    "RerankConfig",
    "SQLiteStore",
    "StageTrace",
    "StorageError",
    "TurnInput",
    "TurnMeta",
    "TurnOrigin",
    "arender_memory_context",
    "arender_turn",
    "heuristic_importance",
    "load_agent_config",
    "memory_recall",
    "memory_skipped",
    "open_store",
    "render_memory_context",
    "render_turn",
    "resolve_inject_policy",
]

__version__ = "0.1.0"
