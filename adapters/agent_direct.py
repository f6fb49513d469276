"""A library or API call straight into the agent (origin ``agent_direct``).

An embedding application, a WebSocket or ACP session, a tool that messages a
peer: each request carries its own session (or none). With a session the
turn sees that session's conversation; without one the core excludes
conversation memory, since an unscoped recall would pull other sessions'.

The recall limit comes from the config, per origin:
``origins: {agent_direct: {recall_limit: 0}}`` means "unlimited", which the
core bounds by ``rerank.pool_cap`` (1024 by default).

The block is rendered per request and returned, not written into any
history, so blocks never pile up in a long-lived session. A host with a
response cache must bypass it when :attr:`DirectTurn.injected` is true (or,
before the call, when :meth:`AgentDirectAdapter.injection_active` is): the
cache key cannot see the per-request block.
"""

from __future__ import annotations

import os

import attrs
from attrs import frozen

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.policy import resolve_inject_policy

from . import _core

__all__ = ["AgentDirectAdapter", "DirectTurn"]


@frozen(kw_only=True)
class DirectTurn(_core.Injection):
    """One request: ``prompt`` is the block followed by the request's text."""

    @property
    def prompt(self) -> str:
        return self.block + self.query


class AgentDirectAdapter:
    """Maps one request (text plus optional session) to the core's request."""

    def __init__(
        self,
        store: Memory,
        agent_config: AgentConfig,
        *,
        channel: str = "api",
        agent_alias: str | None = None,
        autosave: bool = False,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.store = store
        self.agent_config = agent_config
        self.channel = channel
        self.agent_alias = agent_alias if agent_alias is not None else agent_config.agent
        self.autosave = autosave
        self.cwd = cwd

    def _request(self, text: str, session_id: str | None, turn_id: str | None) -> _core.Request:
        return _core.Request(
            origin=TurnOrigin.AGENT_DIRECT,
            query=text,
            sessions=(session_id,),
            turn=TurnMeta(self.channel, self.agent_alias, turn_id or _core.new_turn_id()),
        )

    def injection_active(self, session_id: str | None = None, text: str | None = None) -> bool:
        """Would a request get memory? The core policy (with ``text``, its trivial filter).

        A store named ``none`` never injects (zeroclaw's ``memory_injection_active``).
        """
        if self.store.name == "none":
            return False
        return resolve_inject_policy(
            TurnOrigin.AGENT_DIRECT,
            has_session=session_id is not None,
            config=self.agent_config.memory,
            query=text,
        ).inject

    @staticmethod
    def _key(injection: _core.Injection) -> str:
        return f"user_msg_{injection.turn.turn_id}"

    @staticmethod
    def _with(injection: _core.Injection, saved: tuple[str | None, str | None]) -> DirectTurn:
        fields = attrs.asdict(injection, recurse=False)
        fields.update(autosaved_key=saved[0], error=injection.error or saved[1])
        return DirectTurn(**fields)

    def request(
        self, text: str, *, session_id: str | None = None, turn_id: str | None = None
    ) -> DirectTurn:
        """Recall and render for one request; never raises because of memory."""
        injection = _core.run(
            self.store, self.agent_config, self._request(text, session_id, turn_id), cwd=self.cwd
        )
        saved: tuple[str | None, str | None] = (None, None)
        if self.autosave:
            saved = _core.autosave(
                self.store,
                self.agent_config,
                origin=TurnOrigin.AGENT_DIRECT,
                key=self._key(injection),
                text=text,
                session_id=session_id,
                cwd=self.cwd,
            )
        return self._with(injection, saved)

    async def arequest(
        self, text: str, *, session_id: str | None = None, turn_id: str | None = None
    ) -> DirectTurn:
        """The async twin of :meth:`request`."""
        injection = await _core.arun(
            self.store, self.agent_config, self._request(text, session_id, turn_id), cwd=self.cwd
        )
        saved: tuple[str | None, str | None] = (None, None)
        if self.autosave:
            saved = await _core.aautosave(
                self.store,
                self.agent_config,
                origin=TurnOrigin.AGENT_DIRECT,
                key=self._key(injection),
                text=text,
                session_id=session_id,
                cwd=self.cwd,
            )
        return self._with(injection, saved)
