"""Placement of the block on OpenAI chat and Anthropic messages lists (adapters/messages.py)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pytest

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import has_block, inject_block, message_text, user_message_index
else:
    from memory_inject.adapters import has_block, inject_block, message_text, user_message_index

BLOCK = "[Memory context]\n- deploy_target: prod-3\n[/Memory context]\n\n"


def openai_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "where do deploys go?"},
    ]


def anthropic_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "hello there"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
                {
                    "type": "text",
                    "text": "where do deploys go?",
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
    ]


class TestPrefixUser:
    def test_string_content_gets_the_block_in_front(self) -> None:
        """A string user message becomes block + text; the system message is untouched."""
        history = openai_history()
        out = inject_block(history, BLOCK)
        assert {"role": "user", "content": BLOCK + "where do deploys go?"} == out[-1]
        assert history[0] is out[0]

    def test_block_lists_get_a_new_first_text_block(self) -> None:
        """An Anthropic block list gets the block as a new first text block; its own blocks stay."""
        history = anthropic_history()
        out = inject_block(history, BLOCK, api="anthropic")
        expected = [{"type": "text", "text": BLOCK}, *history[-1]["content"]]
        assert expected == out[-1]["content"]
        assert history[-1]["content"][1] is out[-1]["content"][2]

    def test_the_input_and_its_messages_are_never_mutated(self) -> None:
        """inject_block returns a new list and leaves every input message as it was."""
        for history in (openai_history(), anthropic_history()):
            before = copy.deepcopy(history)
            out = inject_block(history, BLOCK)
            assert before == history
            assert out is not history
            assert all(a is b for a, b in zip(history[:-1], out[:-1], strict=True))

    def test_a_second_injection_adds_nothing(self) -> None:
        """Placing the block on a list that already carries it returns an equal list."""
        for history in (openai_history(), anthropic_history()):
            once = inject_block(history, BLOCK)
            assert once == inject_block(once, BLOCK)

    def test_a_message_starting_with_the_marker_is_left_alone(self) -> None:
        """zeroclaw's check: a user message already starting with [Memory context] is kept."""
        history = [{"role": "user", "content": "[Memory context]\nold\n[/Memory context]\n\nq"}]
        assert history == inject_block(history, BLOCK)


class TestSeparateMessage:
    def test_a_user_role_message_goes_right_before_the_user_message(self) -> None:
        """The block is its own user message in front of the user's; the system one stays."""
        history = openai_history()
        out = inject_block(history, BLOCK, placement="message")
        assert [*history[:3], {"role": "user", "content": BLOCK}, history[3]] == out

    def test_block_lists_get_a_block_list_message(self) -> None:
        """With list content the inserted message holds one text block."""
        out = inject_block(anthropic_history(), BLOCK, placement="message", api="anthropic")
        assert {"role": "user", "content": [{"type": "text", "text": BLOCK}]} == out[2]

    def test_the_separate_message_is_not_added_twice(self) -> None:
        """Retrying with the returned list adds no second block message."""
        for history in (openai_history(), anthropic_history()):
            once = inject_block(history, BLOCK, placement="message")
            assert once == inject_block(once, BLOCK, placement="message")
            assert has_block(once)

    def test_an_earlier_prefixed_user_message_is_not_taken_for_a_block_message(self) -> None:
        """Two user messages in a row: one prefixed last turn is not this turn's block."""
        history = [
            {"role": "user", "content": BLOCK + "first question"},
            {"role": "user", "content": "second question"},
        ]
        out = inject_block(history, BLOCK, placement="message")
        assert [history[0], {"role": "user", "content": BLOCK}, history[1]] == out


class TestUserMessage:
    def test_tool_result_carriers_are_not_the_users_message(self) -> None:
        """In an Anthropic tool loop the block stays with the message that started the turn."""
        history = [
            *anthropic_history(),
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}],
            },
        ]
        assert 2 == user_message_index(history)
        out = inject_block(history, BLOCK)
        assert BLOCK == out[2]["content"][0]["text"]
        assert history[4] is out[4]

    def test_openai_api_takes_the_last_user_role_message(self) -> None:
        """With api='openai' every user-role message counts (OpenAI tools use role 'tool')."""
        history: list[dict[str, Any]] = [
            {"role": "user", "content": "q"},
            {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
        ]
        assert 1 == user_message_index(history, api="openai")
        assert 0 == user_message_index(history, api="anthropic")

    def test_no_user_message_means_no_change(self) -> None:
        """A list without a user message comes back equal; so does an empty block."""
        system_only = [{"role": "system", "content": "sys"}]
        assert system_only == inject_block(system_only, BLOCK)
        assert openai_history() == inject_block(openai_history(), "")

    def test_other_renderers_headers_count_as_a_placed_block(self) -> None:
        """Blocks of the sectioned and relevant_memories renderers are recognised too."""
        for head in ("# Persistent Intelligence Context\n", "## Relevant Memories\n"):
            history = [{"role": "user", "content": head + "- x\n\nquestion"}]
            assert history == inject_block(history, BLOCK)

    def test_message_text_joins_the_text_blocks(self) -> None:
        """The text of a block list is its text blocks joined by newlines."""
        msg = {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "source": {}},
                {"type": "text", "text": "b"},
            ],
        }
        assert "a\nb" == message_text(msg)


class TestBadInput:
    def test_unknown_placement_and_api_are_refused(self) -> None:
        """A typo in placement or api is a ValueError naming the allowed values."""
        with pytest.raises(ValueError, match="'placement' must be one of"):
            inject_block(openai_history(), BLOCK, placement="system")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="'api' must be one of"):
            inject_block(openai_history(), BLOCK, api="gemini")  # type: ignore[arg-type]

    def test_a_non_mapping_message_is_a_type_error(self) -> None:
        """Messages must be dicts; anything else names its index."""
        with pytest.raises(TypeError, match=r"'messages\[0\]' must be a message"):
            inject_block(["hello"], BLOCK)  # deliberately not a message

    def test_user_content_of_another_type_is_a_type_error(self) -> None:
        """A user message whose content is neither text nor blocks cannot be prefixed."""
        with pytest.raises(TypeError, match="'content' of the user message"):
            inject_block([{"role": "user", "content": None}], BLOCK)
