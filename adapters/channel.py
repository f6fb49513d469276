"""The channel orchestrator's turn: a peer wrote on Telegram, Discord, Slack, WhatsApp...

Origin ``channel``. Session scopes follow zeroclaw's orchestrator:

* direct message: ``[history_key, sanitized_sender]``
* group chat (``reply_target`` contains ``@g.us`` or starts with ``group:``):
  ``[sanitized_sender, history_key]``

so a peer's own memories come first in a group and the conversation's first
in a DM; the core de-duplicates keys across both scopes into one block.
With ``autosave=True`` the inbound text is stored after the render (so it is
never recalled into its own block) as a ``conversation`` memory keyed
``<channel>_<sanitized sender>_<message_id>`` in the ``history_key`` session.
Those keys are not in the render skip set: a peer's earlier messages are
injectable in later turns of the same conversation.
"""

from __future__ import annotations

from typing import Unpack

from attrs import frozen

from memory_inject._text import sanitize_session_key
from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin

from . import _core
from ._base import Adapter, AdapterOptions, turn_of

__all__ = ["ChannelAdapter", "ChannelTurn", "InboundMessage", "is_group_chat", "session_scopes"]


@frozen(kw_only=True)
class InboundMessage:
    """One message from a channel peer, as the host's channel integration sees it."""

    channel: str
    sender: str
    text: str
    reply_target: str
    message_id: str
    history_key: str


@frozen(kw_only=True)
class ChannelTurn(_core.Injection):
    """The injection for one inbound message; ``prefixed`` builds the memory-first prompt."""

    message: InboundMessage

    def prefixed(self, text: str | None = None) -> str:
        """``block + text`` (default: the message's text): zeroclaw's memory-first wire order."""
        return self.block + (self.message.text if text is None else text)


def is_group_chat(reply_target: str) -> bool:
    """zeroclaw's test: a WhatsApp group JID (``@g.us``) or a ``group:`` target."""
    return "@g.us" in reply_target or reply_target.startswith("group:")


def session_scopes(message: InboundMessage) -> tuple[str, str]:
    """The two recall scopes of a message, in zeroclaw's order (see the module docstring)."""
    sender = sanitize_session_key(message.sender)
    if is_group_chat(message.reply_target):
        return sender, message.history_key
    return message.history_key, sender


class ChannelAdapter(Adapter):
    """Maps an :class:`InboundMessage` to the core's request; nothing more."""

    def __init__(
        self,
        store: Memory,
        agent_config: AgentConfig,
        *,
        channel_name: str,
        **options: Unpack[AdapterOptions],
    ) -> None:
        """Serve the channel ``channel_name``; ``options`` as for :class:`~._base.Adapter`."""
        options["channel"] = channel_name
        super().__init__(store, agent_config, **options)

    @property
    def channel_name(self) -> str:
        """The channel this adapter serves (stamped on every turn's ``TurnMeta``)."""
        return self.channel

    def _request(self, message: InboundMessage, turn_id: str | None) -> _core.Request:
        return _core.Request(
            origin=TurnOrigin.CHANNEL,
            query=message.text,
            sessions=session_scopes(message),
            turn=self._meta(turn_id),
        )

    @staticmethod
    def autosave_key(message: InboundMessage) -> str:
        """The key an autosaved inbound message is stored under."""
        return f"{message.channel}_{sanitize_session_key(message.sender)}_{message.message_id}"

    def _save(self, message: InboundMessage) -> _core.Save:
        return _core.Save(self.autosave_key(message), message.text, message.history_key)

    def handle(self, message: InboundMessage, *, turn_id: str | None = None) -> ChannelTurn:
        """Recall and render for one inbound message; never raises because of memory."""
        injection = self._serve(self._request(message, turn_id), self._save(message))
        return turn_of(ChannelTurn, injection, message=message)

    async def ahandle(self, message: InboundMessage, *, turn_id: str | None = None) -> ChannelTurn:
        """The async twin of :meth:`handle`."""
        injection = await self._aserve(self._request(message, turn_id), self._save(message))
        return turn_of(ChannelTurn, injection, message=message)
