"""Store a handful of facts and render a prompt against them: the shape of many store tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_inject import render_memory_context


def rendered_keys(
    store: Any, facts: Mapping[str, str], prompt: str, session: str | None = None
) -> list[str]:
    """The keys the default render shows for ``prompt`` after storing ``facts`` (in
    ``session``, rendered for it), in order."""
    for key, text in facts.items():
        store.store(key, text, session_id=session)
    sessions = () if session is None else [session]
    return [e.key for e in render_memory_context(store, prompt, sessions=sessions).entries]
