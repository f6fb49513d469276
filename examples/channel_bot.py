"""A chat bot's turns through ChannelAdapter: DM and group scopes, autosave of peers' messages.

python examples/channel_bot.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from memory_inject import AgentConfig
from memory_inject.adapters import ChannelAdapter, InboundMessage
from memory_inject.storage.sqlite import SQLiteStore


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "memory.db")
        store.store("support_hours", "Support answers 9:00-17:00 CET, Monday to Friday.", "core")
        bot = ChannelAdapter(
            store, AgentConfig(agent="support-bot"), channel_name="telegram", autosave=True
        )
        inbox = [
            InboundMessage(
                channel="telegram",
                sender="alice",
                reply_target="alice",
                message_id="101",
                history_key="telegram_alice",
                text="My invoice INV-77 was charged twice, please refund it.",
            ),
            InboundMessage(
                channel="telegram",
                sender="alice",
                reply_target="alice",
                message_id="102",
                history_key="telegram_alice",
                text="any news on the refund for my invoice?",
            ),
            InboundMessage(
                channel="whatsapp",
                sender="+4915112345",
                reply_target="4711@g.us",
                message_id="9",
                history_key="whatsapp_4711@g.us",
                text="what are your support hours?",
            ),
        ]
        turns = []
        for msg in inbox:
            turn = bot.handle(msg)
            turns.append(turn)
            kind = "group" if msg.reply_target.endswith("@g.us") else "DM"
            print(
                f"{kind} from {msg.sender}: scopes {list(turn.sessions)}, "
                f"autosaved {turn.autosaved_key}"
            )
            print("  model gets:", repr(turn.prefixed()))
        # Alice's first message was saved after its own turn and is recalled in her next one.
        if "INV-77" in turns[0].block or "INV-77" not in turns[1].block:
            raise SystemExit("the autosaved message was not recalled in the next turn")
        store.close()
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
