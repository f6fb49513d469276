"""The model is told what each category of ``memory_store`` is for.

A hunter's model stored a recurring event as ``daily`` (the schema listed the names
only) and lost it to time decay within days.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_inject import AgentConfig, InMemoryStore

if TYPE_CHECKING:
    from adapters import memory_tools
else:
    from memory_inject.adapters import memory_tools


def _category(params: Any) -> dict[str, Any]:
    return dict(params["properties"]["category"])


def test_every_sdk_shape_describes_the_categories() -> None:
    tools = memory_tools(InMemoryStore(), AgentConfig(agent="t"), sessions=["s"])
    shapes = [
        next(
            t["function"]["parameters"]
            for t in tools.openai()
            if t["function"]["name"] == "memory_store"
        ),
        next(t["parameters"] for t in tools.responses() if t["name"] == "memory_store"),
        next(t["input_schema"] for t in tools.anthropic() if t["name"] == "memory_store"),
    ]
    for params in shapes:
        category = _category(params)
        assert category["enum"] == ["core", "daily", "conversation"]
        text = category["description"]
        assert "core" in text and "lasting" in text
        assert "daily" in text and "fades" in text
