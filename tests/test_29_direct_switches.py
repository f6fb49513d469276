"""A render called without an origin keeps the file's switches (twenty-ninth round).

Found by a helper checking every documented key: ``render_memory_context(store, q,
config=agent.memory)``, the way configuration.md's examples call it, injected with
``memory.enabled: false`` and ignored ``trivial_prompt``; both held only with ``origin=``.
"""

from __future__ import annotations

from memory_inject import InMemoryStore, MemoryRecall, MemorySkipped, render_memory_context
from memory_inject.config import parse_agent_config


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.store("deploy_target", "Production deploys go to prod-3.")
    return store


def test_enabled_false_skips_a_direct_render() -> None:
    cfg = parse_agent_config({"agent": "a", "memory": {"enabled": False}}).memory
    result = render_memory_context(_store(), "where do deploys go?", config=cfg)
    assert "" == result.text
    assert isinstance(result.event, MemorySkipped)
    assert "origin_disabled" == result.event.reason


def test_the_trivial_filter_skips_a_direct_render() -> None:
    memory = {"trivial_prompt": {"enabled": True}}
    cfg = parse_agent_config({"agent": "a", "memory": memory}).memory
    result = render_memory_context(_store(), "/deploys", config=cfg)
    assert isinstance(result.event, MemorySkipped)
    assert "trivial_prompt" == result.event.reason
    kept = render_memory_context(_store(), "where do production deploys go?", config=cfg)
    assert isinstance(kept.event, MemoryRecall)
    assert ("deploy_target",) == kept.event.rendered_keys


def test_an_origin_turned_back_on_does_not_reach_a_direct_render() -> None:
    """``origins`` name origins; a render without one has only the top-level switch."""
    memory = {"enabled": False, "origins": {"cron": {"enabled": True}}}
    cfg = parse_agent_config({"agent": "a", "memory": memory}).memory
    assert "" == render_memory_context(_store(), "where do deploys go?", config=cfg).text
    on = render_memory_context(_store(), "where do deploys go?", config=cfg, origin="cron")
    assert "prod-3" in on.text
