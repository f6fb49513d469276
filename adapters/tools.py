"""Remembering on purpose: ``remember`` for hosts, store / recall / forget tools for the model.

Autosave keeps raw user messages for search and is never re-injected
(``user_msg_*``); these are the write paths whose rows ARE injected in later
turns. Both stamp a row the way the adapters do: the session scope it belongs
to, and the governance profile the render will compare against (resolved
with the turn's origin, so per-origin YAML applies).

The tool core is framework-neutral. A :class:`MemoryTool` is a name, a
description and a JSON schema; :class:`MemoryTools` holds them with the turn
they act for and runs a call (:meth:`MemoryTools.call` / :meth:`~MemoryTools.acall`,
arguments as a JSON string or a mapping, the result as text for the model,
never raising). ``openai()``, ``responses()`` and ``anthropic()`` give each
SDK's tool definitions; a framework adapter wraps :attr:`MemoryTools.tools`
and :meth:`MemoryTools.call` in its own tool type::

    tools = memory_tools(store, agent, sessions=["cli_main"])
    client.chat.completions.create(model=..., messages=..., tools=tools.openai())
    ...
    for call in reply.tool_calls or []:
        if tools.handles(call.function.name):
            text = tools.call(call.function.name, call.function.arguments)

What the model writes is untrusted (docs/adapters.md, "What the model sends
is untrusted"): content is capped and a rendered block refused; categories
stay within the schema's (or the host's list); keys shaped like the
conversation log's (``user_msg_...``, ``channel:chat:...``), and memories the render's
skip rules would always leave out (``USER_MSG_1``, ``tz_history``), are refused; a
key held by another scope is refused by the store (``KeyOwnedError``); shared
rows are the host's (the tools write and forget them only with
``shared_writes=True``, and never a curated one, written by anything but the
tools, without ``curated_writes=True``); ``memory_forget`` is one statement
limited to the tools' own scopes, and also sees only rows of their profile
(with governance on); a row outside them answers like a missing one. Every
refusal is one line for the model, and leaves the store unchanged.

This module owns the tools bound to a turn (:class:`MemoryTools`); the write
path ``remember`` shares with them is in :mod:`._remember`, the tools'
definitions and limits in :mod:`._tool_schema` (both public from here), and
what the turn lets them see and change (forget, who owns a row) in
:mod:`._tool_scope`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, overload

from memory_inject._workers import in_worker
from memory_inject.config import AgentConfig
from memory_inject.contract import Memory, SupportsAsyncWrite
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.pipeline import RenderResult, arender_memory_context, render_memory_context

from . import _core
from ._base import check_store
from ._remember import (
    Remembered,
    RememberOptions,
    aremember,
    memory_key,
    remember,
    sync_store,
    write_args,
)
from ._tool_schema import (
    CATEGORIES,
    FORGET,
    MAX_TOOL_CONTENT,
    RECALL,
    SHARED_REFUSED,
    STORE,
    TOOL_SOURCES,
    TOOLS,
    MemoryTool,
    refuse_unshown,
)
from ._tool_scope import ToolScope

if TYPE_CHECKING:  # the SDKs are optional extras; only their types are named here
    from anthropic.types import ToolParam
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

__all__ = [
    "MAX_TOOL_CONTENT",
    "TOOL_SOURCES",
    "MemoryTool",
    "MemoryTools",
    "RememberOptions",
    "Remembered",
    "ToolOptions",
    "aremember",
    "memory_key",
    "memory_tools",
    "remember",
]

_log = logging.getLogger("memory_inject.adapters")


# -- the tools -------------------------------------------------------------------


class ToolOptions(TypedDict, total=False):
    """The keyword options of :func:`memory_tools` (and :class:`MemoryTools`)."""

    #: The turn's session scopes: writes go to the first, recall and forget see them all
    #: (None: no session, as for a render).
    sessions: Iterable[str | None] | None
    #: The turn's origin (default ``interactive``): its policy shapes recall, and when it
    #: gives the origin no memory (``enabled: false``) every call is refused.
    origin: TurnOrigin | str
    #: The working directory the governance profile is resolved from.
    cwd: str | os.PathLike[str] | None
    #: Which tools to bind (default all three: store, recall, forget).
    names: Iterable[str]
    #: Stamped on the recall tool's events (default: a fresh id per call).
    turn_id: str | None
    #: Let the model write and forget shared rows (sessionless tools write shared rows).
    shared_writes: bool
    #: With ``shared_writes``, let it replace and forget curated shared rows too (rows
    #: written by anything but the tools: the host's ``store()``, the CLI, an import).
    curated_writes: bool
    #: The categories the model may write (default the schema's: core, daily, conversation).
    categories: Iterable[str]


class MemoryTools(ToolScope, Sequence[MemoryTool]):
    """The memory tools bound to one store, agent and turn (sessions, origin).

    Writes go to the first session scope (None when sessionless), stamped like
    :func:`remember` with ``source="tool"``; recall is a render of the turn's
    origin over the same scopes (its own ``memory_recall`` event); forget sees
    only rows of those scopes. ``names`` picks a subset (e.g. no forget).
    """

    def __init__(
        self, store: Memory, agent: AgentConfig | None = None, **options: Unpack[ToolOptions]
    ) -> None:
        """Bind the tools (:class:`ToolOptions`); a wrong store or an unknown tool name is a
        ``TypeError`` / ``ValueError`` here, not a failing call later."""
        check_store(store, "memory_tools")
        picked = tuple(options.get("names", (STORE, RECALL, FORGET)))
        unknown = [n for n in picked if n not in TOOLS]
        if unknown:
            raise ValueError(f"'names' must be among {tuple(TOOLS)} (got {unknown!r})")
        super().__init__(
            store,
            agent,
            sessions=options.get("sessions"),
            origin=options.get("origin", TurnOrigin.INTERACTIVE),
            cwd=options.get("cwd"),
            shared_writes=options.get("shared_writes", False),
            curated_writes=options.get("curated_writes", False),
        )
        self.turn_id = options.get("turn_id")
        cats = options.get("categories", CATEGORIES)
        if isinstance(cats, str) or not all(isinstance(c, str) and c for c in cats):
            raise ValueError(f"'categories' must be a list of category names (got {cats!r:.80})")
        self.categories = tuple(cats)
        self.tools: tuple[MemoryTool, ...] = tuple(TOOLS[n] for n in picked)

    @overload
    def __getitem__(self, index: int) -> MemoryTool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[MemoryTool]: ...
    def __getitem__(self, index: int | slice) -> MemoryTool | Sequence[MemoryTool]:
        """The tools, in order (store, recall, forget)."""
        return self.tools[index]

    def __len__(self) -> int:
        """How many tools are bound."""
        return len(self.tools)

    def __iter__(self) -> Iterator[MemoryTool]:
        """The tools, in order."""
        return iter(self.tools)

    def handles(self, name: str) -> bool:
        """True when ``name`` is one of these tools (route the model's call here)."""
        return any(t.name == name for t in self.tools)

    # -- each SDK's definitions ----------------------------------------------------

    def openai(self) -> list[ChatCompletionToolParam]:
        """Chat Completions ``tools=`` (``ChatCompletionToolParam``)."""
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in self.tools
        ]

    def responses(self) -> list[FunctionToolParam]:
        """Responses API ``tools=`` (``FunctionToolParam``)."""
        return [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
                "strict": False,
            }
            for t in self.tools
        ]

    def anthropic(self) -> list[ToolParam]:
        """Anthropic Messages ``tools=`` (``ToolParam``)."""
        return [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in self.tools
        ]

    # -- running a call --------------------------------------------------------------

    def _args(self, name: str, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        if not self.handles(name):
            raise ValueError(f"unknown tool {name!r}; these are {[t.name for t in self.tools]}")
        if name != RECALL:  # memory off for the origin: no write, as no recall (which skips)
            self.refuse_when_off("stored" if name == STORE else "forgotten")
        if arguments is None or arguments == "":
            return {}
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str | bytes) else arguments
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments must be a JSON object ({exc})") from None
        if not isinstance(parsed, Mapping):
            raise ValueError(f"the arguments must be a JSON object (got {type(parsed).__name__})")
        allowed = set(TOOLS[name].parameters["properties"])
        extra = sorted(set(parsed) - allowed)
        if extra:
            raise ValueError(f"unknown argument(s) {extra}; {name} takes {sorted(allowed)}")
        return dict(parsed)

    def _store_args(self, args: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        content = args.get("content")
        if isinstance(content, str) and len(content) > MAX_TOOL_CONTENT:
            raise ValueError(f"'content' must be at most {MAX_TOOL_CONTENT} characters")
        session = next((s for s in self.sessions if s is not None), None)
        text, key, fields = write_args(
            self.store,
            self.agent,
            content,
            args.get("key"),
            args.get("category", "core"),
            session,
            self.origin,
            self.cwd,
            {"source": TOOL_SOURCES[0]},
        )
        category = fields["category"]
        if category not in self.categories:
            allowed = list(self.categories)
            raise ValueError(f"'category' must be one of {allowed} (got {category!r:.40})")
        config = self.policy().config
        refuse_unshown(key, text, "key" in args, config)
        if session is None and not self.shared_writes:
            raise ValueError(SHARED_REFUSED)
        return text, key, fields

    def _render_args(self, query: object) -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("'query' must be a non-empty string")
        policy = self.policy()
        alias = self.agent.agent if self.agent is not None else None
        turn = TurnMeta("tool", alias, self.turn_id or _core.new_turn_id())
        return {"policy": policy, "sessions": self.sessions, "turn": turn, "cwd": self.cwd}

    def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """Run one tool call; the text for the model. Never raises: a bad call or a failing
        store is answered with ``Error: ...`` (and logged when the store failed)."""
        try:
            args = self._args(name, arguments)
            if name == STORE:
                text, key, fields = self._store_args(args)
                self._may_replace(key, fields.get("session_id"), "key" in args)
                sync_store(self.store, key, text, fields)
                return f"Remembered as {key!r}."
            if name == RECALL:
                kw = self._render_args(args.get("query"))
                return _recalled(render_memory_context(self.store, args["query"], **kw))
            return self._forget(args.get("key"))
        except (ValueError, TypeError) as exc:
            return f"Error: {exc}"
        except Exception as exc:  # noqa: BLE001 - memory never fails the turn
            _log.warning("memory_inject: tool %s failed", name, exc_info=exc)
            return f"Error: memory failed ({type(exc).__name__})"

    async def acall(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """The async twin of :meth:`call`."""
        try:
            args = self._args(name, arguments)
            if name == STORE:
                text, key, fields = self._store_args(args)
                await in_worker(self._may_replace, key, fields.get("session_id"), "key" in args)
                if isinstance(self.store, SupportsAsyncWrite):
                    await self.store.astore(key, text, **fields)
                else:
                    await in_worker(sync_store, self.store, key, text, fields)
                return f"Remembered as {key!r}."
            if name == RECALL:
                kw = self._render_args(args.get("query"))
                return _recalled(await arender_memory_context(self.store, args["query"], **kw))
            return await in_worker(self._forget, args.get("key"))
        except (ValueError, TypeError) as exc:
            return f"Error: {exc}"
        except Exception as exc:  # noqa: BLE001 - memory never fails the turn
            _log.warning("memory_inject: tool %s failed", name, exc_info=exc)
            return f"Error: memory failed ({type(exc).__name__})"


def _recalled(result: RenderResult) -> str:
    if result.text:
        return result.text
    if getattr(result.event, "success", True) is False:  # the recall failed: not "no match"
        _log.warning(
            "memory_inject: memory_recall failed: %s", getattr(result.event, "error", None)
        )
        return "Error: memory failed (the recall did not complete: nothing was searched)"
    reason = getattr(result.event, "reason", None) or getattr(result.event, "abstained", None)
    return "No memories matched." + (f" ({reason})" if reason else "")


def memory_tools(
    store: Memory, agent: AgentConfig | None = None, **options: Unpack[ToolOptions]
) -> MemoryTools:
    """The memory tools for one turn (see :class:`MemoryTools` and :class:`ToolOptions`)."""
    return MemoryTools(store, agent, **options)
