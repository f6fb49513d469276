"""What every entry-point adapter shares: the constructor fields and the serve step.

An adapter maps its host's event to a :class:`~._core.Request` and, when it
autosaves, a :class:`~._core.Save`. :meth:`Adapter._serve` (and its async twin
:meth:`Adapter._aserve`) does the rest the same way for all of them: the
policy and the render (:func:`._core.run`), then the autosave with the turn's
policy, so the saved row carries the profile the render used, then the
turn's session row (:func:`._core.record_turn`, with ``memory.sessions.record``).
A turn that starts at the adapter (channel, cron, daemon, agent_direct) goes through
:meth:`Adapter._serve_turn`, which checks and sets the turn mark of :mod:`._turns` as
:class:`~.loop.MemoryLoop` does: a ``sub_turn`` inside a live turn, the live turn while
it renders. Subclasses add only their request shape and their turn type.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, ClassVar, TypedDict, TypeVar, Unpack

import attrs

from memory_inject.config import AgentConfig
from memory_inject.config._constraints import did_you_mean
from memory_inject.contract import Memory, supports
from memory_inject.models import TurnMeta, TurnOrigin

from . import _core
from ._turns import LoopTurn, active_turn, serving

__all__ = ["Adapter", "AdapterOptions", "check_store", "turn_of"]

T = TypeVar("T", bound=_core.Injection)


def check_store(store: object, adapter: str) -> None:
    """Refuse at construction what can never be a store (a path, ``None``, a config).

    A wrong store used to construct fine and then fail every turn in silence.
    The test is the store contract (:class:`~memory_inject.contract.Memory`:
    ``name`` and ``recall``), asked with :func:`~memory_inject.contract.supports`,
    so proxies that forward attributes with ``__getattr__`` pass too.
    """
    if isinstance(store, str | bytes | os.PathLike) or not supports(store, Memory):
        raise TypeError(
            f"{adapter}: 'store' must be a memory store with 'name' and 'recall' "
            f"(got {type(store).__name__}: {store!r:.80}); open one with "
            "memory_inject.storage.open_store(agent) or SQLiteStore(path)"
        )


class AdapterOptions(TypedDict, total=False):
    """The keyword options every adapter takes (an adapter may add its own)."""

    #: Stamped on every turn's ``TurnMeta`` (default: the adapter's ``default_channel``).
    channel: str
    #: Stamped on every turn (default: the agent file's ``agent``).
    agent_alias: str | None
    #: Store the user's message after the render (only adapters whose turns have one).
    autosave: bool
    #: The working directory the profile is resolved from (default: the process's).
    cwd: str | os.PathLike[str] | None
    #: The calling plugin's id (founder-os ``P10``), for a recall plan's ``plugin`` query.
    source: str | None


#: Every adapter option of the library, for a misspelt one's "did you mean".
_KNOWN = (
    *AdapterOptions.__annotations__,
    "sessions",
    "earlier_blocks",
    "placement",
    "api",
    "origin",
    "suppress",
    "channel_name",
)


class Adapter:
    """The fields every adapter keeps, and one serve step in a sync and an async form.

    A subclass sets ``default_channel`` and, if its turns carry no user
    message worth keeping (cron, daemon), ``autosaves = False``.
    """

    default_channel: ClassVar[str] = "api"
    autosaves: ClassVar[bool] = True

    def __init__(
        self, store: Memory, agent_config: AgentConfig, **options: Unpack[AdapterOptions]
    ) -> None:
        """Keep the store and agent; ``options``: :class:`AdapterOptions`.

        A store that cannot recall is a ``TypeError`` here, not a silent turn later.
        """
        name = type(self).__name__
        check_store(store, name)
        unknown = sorted(set(options) - set(AdapterOptions.__annotations__))
        if unknown:
            # ``session=`` for ``sessions=`` made every turn sessionless: every session's
            # shared rows in every user's block. A typo must fail here.
            hint = (
                " (not an option of this adapter; MemoryLoop takes sessions per turn)"
                if unknown[0] in _KNOWN
                else did_you_mean(unknown[0], _KNOWN)
            )
            raise TypeError(f"{name}: unknown option {unknown[0]!r}{hint}")
        if not isinstance(agent_config, AgentConfig):
            hint = (
                " (pass the AgentConfig, not its .memory)"
                if hasattr(agent_config, "origins")
                else ""
            )
            raise TypeError(
                f"{name}: 'agent_config' must be an AgentConfig{hint} "
                f"(got {type(agent_config).__name__})"
            )
        autosave = options.get("autosave", False)
        if autosave and not self.autosaves:
            raise TypeError(f"{name}: its turns never autosave ('autosave' must be False)")
        alias = options.get("agent_alias")
        self.store = store
        self.agent_config = agent_config
        self.channel: str = options.get("channel", self.default_channel)
        self.agent_alias: str = alias if alias is not None else agent_config.agent
        self.autosave: bool = autosave
        self.cwd: str | os.PathLike[str] | None = options.get("cwd")
        self.source: str | None = options.get("source")

    def _meta(self, turn_id: str | None) -> TurnMeta:
        """This adapter's turn metadata, with a fresh turn id unless one is given."""
        return TurnMeta(self.channel, self.agent_alias, turn_id or _core.new_turn_id())

    def _sourced(self, req: _core.TurnInput) -> _core.TurnInput:
        """``req`` with this adapter's ``source`` unless the request names its own."""
        if req.source is not None or self.source is None:
            return req
        return attrs.evolve(req, source=self.source)

    def _serve(
        self, req: _core.TurnInput, save: _core.Save | None = None, tools: Sequence[str] = ()
    ) -> _core.Injection:
        """Policy and render for ``req``, then ``save`` (when this adapter autosaves), then
        the turn's session row with ``tools`` (when the config records sessions)."""
        started = time.perf_counter()  # the writes after the render wait within its deadline
        injection = _core.run(self.store, self.agent_config, self._sourced(req), cwd=self.cwd)
        if save is not None and self.autosave:
            saved = _core.autosave(
                self.store, injection.policy, save, cwd=self.cwd, started=started
            )
            injection = _with_save(injection, saved)
        return _core.record_turn(
            self.store, injection, tools=tools, started=started, **self._row_args(req)
        )

    async def _aserve(
        self, req: _core.TurnInput, save: _core.Save | None = None, tools: Sequence[str] = ()
    ) -> _core.Injection:
        """The async twin of :meth:`_serve`."""
        started = time.perf_counter()
        injection = await _core.arun(
            self.store, self.agent_config, self._sourced(req), cwd=self.cwd
        )
        if save is not None and self.autosave:
            saved = await _core.aautosave(
                self.store, injection.policy, save, cwd=self.cwd, started=started
            )
            injection = _with_save(injection, saved)
        return await _core.arecord_turn(
            self.store, injection, tools=tools, started=started, **self._row_args(req)
        )

    def _row_args(self, req: _core.TurnInput) -> dict[str, Any]:
        """The session row's ``cwd`` and ``session`` for ``req``."""
        return {"cwd": self.cwd, "session": self._record_scope(req)}

    def _record_scope(self, req: _core.TurnInput) -> str | None:
        """The scope of the turn's session row: None, the first of its sessions."""
        return None

    def _entered(self, req: _core.TurnInput) -> tuple[_core.TurnInput, LoopTurn]:
        """``req`` as a turn that starts here, and its mark: a ``sub_turn`` when another turn
        is live in this context (any adapter's), as :class:`~.loop.MemoryLoop` decides.

        A wrapped client's turn left open on a tool call is live while the host frame that
        made the call runs; called from that very frame (a worker's loop come round to its
        next message), this turn is not inside it: that turn was left, and is closed, as
        the client's own next call would close it. Called from deeper (a tool that relays
        a message), it is a ``sub_turn``."""
        active = active_turn()
        if active is not None and active.left_at(_host_frame()):
            active.close()
            active = None
        nested = active is not None
        if nested:
            req = attrs.evolve(req, origin=TurnOrigin.SUB_TURN)
        if req.origin is None:
            raise TypeError("an adapter's TurnInput needs an 'origin'")
        mark = LoopTurn(
            origin=req.origin,
            sessions=req.sessions,
            suppress=req.suppress,
            turn_id=req.turn.turn_id,
            owner=self,
            nested=nested,
        )
        return req, mark

    def _serve_turn(self, req: _core.TurnInput, save: _core.Save | None = None) -> _core.Injection:
        """:meth:`_serve` for a turn that starts at this adapter (a channel message, a cron
        run, a heartbeat, a direct request): a ``sub_turn`` inside a live turn, and the live
        turn itself while it renders (:func:`._turns.serving`), so an agent its event's
        receivers run is one. The mark is this task's or thread's alone, and ends with
        the render on every exit path."""
        req, mark = self._entered(req)
        with serving(mark):
            return self._serve(req, save)

    async def _aserve_turn(
        self, req: _core.TurnInput, save: _core.Save | None = None
    ) -> _core.Injection:
        """The async twin of :meth:`_serve_turn`."""
        req, mark = self._entered(req)
        with serving(mark):
            return await self._aserve(req, save)


def _host_frame() -> FrameType | None:
    """The first frame outside this package: the host code that called the adapter."""
    f: FrameType | None = sys._getframe(1)
    inside = __package__ + "."
    while f is not None and str(f.f_globals.get("__name__", "")).startswith(inside):
        f = f.f_back
    return f


def _with_save(injection: _core.Injection, saved: tuple[str | None, str | None]) -> _core.Injection:
    key, err = saved
    return attrs.evolve(injection, autosaved_key=key, error=injection.error or err)


def turn_of(cls: type[T], injection: _core.Injection, **extra: Any) -> T:
    """``injection`` as the adapter's own turn type (``cls``), with its extra fields."""
    return cls(**attrs.asdict(injection, recurse=False), **extra)
