"""A short Chinese, Japanese or Korean message says as much as a longer English one.

A hunter's Chinese chat fact "我女儿叫小丽，她在上小学" (12 characters: "my daughter is
called Xiaoli, she is in primary school") was never autosaved under the 20-character
minimum, so the next session could not recall it. Wide characters count twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from memory_inject import AgentConfig, InMemoryStore
from memory_inject.policy import AUTOSAVE_MIN_CHARS, should_autosave

if TYPE_CHECKING:
    from adapters import ChannelAdapter, InboundMessage
else:
    from memory_inject.adapters import ChannelAdapter, InboundMessage


@pytest.mark.parametrize(
    ("text", "saved"),
    [
        ("我女儿叫小丽，她在上小学", True),
        ("娘の名前は花子です。", True),  # 10 wide characters
        ("우리 딸 이름은 지민이에요", True),
        ("谢谢你", False),
        ("好的好的", False),
        ("ok thanks, see you!", False),  # 19 ASCII characters
        ("Meine Tochter heißt Lena", True),
        ("Ｈｅｌｌｏ", False),  # five full-width letters say no more than "Hello"
        ("😂" * 10, False),  # emoji are not words (an attack on the first version)
        ("👍🏻" * 5, False),
        ("ｏｋ" * 5, False),
        ("   \n[Memory context]\n- 小丽: 女儿\n", False),
    ],
)
def test_wide_characters_count_twice(text: str, saved: bool) -> None:
    assert should_autosave("channel", text) is saved


def test_a_wide_message_under_the_minimum_is_not_saved_whatever_its_origin() -> None:
    assert AUTOSAVE_MIN_CHARS == 20
    nine = "我" * 9  # width 18
    assert not should_autosave("interactive", nine)
    assert should_autosave("interactive", nine + "的")  # width 20
    assert not should_autosave("cron", "我女儿叫小丽，她在上小学")


def test_a_chat_fact_in_chinese_is_saved_and_recalled_next_turn() -> None:
    store = InMemoryStore()
    bot = ChannelAdapter(store, AgentConfig(agent="t"), channel_name="telegram", autosave=True)

    def said(text: str, n: int, who: str = "anna") -> InboundMessage:
        return InboundMessage(
            channel="telegram",
            sender=f"@{who}",
            text=text,
            reply_target=who,
            message_id=str(n),
            history_key=f"telegram_{who}",
        )

    first = bot.handle(said("我女儿叫小丽，她在上小学", 1))
    assert first.autosaved_key is not None
    again = bot.handle(said("小丽在上小学吗？", 2))
    assert "我女儿叫小丽" in again.block
    other = bot.handle(said("小丽在上小学吗？", 3, who="bob"))
    assert "我女儿叫小丽" not in other.block
