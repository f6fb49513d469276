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

from attrs import frozen

from memory_inject.models import TurnOrigin
from memory_inject.policy import resolve_inject_policy

from . import _core
from ._base import Adapter, turn_of

__all__ = ["AgentDirectAdapter", "DirectTurn"]


@frozen(kw_only=True)
class DirectTurn(_core.Injection):
    """One request: ``prompt`` is the block followed by the request's text."""


class AgentDirectAdapter(Adapter):
    """Maps one request (text plus optional session) to the core's request."""

    default_channel = "api"

    def _request(self, text: str, session_id: str | None, turn_id: str | None) -> _core.TurnInput:
        if session_id is not None and not isinstance(session_id, str):
            raise TypeError(f"'session_id' must be a str or None (got {type(session_id).__name__})")
        if session_id is not None and not session_id.strip():
            # "" would be one session for every request that lacks one: their conversations
            # (and autosaves) in one scope. No session is None.
            raise ValueError(
                f"'session_id' must be a non-empty str or None (got {session_id!r:.40})"
            )
        return _core.TurnInput(
            origin=TurnOrigin.AGENT_DIRECT,
            query=text,
            sessions=(session_id,),
            turn=self._meta(turn_id),
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
    def _save(req: _core.TurnInput, session_id: str | None) -> _core.Save:
        return _core.Save(f"user_msg_{req.turn.turn_id}", req.query, session_id)

    def request(
        self, text: str, *, session_id: str | None = None, turn_id: str | None = None
    ) -> DirectTurn:
        """Recall and render for one request; never raises because of memory."""
        req = self._request(text, session_id, turn_id)
        return turn_of(DirectTurn, self._serve_turn(req, self._save(req, session_id)))

    async def arequest(
        self, text: str, *, session_id: str | None = None, turn_id: str | None = None
    ) -> DirectTurn:
        """The async twin of :meth:`request`."""
        req = self._request(text, session_id, turn_id)
        return turn_of(DirectTurn, await self._aserve_turn(req, self._save(req, session_id)))
