"""Issue 13, classes 1 and 2: channel scopes and autosave keys never merge two people.

Class 1: the personal scope of a sender must be injective (no two senders share
one) and typed (a person scope never equals a conversation scope). Class 2: an
autosave key must be unique per (channel, chat, sender, message). The
generators draw ids from the characters that the old sanitiser folded together
(punctuation, ``@``/``:`` of Matrix and e-mail ids, combining accents, ``_``),
plus the issue's own pairs; the end-to-end cases go through the real adapter
on a real SQLite store.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_inject import AgentConfig
from memory_inject.storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from adapters.channel import ChannelAdapter, InboundMessage, session_scopes
else:
    from memory_inject.adapters.channel import ChannelAdapter, InboundMessage, session_scopes

#: Pairs the old sanitiser mapped to one scope (the issue's and more of the kind).
COLLIDING = [
    ("alice.smith", "alice_smith"),
    ("@alice.smith:example.org", "@alice_smith:example.org"),
    ("john.doe@gmail.com", "john_doe@gmail.com"),
    (unicodedata.normalize("NFD", "josé"), "jose_"),
    ("bob!", "bob?"),
    ("+49 151 1234", "+49_151_1234"),
    ("a/b", "a\\b"),
]
#: Characters the old sanitiser folded into ``_``, and some it kept.
ID_CHARS = st.sampled_from([*"aZ9_-.@:!?/ %+#\u0301\u00e9\u200b\U0001f600", "person:", "chat:"])
# A blank id is refused (one id for everyone): ids hold something besides spaces.
ids = st.lists(ID_CHARS, min_size=1, max_size=10).map("".join).filter(str.strip)


def message(
    sender: str,
    history_key: str,
    *,
    group: bool = False,
    msg_id: str = "1",
    channel: str = "tg",
    text: str = "The staging deploy must wait for Dana's sign-off.",
) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        sender=sender,
        text=text,
        reply_target="group:ops" if group else sender,
        message_id=msg_id,
        history_key=history_key,
    )


def person_of(msg: InboundMessage) -> str:
    conversation, person = session_scopes(msg)
    return person if not msg.reply_target.startswith("group:") else conversation


def conversation_of(msg: InboundMessage) -> str:
    first, second = session_scopes(msg)
    return second if msg.reply_target.startswith("group:") else first


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "memory.db")
    yield s
    s.close()


class TestPersonScopes:
    @pytest.mark.parametrize(("a", "b"), COLLIDING)
    def test_the_issues_pairs_get_two_scopes(self, a: str, b: str) -> None:
        """Each pair the old sanitiser merged gets two different person scopes."""
        assert person_of(message(a, "dm_a")) != person_of(message(b, "dm_b"))

    @settings(max_examples=400, deadline=None)
    @given(a=ids, b=ids, ca=st.sampled_from(["tg", "tg_x", "tg:x"]), cb=st.sampled_from(["tg"]))
    def test_two_senders_never_share_a_person_scope(self, a: str, b: str, ca: str, cb: str) -> None:
        """Different (channel, sender) pairs give different person scopes."""
        pa = person_of(message(a, "h", channel=ca))
        pb = person_of(message(b, "h", channel=cb))
        assert ((ca, a) == (cb, b)) == (pa == pb)

    @settings(max_examples=400, deadline=None)
    @given(sender=ids, history=ids, other_history=ids, group=st.booleans())
    def test_a_person_scope_is_never_a_conversation_scope(
        self, sender: str, history: str, other_history: str, group: bool
    ) -> None:
        """No sender's scope equals any chat's scope, whatever the history keys look like."""
        mine = message(sender, history, group=group)
        theirs = message("someone", other_history, group=not group)
        assert person_of(mine) != conversation_of(mine)
        assert person_of(mine) != conversation_of(theirs)
        assert person_of(theirs) != conversation_of(mine)
        # and two history keys never share a conversation scope
        same = history == other_history
        assert same == (conversation_of(mine) == conversation_of(theirs))

    def test_the_sender_named_like_a_chat_reads_nothing_of_it(self, store: SQLiteStore) -> None:
        """Sender 'telegram_alice' does not see the chat whose history key is 'telegram_alice'."""
        store.store(
            "dm_note",
            "Alice's refund for invoice INV-77 is approved.",
            "conversation",
            session_id="telegram_alice",
        )
        bot = ChannelAdapter(store, AgentConfig(agent="bot"), channel_name="telegram")
        msg = message(
            "telegram_alice",
            "telegram_group_9",
            group=True,
            channel="telegram",
            text="what about invoice INV-77?",
        )
        turn = bot.handle(msg)
        assert "INV-77" not in turn.block
        assert turn.event is not None and turn.event.success

    @pytest.mark.parametrize(("a", "b"), COLLIDING[:5])
    def test_a_second_person_never_sees_the_firsts_memories(
        self, store: SQLiteStore, a: str, b: str
    ) -> None:
        """A memory in A's person scope is not in B's DM block (it is in A's)."""
        scope_a = person_of(message(a, "dm_a", channel="telegram"))
        store.store(
            "pref",
            "Prefers invoices as PDF to the billing address.",
            "project_notes",
            session_id=scope_a,
        )
        bot = ChannelAdapter(store, AgentConfig(agent="bot"), channel_name="telegram")

        def ask(sender: str, history: str) -> str:
            msg = message(sender, history, channel="telegram", text="how should invoices go?")
            return bot.handle(msg).block

        assert "PDF" in ask(a, "dm_a")
        assert "PDF" not in ask(b, "dm_b")


class TestAutosaveKeys:
    @settings(max_examples=400, deadline=None)
    @given(
        a=st.tuples(st.sampled_from(["tg", "tg_1"]), ids, ids, ids),
        b=st.tuples(st.sampled_from(["tg", "tg_1"]), ids, ids, ids),
    )
    def test_keys_are_unique_per_channel_chat_sender_message(
        self, a: tuple[str, str, str, str], b: tuple[str, str, str, str]
    ) -> None:
        """Two messages share a key exactly when channel, chat, sender and message id agree."""

        def key(fields: tuple[str, str, str, str]) -> str:
            channel, chat, sender, msg_id = fields
            msg = message(sender, chat, msg_id=msg_id, channel=channel)
            return ChannelAdapter.autosave_key(msg)

        assert (a == b) == (key(a) == key(b))

    def test_numeric_ids_from_the_host_still_save(self, store: SQLiteStore) -> None:
        """A host passing ints (Telegram ids) gets the same scopes and key as their strings."""
        bot = ChannelAdapter(
            store, AgentConfig(agent="bot"), channel_name="telegram", autosave=True
        )
        ints: dict[str, Any] = {"sender": 4711, "message_id": 7, "history_key": 99}
        numeric = InboundMessage(channel="telegram", text="x" * 30, reply_target="4711", **ints)
        text = message("4711", "99", msg_id="7", channel="telegram", text="x" * 30)
        assert session_scopes(text) == session_scopes(numeric)
        turn = bot.handle(numeric)
        assert (None, ChannelAdapter.autosave_key(text)) == (turn.error, turn.autosaved_key)

    def test_the_same_message_id_in_a_dm_and_a_group_keeps_both(self, store: SQLiteStore) -> None:
        """Message 7 in a DM and message 7 in a group are two memories, each in its chat."""
        bot = ChannelAdapter(
            store, AgentConfig(agent="bot"), channel_name="telegram", autosave=True
        )
        dm = message(
            "alice",
            "telegram_alice",
            msg_id="7",
            channel="telegram",
            text="My invoice INV-77 was charged twice, please refund.",
        )
        grp = message(
            "alice",
            "telegram_ops",
            group=True,
            msg_id="7",
            channel="telegram",
            text="Everyone: the office is closed on Friday afternoon.",
        )
        k1 = bot.handle(dm).autosaved_key
        k2 = bot.handle(grp).autosaved_key
        assert k1 is not None and k2 is not None and k1 != k2
        saved = {r.key: (r.session_id, r.content) for r in store.list()}
        assert ("telegram_alice", dm.text) == saved[k1]
        assert ("telegram_ops", grp.text) == saved[k2]


class TestMigration:
    def test_old_person_scopes_move_unless_two_senders_share_them(self, store: SQLiteStore) -> None:
        """Rows under an old sanitised id move to the new scope; a shared old id stays."""
        if TYPE_CHECKING:
            from adapters.channel import legacy_person_scope, migrate_person_scopes, person_scope
        else:
            from memory_inject.adapters.channel import (
                legacy_person_scope,
                migrate_person_scopes,
                person_scope,
            )
        senders = ["@carol:example.org", "alice.smith", "alice_smith"]
        for i, sender in enumerate(senders):
            store.store(
                f"m{i}", f"fact {i}", "project_notes", session_id=legacy_person_scope(sender)
            )
        moved = migrate_person_scopes(store, "matrix", senders)
        carol = person_scope("matrix", "@carol:example.org")
        assert {"_carol_example_org": carol} == moved
        sessions = {r.key: r.session_id for r in store.list()}
        assert {"m0": carol, "m1": "alice_smith", "m2": "alice_smith"} == sessions
