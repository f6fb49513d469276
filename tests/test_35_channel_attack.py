"""What a helper attacking the channel adapter found (round 35), each fixed here.

* With ``sessions.record`` on, a group turn's session row went to the sender's person
  scope (a group's first scope), which every chat of the sender recalls: a group's
  ``#decision`` line showed in the sender's other groups and DMs.
* ``migrate_person_scopes`` moved a DM's history into another sender's personal scope
  when the DM's history key equalled that sender's old id.
* A message of another channel than the adapter's ``channel_name`` had an event naming the
  adapter's channel while its scopes and autosave key named the message's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import pytest

from memory_inject import InMemoryStore
from memory_inject.config import parse_agent_config
from memory_inject.sessions import session_key
from memory_inject.storage import SQLiteStore

if TYPE_CHECKING:
    from adapters.channel import (
        ChannelAdapter,
        InboundMessage,
        legacy_person_scope,
        migrate_person_scopes,
    )
else:
    from memory_inject.adapters.channel import (
        ChannelAdapter,
        InboundMessage,
        legacy_person_scope,
        migrate_person_scopes,
    )

RECORDING = parse_agent_config(
    {"agent": "bot", "memory": {"sessions": {"record": True, "project": "p"}}}
)


def _msg(text: str, target: str, mid: str, sender: str = "+4915100") -> InboundMessage:
    return InboundMessage(
        channel="whatsapp",
        sender=sender,
        text=text,
        reply_target=target,
        message_id=mid,
        history_key="whatsapp_" + target,
    )


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_groups_session_row_stays_in_the_group(asynchronous: bool) -> None:
    import asyncio

    store = InMemoryStore()
    bot = ChannelAdapter(store, RECORDING, channel_name="whatsapp")

    def handle(m: InboundMessage) -> object:
        return asyncio.run(bot.ahandle(m)) if asynchronous else bot.handle(m)

    a = handle(_msg("board only: we will acquire Initech in March #decision", "111@g.us", "1"))
    assert session_key("whatsapp_111@g.us") == a.session_key  # type: ignore[attr-defined]
    row = store.get(session_key("whatsapp_111@g.us"))
    assert row is not None and row.session_id == "whatsapp_111@g.us"
    for where in ("222@g.us", "4915100"):  # another group, the sender's DM
        b = handle(_msg("what do we know about Initech?", where, "2" + where))
        assert "Initech in March" not in b.block  # type: ignore[attr-defined]
    dm = handle(_msg("note for me #decision", "4915100", "3"))
    assert session_key("whatsapp_4915100") == dm.session_key  # type: ignore[attr-defined]


def test_migrating_person_scopes_leaves_a_dms_history_in_place() -> None:
    store = SQLiteStore(":memory:")
    store.store("dm_101", "my card PIN is 4921", "conversation", session_id="telegram_alice")
    store.store("session:telegram_alice", "DM", "session", session_id="telegram_alice")
    store.store("tea", "likes green tea", session_id=legacy_person_scope("telegram.alice"))
    moved = migrate_person_scopes(store, "telegram", ["alice", "telegram.alice"])
    assert moved["telegram_alice"] == "person:telegram:telegram.alice"
    assert store.get("dm_101").session_id == "telegram_alice"  # type: ignore[union-attr]
    row = store.get("session:telegram_alice")
    assert row is not None and "telegram_alice" == row.session_id
    assert store.get("tea").session_id == "person:telegram:telegram.alice"  # type: ignore[union-attr]


def test_the_event_names_the_messages_channel() -> None:
    store = InMemoryStore()
    store.store("f", "production deploys go to prod-3")
    bot = ChannelAdapter(store, parse_agent_config({"agent": "a"}), channel_name="telegram")
    turn = bot.handle(
        InboundMessage(
            channel="slack",
            sender="bob",
            text="where do production deploys go?",
            reply_target="bob",
            message_id="1",
            history_key="slack_bob",
        )
    )
    assert turn.event is not None and "slack" == turn.event.channel
    assert "person:slack:bob" in turn.sessions
    numbered = attrs.evolve(turn.message, channel=7)  # type: ignore[arg-type]
    assert "7" == bot.handle(numbered).event.channel  # type: ignore[union-attr]


def test_explain_shows_a_contested_memory_as_rendered_in_its_section() -> None:
    """``render --explain`` said "dropped by status_filter" for the contested memory the
    sectioned block shows in its Contested section (round 35); the event never did."""
    from memory_inject import render_memory_context
    from memory_inject.cli._explain import explain_rows

    cfg = parse_agent_config({"agent": "pi", "memory": {"preset": "pi"}}).memory
    store = InMemoryStore()
    store.store("pnpm", "Use pnpm for the monorepo", status="contested", confidence=0.6)
    store.store("npm", "Use npm for the monorepo", status="archived", confidence=0.6)
    store.store("bun", "Use bun for the monorepo scripts", status="active", confidence=0.9)
    out = render_memory_context(
        store, "which package manager for the monorepo?", config=cfg, profile="project:x"
    )
    assert "CONTESTED: [pnpm" in out.text and "pnpm" not in out.event.dropped  # type: ignore[union-attr]
    seen = {e.key: e for e in out.entries}
    outcome = {row[0]: row[-1] for row in explain_rows(seen, out)[1]}
    assert outcome["pnpm"] == "rendered, in its section (status_filter: status:contested)"
    assert outcome["npm"] == "dropped by status_filter: status:archived"
    assert outcome["bun"] == "rendered"


def test_preset_pi_records_no_channel_sessions_unless_the_file_says_so() -> None:
    """Under ``preset: pi`` a session row is bound to the profile and Today's Sessions shows
    every session of it: a channel bot's group decision showed in other people's DMs."""
    pi = parse_agent_config({"agent": "bot", "memory": {"preset": "pi"}})
    assert pi.memory.sessions.record is True
    assert pi.memory.for_origin("channel").sessions.record is False
    assert pi.memory.for_origin("interactive").sessions.record is True
    store = InMemoryStore()
    bot = ChannelAdapter(store, pi, channel_name="whatsapp")
    a = bot.handle(_msg("we will acquire Initech in March #decision", "111@g.us", "1"))
    assert a.session_key is None and [] == store.list(category="session")
    on = parse_agent_config(
        {
            "agent": "bot",
            "memory": {"preset": "pi", "origins": {"channel": {"sessions": {"record": True}}}},
        }
    )
    assert on.memory.for_origin("channel").sessions.record is True
