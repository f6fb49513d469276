"""The channel orchestrator's turn: a peer wrote on Telegram, Discord, Slack, WhatsApp...

Origin ``channel``. Session scopes follow zeroclaw's orchestrator in order:

* direct message: ``[conversation, person]``
* group chat (``reply_target`` contains ``@g.us`` or starts with ``group:``):
  ``[person, conversation]``

so a peer's own memories come first in a group and the conversation's first
in a DM; the core de-duplicates keys across both scopes into one block.

The ids are typed and injective (issue 13): the person scope is
``person:<channel>:<sender>`` with both parts escaped (:func:`escape_scope_part`),
so two senders never share one, and the conversation scope is the
``history_key`` as given unless it starts with ``person:`` or ``chat:``, which
gets a ``chat:`` in front, so no conversation scope can equal a person scope. The host
must make ``history_key`` name the conversation among all its channels (zeroclaw:
``<channel>_<reply_target>``); a bare chat id two channels share is one conversation.
zeroclaw's ``sanitize_session_key(sender)`` mapped ``alice.smith`` and
``alice_smith`` to one scope; :func:`legacy_person_scope` gives that old id
and :func:`migrate_person_scopes` moves rows from it (docs/storage.md).

With ``autosave=True`` the inbound text is stored after the render (so it is
never recalled into its own block) as a ``conversation`` memory keyed
``<channel>:<history_key>:<sender>:<message_id>`` (each part escaped, so the
key is unique per channel, chat, sender and message) in the conversation
session. Those keys are not in the render skip set: a peer's earlier messages
are injectable in later turns of the same conversation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Unpack

import attrs
from attrs import Attribute, field, frozen

from memory_inject._text import sanitize_session_key
from memory_inject.config import AgentConfig
from memory_inject.contract import Memory, SupportsRecords, supports
from memory_inject.models import TurnOrigin

from . import _core
from ._base import Adapter, AdapterOptions, turn_of

__all__ = [
    "ChannelAdapter",
    "ChannelTurn",
    "InboundMessage",
    "conversation_scope",
    "escape_scope_part",
    "is_group_chat",
    "legacy_person_scope",
    "migrate_person_scopes",
    "person_scope",
    "session_scopes",
]

PERSON_PREFIX = "person:"
CHAT_PREFIX = "chat:"
_KEEP = frozenset("_-.")


def _an_id(_: object, attribute: Attribute[Any], value: Any) -> None:
    """An id is a str, or an int (a Telegram id: its ``str`` is used). ``None`` was its
    ``str``, "None": one id for every message that lacks it (two people's conversations in
    one scope, each message's autosave replacing the last) and a real sender's name."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(
            f"InboundMessage.{attribute.name} must be a str or an int "
            f"(got {type(value).__name__}: {value!r:.40})"
        )
    if isinstance(value, str) and not value.strip():  # "" is one id for everyone, as None was
        raise ValueError(f"InboundMessage.{attribute.name} must not be empty (got {value!r:.40})")


def _a_str(_: object, attribute: Attribute[Any], value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"InboundMessage.{attribute.name} must be a str (got {type(value).__name__}: "
            f"{value!r:.40})"
        )


@frozen(kw_only=True)
class InboundMessage:
    """One message from a channel peer, as the host's channel integration sees it.

    ``channel``, ``sender``, ``message_id`` and ``history_key`` are ids: a str, or an int
    (its ``str``); ``text`` and ``reply_target`` are str. Anything else (``None``) is a
    ``TypeError`` naming the field."""

    channel: str = field(validator=_an_id)
    sender: str = field(validator=_an_id)
    text: str = field(validator=_a_str)
    reply_target: str = field(validator=_a_str)
    message_id: str = field(validator=_an_id)
    history_key: str = field(validator=_an_id)


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


def escape_scope_part(raw: str) -> str:
    """``raw`` with every character but a letter, digit, ``_``, ``-`` or ``.`` as ``%XX``.

    The escapes are the UTF-8 bytes of the character (lone surrogates included),
    and ``%`` is always escaped, so the result decodes back to ``raw``: two
    different inputs never give one output (``:`` is escaped too, which makes
    it a safe separator). ``alice`` and ``josé`` stay as they are. A host that
    passes a number (a Telegram message id) gets its ``str``.
    """
    if not isinstance(raw, str):
        raw = str(raw)
    if raw.isalnum():
        return raw
    return "".join(
        ch
        if ch.isalnum() or ch in _KEEP
        else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        for ch in raw
    )


def person_scope(channel: str, sender: str) -> str:
    """The personal scope of ``sender`` on ``channel``: ``person:<channel>:<sender>``, escaped."""
    return f"{PERSON_PREFIX}{escape_scope_part(channel)}:{escape_scope_part(sender)}"


def conversation_scope(history_key: str) -> str:
    """The conversation scope of ``history_key``: itself, unless it looks typed.

    A key starting with ``person:`` or ``chat:`` gets ``chat:`` in front, so a
    conversation scope never equals a person scope and two keys never share one;
    every other key (``telegram_alice``) is kept, so stored conversations stay
    where they are.
    """
    if not isinstance(history_key, str):
        history_key = str(history_key)
    if history_key.startswith((PERSON_PREFIX, CHAT_PREFIX)):
        return CHAT_PREFIX + history_key
    return history_key


def legacy_person_scope(sender: str) -> str:
    """The personal scope id before issue 13 (zeroclaw's ``sanitize_session_key``).

    Not injective (``alice.smith`` and ``alice_smith`` share it): only for
    :func:`migrate_person_scopes` and for finding old rows.
    """
    return sanitize_session_key(sender)


def migrate_person_scopes(
    store: Memory, channel: str, senders: Iterable[str | int], *, chats: Iterable[str | int] = ()
) -> dict[str, str]:
    """Move rows from the old personal scopes of ``senders`` to :func:`person_scope`.

    ``senders`` are all the sender ids known on ``channel`` (str or int ids, as
    :class:`InboundMessage` takes them). An old id that two of them share is left
    alone: its rows cannot be told apart (move them by hand). So is an old id that is
    a chat's scope: a DM's history key can equal a sender's old id (``telegram_alice``
    is the old id of ``telegram.alice``), and its rows are the DM's. A chat's scope is
    one of ``chats`` (the history keys the host knows), or one holding a message this
    adapter autosaved for a chat of that key; ``conversation`` and ``session`` rows never
    move. Returns ``{old id: new id}`` for each scope moved. The store must offer
    ``list`` and ``upsert`` (``SQLiteStore``, ``PostgresStore``); rows keep their keys,
    ids and everything else.
    """
    if not supports(store, SupportsRecords) or not hasattr(store, "list"):
        raise TypeError(
            f"migrate_person_scopes: the store must have 'list' and 'upsert' "
            f"(got {type(store).__name__})"
        )
    chat_scopes = {conversation_scope(c) for c in _ids(chats, "chats")}
    by_old: dict[str, set[str]] = {}
    for sender in _ids(senders, "senders"):
        by_old.setdefault(legacy_person_scope(sender), set()).add(sender)
    moved: dict[str, str] = {}
    for old, owners in by_old.items():
        new = person_scope(channel, next(iter(owners)))
        if len(owners) != 1 or new == old or old in chat_scopes:
            continue
        records = list(store.list(session_id=old))
        autosaved = f"{escape_scope_part(channel)}:{escape_scope_part(old)}:"
        if any(r.key.startswith(autosaved) for r in records):
            # the DM's scope of the history key ``old`` (round 36: a DM's stored facts
            # moved into another sender's personal scope and showed in their groups)
            continue
        for record in records:
            if str(record.category) in ("conversation", "session"):
                # a chat's messages and session row: a DM's history key ("telegram_alice")
                # can be another sender's old id ("telegram.alice"), and its history moved
                # into that sender's personal scope (round 35). Conversations do not move.
                continue
            store.upsert(record.evolve(session_id=new), move=True)  # the host's move
        moved[old] = new
    return moved


def _ids(values: Iterable[str | int], name: str) -> list[str]:
    """``values`` as id strings: a str is refused (it would be read letter by letter)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise TypeError(
            f"migrate_person_scopes: '{name}' must be an iterable of ids (got "
            f"{type(values).__name__})"
        )
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise TypeError(
                f"migrate_person_scopes: '{name}' holds {value!r:.40}, not a str or int id"
            )
        out.append(str(value))
    return out


def session_scopes(message: InboundMessage) -> tuple[str, str]:
    """The two recall scopes of a message, in zeroclaw's order (see the module docstring)."""
    person = person_scope(message.channel, message.sender)
    conversation = conversation_scope(message.history_key)
    if is_group_chat(message.reply_target):
        return person, conversation
    return conversation, person


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
        if not isinstance(channel_name, str) or not channel_name.strip():
            raise TypeError(f"'channel_name' must be a non-empty str (got {channel_name!r:.40})")
        options["channel"] = channel_name
        super().__init__(store, agent_config, **options)

    @property
    def channel_name(self) -> str:
        """The channel this adapter serves (stamped on every turn's ``TurnMeta``)."""
        return self.channel

    def _request(self, message: InboundMessage, turn_id: str | None) -> _core.TurnInput:
        # The message's channel, which its scopes and autosave key name: a message of
        # another channel than ``channel_name`` had an event naming the adapter's (round 35).
        meta = attrs.evolve(self._meta(turn_id), channel=str(message.channel))
        return _core.TurnInput(
            origin=TurnOrigin.CHANNEL,
            query=message.text,
            sessions=session_scopes(message),
            turn=meta,
        )

    @staticmethod
    def autosave_key(message: InboundMessage) -> str:
        """The key an autosaved message is stored under: one per channel, chat, sender, message.

        ``<channel>:<history_key>:<sender>:<message_id>``, each part escaped
        (:func:`escape_scope_part`): message ids are per chat on Telegram, so a
        key without the chat let a group message replace a DM's memory.
        """
        parts = (message.channel, message.history_key, message.sender, message.message_id)
        return ":".join(escape_scope_part(p) for p in parts)

    def _record_scope(self, req: _core.TurnInput) -> str | None:
        """The conversation's scope, a group's too: a group turn's first scope is the
        sender's person scope, which every chat of the sender recalls, so a group's
        ``#decision`` lines showed in the sender's other groups and DMs (round 35)."""
        return next((s for s in req.sessions if s and not s.startswith(PERSON_PREFIX)), None)

    def _save(self, message: InboundMessage) -> _core.Save:
        session = conversation_scope(message.history_key)
        return _core.Save(self.autosave_key(message), message.text, session)

    def handle(self, message: InboundMessage, *, turn_id: str | None = None) -> ChannelTurn:
        """Recall and render for one inbound message; never raises because of memory."""
        injection = self._serve_turn(self._request(message, turn_id), self._save(message))
        return turn_of(ChannelTurn, injection, message=message)

    async def ahandle(self, message: InboundMessage, *, turn_id: str | None = None) -> ChannelTurn:
        """The async twin of :meth:`handle`."""
        injection = await self._aserve_turn(self._request(message, turn_id), self._save(message))
        return turn_of(ChannelTurn, injection, message=message)
