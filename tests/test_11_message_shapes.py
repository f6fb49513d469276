"""Issue 11, message shapes: prepare reads the SDKs' own objects and items, never raises."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageParam
from openai.types.responses import (
    EasyInputMessage,
    ResponseFunctionToolCall,
    ResponseInputParam,
    ResponseInputText,
)
from pydantic import TypeAdapter

from memory_inject import AgentConfig
from memory_inject.signals import MemorySkipped, memory_skipped
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._twins import call, twin  # noqa: F401

if TYPE_CHECKING:
    from adapters import MemoryLoop
    from adapters.messages import message_text
else:
    from memory_inject.adapters import MemoryLoop
    from memory_inject.adapters.messages import message_text

QUESTION = "where do production deploys go?"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "memory.db")
    s.store("deploy_target", "Production deploys go to prod-3 (eu-west-1).", "core")
    s.store("standup", "The daily standup moved to 10:00 CET.", "daily")
    yield s
    s.close()


@pytest.fixture
def loop(store: SQLiteStore) -> MemoryLoop:
    return MemoryLoop(store, AgentConfig(agent="alice"))


class TestOpenAIChatObjects:
    def test_a_chat_completion_message_in_the_list_is_read_and_kept(self, loop: MemoryLoop) -> None:
        """The function-calling guide appends the SDK's message object; prepare keeps it as is."""
        reply = ChatCompletionMessage.model_validate(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": "{}"},
                    }
                ],
            }
        )
        history: list[Any] = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": QUESTION},
            reply,
            {"role": "tool", "tool_call_id": "call_1", "content": "prod-3"},
        ]
        with recording() as rec:
            out = call(loop, "prepare", history)
        assert reply is out[2] and history[0] is out[0] and history[3] is out[3]
        assert out[1]["content"].startswith("[Memory context]\n- deploy_target: ")
        assert [QUESTION] == [e.query_summary for e in rec.events]
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(
            [m if isinstance(m, dict) else m.model_dump(exclude_unset=True) for m in out]
        )

    def test_an_audio_part_keeps_a_chat_message_a_chat_message(self, loop: MemoryLoop) -> None:
        """Chat Completions has an ``input_audio`` part too: the block is a ``text`` part
        there (any ``input_*`` part was taken for Responses input, and the block became an
        ``input_text`` part, which Chat Completions' schema does not have)."""
        audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
        content = [{"type": "text", "text": QUESTION}, audio]
        out = call(loop, "prepare", [{"role": "user", "content": content}])
        assert ["text", "text", "input_audio"] == [p["type"] for p in out[0]["content"]]
        assert out[0]["content"][0]["text"].startswith("[Memory context]")
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(out)


class TestResponsesItems:
    def test_input_text_parts_are_the_query_and_the_block_is_an_input_text_part(
        self, loop: MemoryLoop
    ) -> None:
        """A Responses item's input_text parts are read; the block part validates as input."""
        items: list[Any] = [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": QUESTION},
                    {
                        "type": "input_image",
                        "image_url": "https://x.invalid/a.png",
                        "detail": "auto",
                    },
                ],
            }
        ]
        with recording() as rec:
            out = call(loop, "prepare", items)
        parts = out[0]["content"]
        assert "input_text" == parts[0]["type"] and parts[0]["text"].startswith("[Memory context]")
        assert items[0]["content"] == parts[1:]
        assert [QUESTION] == [e.query_summary for e in rec.events]
        TypeAdapter(ResponseInputParam).validate_python(out)

    def test_a_pydantic_user_item_keeps_its_class_and_gets_an_sdk_part(
        self, loop: MemoryLoop
    ) -> None:
        """A user item given as an SDK model is copied with model_copy, its parts stay objects."""
        item = EasyInputMessage(
            role="user", content=[ResponseInputText(type="input_text", text=QUESTION)]
        )
        out = call(loop, "prepare", [item])
        assert isinstance(out[0], EasyInputMessage) and out[0] is not item
        first = out[0].content[0]
        assert isinstance(first, ResponseInputText) and first.text.startswith("[Memory context]")
        assert QUESTION == message_text(item)

    def test_role_less_items_after_the_user_message_are_passed_over(self, loop: MemoryLoop) -> None:
        """``input += response.output`` appends SDK items with no role (function_call);
        they and function_call_output are passed over, and kept as the same objects."""
        tool_call = ResponseFunctionToolCall(
            type="function_call", call_id="c1", name="lookup", arguments="{}"
        )
        items: list[Any] = [
            {"role": "user", "content": QUESTION},
            tool_call,
            {"type": "function_call_output", "call_id": "c1", "output": "prod-3"},
        ]
        out = call(loop, "prepare", items)
        assert out[0]["content"].startswith("[Memory context]") and items[1:] == out[1:]
        assert tool_call is out[1]


class _Opaque:
    """Something no SDK sends: no role, no type."""


class TestUnreadableShapes:
    def test_an_unreadable_message_is_left_untouched_and_reported(self, loop: MemoryLoop) -> None:
        """prepare never raises on a shape it cannot read: the list goes out as is, one
        memory_skipped says unreadable_message and the turn's error names the index."""
        opaque = _Opaque()
        history: list[Any] = [{"role": "user", "content": QUESTION}, opaque]
        skipped: list[MemorySkipped] = []

        def receiver(sender: object, *, event: MemorySkipped) -> None:
            skipped.append(event)

        memory_skipped.connect(receiver)
        try:
            with recording() as rec:
                result = call(loop, "inject", history)
        finally:
            memory_skipped.disconnect(receiver)
        assert history == result.messages and result.messages[1] is opaque
        assert ([], ["unreadable_message"]) == (rec.events, [e.reason for e in skipped])
        assert result.injection.error.startswith("unreadable_message: 'messages[1]' must be")
        assert "_Opaque" in result.injection.error

    def test_a_user_content_of_no_known_shape_is_reported(self, loop: MemoryLoop) -> None:
        """A user message whose content is None is reported on the turn, not raised."""
        result = call(loop, "inject", [{"role": "user", "content": None}])
        assert "" == result.block
        assert "'messages[0].content' of the user message" in result.injection.error
