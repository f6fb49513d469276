"""Entry-point adapters: each maps its host's event to origin, query, session scopes and
suppress, then calls the core. No policy lives here.

Imported as ``memory_inject.adapters`` (the ``adapters/`` folder is mapped there by
``package-dir``; see ``adapters/README.md``).
"""

from ._core import Injection, should_autosave
from .agent_direct import AgentDirectAdapter, DirectTurn
from .anthropic_client import wrap_anthropic
from .channel import ChannelAdapter, ChannelTurn, InboundMessage, is_group_chat, session_scopes
from .cron import CronAdapter, CronJob, CronTurn, cron_query, load_cron_jobs
from .daemon import DaemonAdapter, DaemonTurn, heartbeat_query
from .loop import LoopInjection, LoopTurn, MemoryLoop, current_turn
from .messages import has_block, inject_block, message_text, user_message_index
from .observability import (
    LoggingBridge,
    OpenTelemetryBridge,
    PrometheusBridge,
    event_fields,
    skip_fields,
)
from .openai_client import wrap_openai
from .tools import MemoryTools, Remembered, aremember, memory_tools, remember

__all__ = [
    "AgentDirectAdapter",
    "ChannelAdapter",
    "ChannelTurn",
    "CronAdapter",
    "CronJob",
    "CronTurn",
    "DaemonAdapter",
    "DaemonTurn",
    "DirectTurn",
    "InboundMessage",
    "Injection",
    "LoggingBridge",
    "LoopInjection",
    "LoopTurn",
    "MemoryLoop",
    "MemoryTools",
    "OpenTelemetryBridge",
    "PrometheusBridge",
    "Remembered",
    "aremember",
    "cron_query",
    "current_turn",
    "event_fields",
    "has_block",
    "heartbeat_query",
    "inject_block",
    "is_group_chat",
    "load_cron_jobs",
    "memory_tools",
    "message_text",
    "remember",
    "session_scopes",
    "should_autosave",
    "skip_fields",
    "user_message_index",
    "wrap_anthropic",
    "wrap_openai",
]
