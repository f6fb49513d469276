"""``migrate_person_scopes`` leaves a chat's scope alone and checks what it is given.

Round 36's channel helper: a DM whose history key (``telegram_alice``) is another sender's
old id (``telegram.alice``) had the facts stored in it (the model's ``memory_store``, the
host's ``remember``) moved into that sender's personal scope, where they showed in his
groups; round 35 had kept only its ``conversation`` and ``session`` rows in place. And
``senders`` given as one string was read letter by letter, an int id failed with a bare
``TypeError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig
from memory_inject.storage.sqlite import SQLiteStore

if TYPE_CHECKING:  # the adapters ship as memory_inject.adapters from the adapters/ folder
    from adapters import ChannelAdapter, InboundMessage, memory_tools, remember
    from adapters.channel import legacy_person_scope, migrate_person_scopes
else:
    from memory_inject.adapters import ChannelAdapter, InboundMessage, memory_tools, remember
    from memory_inject.adapters.channel import legacy_person_scope, migrate_person_scopes

_AGENT = AgentConfig(agent="bot")


def _message(sender: str, history_key: str, reply_target: str, text: str, n: int) -> Any:
    return InboundMessage(
        channel="telegram",
        sender=sender,
        reply_target=reply_target,
        message_id=str(n),
        history_key=history_key,
        text=text,
    )


def test_a_dms_stored_facts_stay_in_the_dm() -> None:
    store = SQLiteStore(":memory:")
    bot = ChannelAdapter(store, _AGENT, channel_name="telegram", autosave=True)
    dm = bot.handle(_message("alice", "telegram_alice", "alice", "remember my therapist", 1))
    tools = memory_tools(store, _AGENT, sessions=list(dm.sessions), origin="channel")
    tools.call("memory_store", {"content": "Alice sees her therapist Dr Kowalski on Mondays."})
    remember(store, _AGENT, "Alice's door code is 4711-kiwi.", session_id=dm.sessions[0])
    assert legacy_person_scope("telegram.alice") == "telegram_alice" == dm.sessions[0]

    moved = migrate_person_scopes(store, "telegram", ["alice", "telegram.alice"])

    assert "telegram_alice" not in moved
    assert list(store.list(session_id="person:telegram:telegram.alice")) == []
    group = bot.handle(
        _message("telegram.alice", "tg_pub", "group:pub", "who is the therapist on Mondays?", 5)
    )
    assert "Kowalski" not in group.block
    again = bot.handle(_message("alice", "telegram_alice", "alice", "who is my therapist?", 2))
    assert "Kowalski" in again.block


def test_a_chat_the_host_names_is_left_alone() -> None:
    """Without an autosave in it, the host names its chats (``chats=``)."""
    store = SQLiteStore(":memory:")
    store.store("door", "the door code is 4711", "core", session_id="telegram_alice")
    assert (
        migrate_person_scopes(store, "telegram", ["telegram.alice"], chats=["telegram_alice"]) == {}
    )
    assert store.get("door").session_id == "telegram_alice"  # type: ignore[union-attr]
    moved = migrate_person_scopes(store, "telegram", ["telegram.alice"])
    assert moved == {"telegram_alice": "person:telegram:telegram.alice"}


@pytest.mark.parametrize("senders", ["alice.smith", b"alice", None, ["alice", None], [True]])
def test_senders_that_are_not_ids_are_refused(senders: Any) -> None:
    store = SQLiteStore(":memory:")
    store.store("s", "a row of the one-letter session s", "core", session_id="s")
    with pytest.raises(TypeError, match="'senders'"):
        migrate_person_scopes(store, "telegram", senders)
    assert store.get("s").session_id == "s"  # type: ignore[union-attr]


def test_int_sender_ids_are_their_str() -> None:
    store = SQLiteStore(":memory:")
    store.store("tea", "likes green tea", "core", session_id=legacy_person_scope("12345"))
    assert migrate_person_scopes(store, "telegram", [12345]) == {"12345": "person:telegram:12345"}
