"""The channel adapter (adapters/channel.py) against a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig, TurnOrigin

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import ChannelAdapter, InboundMessage, is_group_chat, session_scopes
else:
    from memory_inject.adapters import ChannelAdapter, InboundMessage, is_group_chat, session_scopes
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._twins import call, twin  # noqa: F401


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    s.store("deploy_target", "Production deploys go to prod-3 (eu-west-1).", "core")
    yield s
    s.close()


@pytest.fixture
def adapter(store: SQLiteStore) -> ChannelAdapter:
    return ChannelAdapter(store, AgentConfig(agent="bot"), channel_name="telegram", autosave=True)


def dm(text: str, msg_id: str = "1", sender: str = "alice", **kw: Any) -> InboundMessage:
    fields = {
        "channel": "telegram",
        "sender": sender,
        "text": text,
        "reply_target": sender,
        "message_id": msg_id,
        "history_key": f"telegram_{sender}",
    }
    fields.update(kw)
    return InboundMessage(**fields)


def group(text: str, target: str, msg_id: str = "1", sender: str = "alice") -> InboundMessage:
    return dm(
        text,
        msg_id,
        sender,
        reply_target=target,
        history_key=f"whatsapp_{target}",
        channel="whatsapp",
    )


class TestScopes:
    def test_a_direct_message_puts_the_conversation_first(self) -> None:
        """DM scopes are [conversation, person]."""
        assert ("telegram_alice", "person:telegram:alice") == session_scopes(dm("hi"))

    def test_a_group_chat_puts_the_sender_first(self) -> None:
        """Group scopes are [person, conversation], for @g.us and group: targets."""
        person = "person:whatsapp:alice"
        assert (person, "whatsapp_123@g.us") == session_scopes(group("hi", "123@g.us"))
        assert (person, "whatsapp_group:ops") == session_scopes(group("hi", "group:ops"))
        assert (True, True, False) == (
            is_group_chat("1@g.us"),
            is_group_chat("group:x"),
            is_group_chat("alice@s.whatsapp.net"),
        )

    def test_the_sender_is_escaped(self) -> None:
        """A Matrix sender @alice:server is escaped, not sanitised (zeroclaw's _alice_server)."""
        msg = dm("hi", sender="@alice:server", history_key="matrix_room")
        assert ("matrix_room", "person:telegram:%40alice%3Aserver") == session_scopes(msg)

    @pytest.mark.parametrize("name", ["sender", "message_id", "history_key", "channel"])
    @pytest.mark.parametrize("value", [None, 1.5, True, b"alice"])
    def test_an_id_that_is_not_a_str_or_int_is_refused(self, name: str, value: Any) -> None:
        """Its ``str`` ("None") was one scope and one autosave key for every message that
        lacked the id: bob's turn showed alice's message, and her next one replaced it."""
        with pytest.raises(TypeError, match=f"InboundMessage.{name} must be a str or an int"):
            dm("my locker combination is 31-07-99", **{name: value})

    @pytest.mark.parametrize("name", ["text", "reply_target"])
    def test_text_and_reply_target_are_str(self, name: str) -> None:
        fields: dict[str, Any] = {"text": "hello there", "reply_target": "alice", name: None}
        with pytest.raises(TypeError, match=f"InboundMessage.{name} must be a str"):
            InboundMessage(channel="tg", sender="alice", message_id="1", history_key="h", **fields)


class TestHandle:
    def test_the_turn_has_the_block_the_event_and_the_channel_origin(
        self, adapter: ChannelAdapter
    ) -> None:
        """handle recalls in both scopes with origin channel and returns block and event."""
        with recording() as rec:
            turn = call(adapter, "handle", dm("where do production deploys go?"), turn_id="m1")
        assert turn.block.startswith("[Memory context]\n- deploy_target: ")
        assert [turn.event] == rec.events
        ev = rec.events[0]
        assert (
            "channel",
            "telegram",
            "bot",
            "m1",
            ("telegram_alice", "person:telegram:alice"),
        ) == (
            ev.origin,
            ev.channel,
            ev.agent_alias,
            ev.turn_id,
            ev.sessions,
        )
        assert TurnOrigin.CHANNEL == turn.origin
        assert turn.block + "where do production deploys go?" == turn.prefixed()

    def test_the_async_twin_gives_the_same_turn(self, adapter: ChannelAdapter) -> None:
        """ahandle and handle agree on the block and the scopes."""
        msg = dm("where do production deploys go?")
        sync = call(
            ChannelAdapter(adapter.store, adapter.agent_config, channel_name="telegram"),
            "handle",
            msg,
        )
        async_ = asyncio.run(
            ChannelAdapter(adapter.store, adapter.agent_config, channel_name="telegram").ahandle(
                msg
            )
        )
        assert (sync.block, sync.sessions) == (async_.block, async_.sessions)

    def test_a_failing_store_never_raises(
        self, store: SQLiteStore, adapter: ChannelAdapter
    ) -> None:
        """With the store gone the turn has no block and one event with success False."""
        store.close()
        with recording() as rec:
            turn = call(adapter, "handle", dm("where do production deploys go?"))
        assert ("", [False]) == (turn.block, [e.success for e in rec.events])
        assert turn.autosaved_key is None and "autosave_failed" in (turn.error or "")


class TestAutosave:
    def test_inbound_messages_are_saved_under_channel_chat_sender_msgid(
        self, store: SQLiteStore, adapter: ChannelAdapter
    ) -> None:
        """The key is <channel>:<history key>:<sender>:<msgid>, the session the history key."""
        turn = call(
            adapter,
            "handle",
            dm(
                "The staging deploy should wait for Dana.",
                "42",
                sender="@alice:server",
                history_key="matrix_room",
            ),
        )
        record = store.get("telegram:matrix_room:%40alice%3Aserver:42")
        assert record is not None
        assert "telegram:matrix_room:%40alice%3Aserver:42" == turn.autosaved_key
        assert ("conversation", "matrix_room") == (
            record.category,
            record.session_id,
        )

    def test_a_message_is_not_recalled_into_its_own_block_but_is_next_time(
        self, adapter: ChannelAdapter
    ) -> None:
        """Autosave runs after the render; the saved row is injectable in the next turn."""
        first = call(adapter, "handle", dm("The staging deploy should wait for Dana.", "1"))
        second = call(adapter, "handle", dm("should the staging deploy wait?", "2"))
        assert "telegram:telegram_alice:alice:1" not in first.block
        expected = "- telegram:telegram_alice:alice:1: The staging deploy should wait for Dana."
        assert expected in second.block

    def test_a_groups_messages_do_not_leak_into_another_group(
        self, adapter: ChannelAdapter
    ) -> None:
        """A row saved in one group's history is recalled there, not in another group."""
        call(adapter, "handle", group("The staging deploy should wait for Dana.", "1@g.us", "7"))
        other = call(
            adapter, "handle", group("should the staging deploy wait?", "2@g.us", "8", sender="bob")
        )
        same = call(
            adapter, "handle", group("should the staging deploy wait?", "1@g.us", "9", sender="bob")
        )
        assert "staging" not in other.block
        assert "- whatsapp:whatsapp_1%40g.us:alice:7: The staging deploy" in same.block

    def test_short_texts_and_blocks_are_not_saved(
        self, store: SQLiteStore, adapter: ChannelAdapter
    ) -> None:
        """Under 20 characters or starting with [Memory context]: nothing is stored."""
        before = store.count()
        call(adapter, "handle", dm("thanks!", "1"))
        call(
            adapter,
            "handle",
            dm("[Memory context]\n- x: y\n[/Memory context]\n\nplus a long tail", "2"),
        )
        assert before == store.count()
