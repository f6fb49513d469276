"""The model's memory tools write nothing where memory is off (issue 29, thirty-first round).

docs/adapters.md (Autosave): with ``origins: {channel: {enabled: false}}`` memory is off for
channel turns, "reads and writes alike". A tester's Telegram bot: the channel turn skipped
(``origin_disabled``) and did not autosave, and ``memory_recall`` bound with
``origin="channel"`` refused, but ``memory_store`` wrote the user's IBAN into the chat's
scope, which later turns of other origins injected. ``memory_forget`` changed memory the
same way. Both are now refused with one line for the model, and the store is unchanged.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from memory_inject.config import parse_agent_config
from memory_inject.storage import InMemoryStore

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import ChannelAdapter, InboundMessage, MemoryTools, memory_tools
else:
    from memory_inject.adapters import ChannelAdapter, InboundMessage, MemoryTools, memory_tools

CHAT = "telegram_-1001234567890"
OFF = parse_agent_config({"agent": "bot", "memory": {"origins": {"channel": {"enabled": False}}}})
IBAN = "The user's IBAN is DE89 3704 0044 0532 0130 00"


def _call(tools: MemoryTools, name: str, args: dict[str, str], mode: str) -> str:
    if mode == "async":
        return asyncio.run(tools.acall(name, args))
    return tools.call(name, args)


@pytest.mark.parametrize("mode", ["sync", "async"])
class TestMemoryOffForTheOrigin:
    def test_the_store_tool_of_a_disabled_channel_writes_nothing(self, mode: str) -> None:
        """``memory_store`` bound to a channel turn whose origin is disabled is refused,
        as that turn's recall and autosave are: the store stays empty."""
        store = InMemoryStore()
        bot = ChannelAdapter(store, OFF, channel_name="telegram", autosave=True)
        turn = bot.handle(
            InboundMessage(
                channel="telegram",
                sender="123456789",
                text="remember my IBAN is DE89 3704 0044 0532 0130 00",
                reply_target="-1001234567890",
                message_id="42",
                history_key=CHAT,
            )
        )
        assert ("origin_disabled", None) == (turn.policy.reason, turn.autosaved_key)
        tools = memory_tools(store, OFF, sessions=turn.sessions, origin="channel")
        said = _call(tools, "memory_store", {"content": IBAN}, mode)
        assert "Error: memory is off for channel turns (origin_disabled); nothing was stored" == (
            said
        )
        assert [] == store.list()
        recall = _call(tools, "memory_recall", {"query": "IBAN"}, mode)
        assert "No memories matched. (origin_disabled)" == recall

    def test_the_forget_tool_of_a_disabled_channel_forgets_nothing(self, mode: str) -> None:
        """``memory_forget`` is a write too: refused, the chat's row is still there."""
        store = InMemoryStore()
        store.store("iban", IBAN, "core", session_id=CHAT, source="tool")
        tools = memory_tools(store, OFF, sessions=[CHAT], origin="channel")
        said = _call(tools, "memory_forget", {"key": "iban"}, mode)
        assert (
            "Error: memory is off for channel turns (origin_disabled); nothing was forgotten"
            == (said)
        )
        assert ["iban"] == [r.key for r in store.list()]

    def test_a_sub_turns_tools_write_nothing(self, mode: str) -> None:
        """Tools bound to a ``sub_turn`` (no memory by policy) refuse as recall does."""
        store = InMemoryStore()
        tools = memory_tools(store, OFF, sessions=["s1"], origin="sub_turn")
        said = _call(tools, "memory_store", {"content": IBAN}, mode)
        assert "Error: memory is off for sub_turn turns (sub_turn); nothing was stored" == said
        assert [] == store.list()

    def test_other_origins_of_the_same_agent_still_write_and_forget(self, mode: str) -> None:
        """Control: only the disabled origin is refused; an interactive turn's tools of the
        same agent store and forget as before."""
        store = InMemoryStore()
        tools = memory_tools(store, OFF, sessions=["cli_main"], origin="interactive")
        said = _call(tools, "memory_store", {"content": IBAN, "key": "iban"}, mode)
        assert "Remembered as 'iban'." == said
        assert "Forgot 'iban'." == _call(tools, "memory_forget", {"key": "iban"}, mode)
