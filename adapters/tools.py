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
conversation log's (``user_msg_...``, ``channel:chat:...``) are refused; a
key held by another scope is refused by the store (``KeyOwnedError``); shared
rows are the host's (the tools write and forget them only with
``shared_writes=True``, and never a curated one, written by anything but the
tools, without ``curated_writes=True``); ``memory_forget`` is one statement
limited to the tools' own scopes, and also sees only rows of their profile
(with governance on); a row outside them answers like a missing one. Every
refusal is one line for the model, and leaves the store unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, overload

from attrs import frozen

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory, SupportsAsyncWrite, SupportsWrite
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.pipeline import RenderResult, arender_memory_context, render_memory_context
from memory_inject.policy import InjectPolicy, has_session, resolve_inject_policy

from . import _core
from ._base import check_store
from .messages import starts_with_block

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

#: The longest text the ``memory_store`` tool writes (a fact, not a transcript).
MAX_TOOL_CONTENT = 2000
_MAX_KEY = 200
STORE, RECALL, FORGET = "memory_store", "memory_recall", "memory_forget"
_CATEGORIES = ("core", "daily", "conversation")


@frozen
class MemoryTool:
    """One tool: its name, what the model is told, and its arguments' JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


_TOOLS: dict[str, MemoryTool] = {
    STORE: MemoryTool(
        STORE,
        "Remember a fact for later conversations. Use one self-contained sentence; "
        "storing the same key again replaces it.",
        _object(
            {
                "content": {"type": "string", "description": "The fact, as one sentence."},
                "key": {"type": "string", "description": "A short snake_case name (optional)."},
                "category": {"type": "string", "enum": list(_CATEGORIES)},
            },
            ["content"],
        ),
    ),
    RECALL: MemoryTool(
        RECALL,
        "Search long-term memory for facts relevant to a question.",
        _object({"query": {"type": "string", "description": "What to look for."}}, ["query"]),
    ),
    FORGET: MemoryTool(
        FORGET,
        "Forget a remembered fact by its key (shown before each fact as 'key:').",
        _object({"key": {"type": "string", "description": "The key to forget."}}, ["key"]),
    ),
}


def memory_key(content: str, scope: str | None = None) -> str:
    """A key derived from the text within its scope, so remembering the same fact twice in
    one scope updates one row, and the same fact in two sessions is two rows.

    A shared row's (``scope`` None) is the key earlier versions derived for every
    scope, so existing shared ``mem_*`` rows keep theirs.
    """
    text = " ".join(content.split()).lower()
    if scope is not None:
        text = f"{scope}\x1f{text}"
    return f"mem_{hashlib.sha256(text.encode()).hexdigest()[:16]}"


#: Sources the memory tools stamp: a shared row with another one is curated (the host's).
TOOL_SOURCES = ("tool",)
_RESERVED = re.compile(r"^user_msg(_|$)|:|[\x00-\x1f\x7f]")


@frozen
class Remembered:
    """What :func:`remember` wrote: the key, or the error (then ``key`` is None)."""

    key: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the row was written."""
        return self.error is None


def _checked(
    content: object, key: object, category: object, scope: str | None
) -> tuple[str, str, str]:
    if not isinstance(content, str) or not content.strip():
        raise ValueError(f"'content' must be a non-empty string (got {content!r:.80})")
    if starts_with_block(content):
        raise ValueError("'content' must be a fact, not a rendered memory block")
    if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > _MAX_KEY):
        raise ValueError(f"'key' must be a non-empty string of at most {_MAX_KEY} characters")
    if not isinstance(category, str) or not category:
        raise ValueError(f"'category' must be a non-empty string (got {category!r:.80})")
    return content, key or memory_key(content, scope), category


def _policy(agent: AgentConfig | None, origin: TurnOrigin | str, session: bool) -> InjectPolicy:
    config = agent.memory if agent is not None else None
    return resolve_inject_policy(origin, has_session=session, config=config)


def _write(
    store: Memory,
    agent: AgentConfig | None,
    content: object,
    key: object,
    category: object,
    session_id: str | None,
    origin: TurnOrigin | str,
    cwd: str | os.PathLike[str] | None,
    fields: Mapping[str, Any],
) -> tuple[str, str, dict[str, Any]]:
    """Check the arguments (``ValueError``), and the store can write (``TypeError``)."""
    text, key, cat = _checked(content, key, category, session_id)
    if not isinstance(store, SupportsWrite | SupportsAsyncWrite):
        raise TypeError(
            f"remember: 'store' must have a store() method (got {type(store).__name__})"
        )
    policy = _policy(agent, origin, session_id is not None)
    stamped = {**fields, **_core.profile_fields(policy.config, cwd), "session_id": session_id}
    return text, key, {"category": cat, **stamped}


def _failed(key: str, exc: Exception) -> Remembered:
    _log.warning("memory_inject: remember of %r failed", key, exc_info=exc)
    return Remembered(None, f"remember_failed: {type(exc).__name__}: {exc}")


class RememberOptions(TypedDict, total=False):
    """The keyword options of :func:`remember` and :func:`aremember`."""

    #: The row's key (default: :func:`memory_key` of the text).
    key: str | None
    #: ``core`` (default), ``daily``, ``conversation`` or a custom category.
    category: str
    #: The session scope the row belongs to (None: every session sees it).
    session_id: str | None
    #: 0..1, feeds the rerank arm.
    importance: float | None
    #: The origin whose resolved config stamps the profile (default ``interactive``).
    origin: TurnOrigin | str
    #: The working directory the governance profile is resolved from.
    cwd: str | os.PathLike[str] | None
    #: Stamped on the row (default ``remember``).
    source: str


def _planned(
    store: Memory, agent: AgentConfig | None, content: str, options: RememberOptions
) -> tuple[str, str, dict[str, Any]]:
    check_store(store, "remember")
    importance = options.get("importance")
    extra: dict[str, Any] = {"source": options.get("source", "remember")}
    if importance is not None:
        extra["importance"] = importance
    return _write(
        store,
        agent,
        content,
        options.get("key"),
        options.get("category", "core"),
        options.get("session_id"),
        options.get("origin", TurnOrigin.INTERACTIVE),
        options.get("cwd"),
        extra,
    )


def _kept_key(store: Memory, key: str, content: str, options: RememberOptions) -> str:
    """``key``, or the key an earlier version derived for the same fact in the same session
    when that row is there (it is updated, not duplicated)."""
    session = options.get("session_id")
    get = getattr(store, "get", None)
    if options.get("key") is not None or session is None or not callable(get):
        return key
    legacy = memory_key(content)
    found = get(legacy)
    if found is not None and getattr(found, "session_id", None) == session:
        return legacy
    return key


def remember(
    store: Memory, agent: AgentConfig | None, content: str, **options: Unpack[RememberOptions]
) -> Remembered:
    """Store one fact on purpose; later turns recall and inject it like any other row.

    ``key`` defaults to :func:`memory_key` of the text (the same fact twice is
    one row). The row is stamped with ``session_id`` and, when governance is
    on, the profile the render of an ``origin`` turn compares against
    (:class:`RememberOptions`). Bad arguments are a ``ValueError`` (and a
    store without ``store()`` a ``TypeError``); a store that fails is logged
    and returned as ``error``, never raised, so a turn that remembers cannot
    fail because of memory.
    """
    text, k, fields = _planned(store, agent, content, options)
    try:
        k = _kept_key(store, k, text, options)
        _sync_store(store, k, text, fields)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _failed(k, exc)
    return Remembered(k)


async def aremember(
    store: Memory, agent: AgentConfig | None, content: str, **options: Unpack[RememberOptions]
) -> Remembered:
    """The async twin of :func:`remember`: ``astore`` is awaited, else ``store`` runs in a
    thread."""
    text, k, fields = _planned(store, agent, content, options)
    try:
        k = await asyncio.to_thread(_kept_key, store, k, text, options)
        if isinstance(store, SupportsAsyncWrite):
            await store.astore(k, text, **fields)
        else:
            await asyncio.to_thread(_sync_store, store, k, text, fields)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _failed(k, exc)
    return Remembered(k)


# -- the tools -------------------------------------------------------------------


class ToolOptions(TypedDict, total=False):
    """The keyword options of :func:`memory_tools` (and :class:`MemoryTools`)."""

    #: The turn's session scopes: writes go to the first, recall and forget see them all.
    sessions: Iterable[str | None]
    #: The turn's origin (default ``interactive``): its policy shapes recall.
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


class MemoryTools(Sequence[MemoryTool]):
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
        unknown = [n for n in picked if n not in _TOOLS]
        if unknown:
            raise ValueError(f"'names' must be among {tuple(_TOOLS)} (got {unknown!r})")
        self.store = store
        self.agent = agent
        self.sessions = _core.scopes(options.get("sessions", ()))
        self.origin = TurnOrigin(options.get("origin", TurnOrigin.INTERACTIVE))
        self.cwd = options.get("cwd")
        self.turn_id = options.get("turn_id")
        self.shared_writes = bool(options.get("shared_writes", False))
        self.curated_writes = bool(options.get("curated_writes", False))
        cats = options.get("categories", _CATEGORIES)
        if isinstance(cats, str) or not all(isinstance(c, str) and c for c in cats):
            raise ValueError(f"'categories' must be a list of category names (got {cats!r:.80})")
        self.categories = tuple(cats)
        self.tools: tuple[MemoryTool, ...] = tuple(_TOOLS[n] for n in picked)

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
        if arguments is None or arguments == "":
            return {}
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str | bytes) else arguments
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments must be a JSON object ({exc})") from None
        if not isinstance(parsed, Mapping):
            raise ValueError(f"the arguments must be a JSON object (got {type(parsed).__name__})")
        allowed = set(_TOOLS[name].parameters["properties"])
        extra = sorted(set(parsed) - allowed)
        if extra:
            raise ValueError(f"unknown argument(s) {extra}; {name} takes {sorted(allowed)}")
        return dict(parsed)

    def _store_args(self, args: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        content = args.get("content")
        if isinstance(content, str) and len(content) > MAX_TOOL_CONTENT:
            raise ValueError(f"'content' must be at most {MAX_TOOL_CONTENT} characters")
        session = next((s for s in self.sessions if s is not None), None)
        text, key, fields = _write(
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
        if "key" in args and _RESERVED.search(key):
            raise ValueError(
                "keys starting with 'user_msg' or holding ':' or control characters belong to "
                "the conversation log; choose another key"
            )
        if session is None and not self.shared_writes:
            raise ValueError(_SHARED_REFUSED)
        return text, key, fields

    def _may_replace(self, key: str, session: str | None) -> None:
        """A shared write must not replace a curated shared row (without ``curated_writes``)."""
        get = getattr(self.store, "get", None)
        if session is not None or self.curated_writes or not callable(get):
            return
        found = get(key)
        shared = found is not None and getattr(found, "session_id", None) is None
        if shared and getattr(found, "source", None) not in TOOL_SOURCES:
            raise ValueError(_CURATED_REFUSED)

    def _render_args(self, query: object) -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("'query' must be a non-empty string")
        policy = _policy(self.agent, self.origin, has_session(self.sessions))
        alias = self.agent.agent if self.agent is not None else None
        turn = TurnMeta("tool", alias, self.turn_id or _core.new_turn_id())
        return {"policy": policy, "sessions": self.sessions, "turn": turn, "cwd": self.cwd}

    def _forget(self, key: object) -> str:
        if not isinstance(key, str) or not key:
            raise ValueError("'key' must be a non-empty string")
        get, forget = getattr(self.store, "get", None), getattr(self.store, "forget", None)
        if not callable(get) or not callable(forget):
            return "This memory cannot forget."
        record = get(key)
        if record is None or not self._visible(record):
            return f"No memory under {key!r}."
        shared = getattr(record, "session_id", None) is None
        if shared and not self.shared_writes:
            return _SHARED_REFUSED
        if shared and not self.curated_writes and record.source not in TOOL_SOURCES:
            return _CURATED_REFUSED
        if not _scoped(forget):
            return "This memory cannot forget within a scope; nothing was forgotten."
        # One statement, limited to the tools' scopes: a row another scope wrote under
        # the key since the look above is never the one forgotten.
        named: list[str | None] = [s for s in self.sessions if s is not None]
        if self.shared_writes:
            named.append(None)
        sources = None if self.curated_writes else TOOL_SOURCES
        if not forget(key, sessions=named, shared_sources=sources):
            return f"No memory under {key!r}."
        return f"Forgot {key!r}."

    def _visible(self, record: Any) -> bool:
        """Active, of the tools' sessions or shared, and of their profile (governance on)."""
        if getattr(record, "status", "active") != "active":
            return False
        session = getattr(record, "session_id", None)
        if session is not None and session not in self.sessions:
            return False
        policy = _policy(self.agent, self.origin, has_session(self.sessions))
        mine = _core.profile_fields(policy.config, self.cwd).get("profile_id")
        theirs = getattr(record, "profile_id", None)
        return mine is None or theirs is None or mine == theirs

    def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """Run one tool call; the text for the model. Never raises: a bad call or a failing
        store is answered with ``Error: ...`` (and logged when the store failed)."""
        try:
            args = self._args(name, arguments)
            if name == STORE:
                text, key, fields = self._store_args(args)
                self._may_replace(key, fields.get("session_id"))
                _sync_store(self.store, key, text, fields)
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
                await asyncio.to_thread(self._may_replace, key, fields.get("session_id"))
                if isinstance(self.store, SupportsAsyncWrite):
                    await self.store.astore(key, text, **fields)
                else:
                    await asyncio.to_thread(_sync_store, self.store, key, text, fields)
                return f"Remembered as {key!r}."
            if name == RECALL:
                kw = self._render_args(args.get("query"))
                return _recalled(await arender_memory_context(self.store, args["query"], **kw))
            return await asyncio.to_thread(self._forget, args.get("key"))
        except (ValueError, TypeError) as exc:
            return f"Error: {exc}"
        except Exception as exc:  # noqa: BLE001 - memory never fails the turn
            _log.warning("memory_inject: tool %s failed", name, exc_info=exc)
            return f"Error: memory failed ({type(exc).__name__})"


_SHARED_REFUSED = (
    "This memory is shared by every user; the host has not let the model change shared "
    "memories, so nothing was changed."
)
_CURATED_REFUSED = (
    "That shared memory was written by the host; the model may not replace or forget it, "
    "so nothing was changed."
)


def _scoped(forget: Any) -> bool:
    """True when the store's ``forget`` takes ``sessions`` (limits itself to scopes)."""
    try:
        return "sessions" in inspect.signature(forget).parameters
    except (TypeError, ValueError):
        return False


def _sync_store(store: Memory, key: str, text: str, fields: Mapping[str, Any]) -> None:
    if not isinstance(store, SupportsWrite):
        raise TypeError("the store only has astore(): call the async twin")
    store.store(key, text, **fields)


def _recalled(result: RenderResult) -> str:
    if result.text:
        return result.text
    reason = getattr(result.event, "reason", None) or getattr(result.event, "abstained", None)
    return "No memories matched." + (f" ({reason})" if reason else "")


def memory_tools(
    store: Memory, agent: AgentConfig | None = None, **options: Unpack[ToolOptions]
) -> MemoryTools:
    """The memory tools for one turn (see :class:`MemoryTools` and :class:`ToolOptions`)."""
    return MemoryTools(store, agent, **options)
