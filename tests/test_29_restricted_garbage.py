"""A governed or sectioned turn names what is not an entry, as any turn does (twenty-eighth
round).

Found by a helper: those turns ask with a restriction (statuses, profiles) that a store
without ``answer`` gets applied in Python, and that filter dropped a non-entry silently:
``success=True``, no error, nothing in ``dropped``, where an unrestricted turn says
``invalid_entries`` and names it ``<invalid #0>``.
"""

from __future__ import annotations

import pytest

from memory_inject import MemoryEntry, MemoryInjectConfig, MemoryRecall, render_memory_context
from memory_inject.config.schema import GovernanceConfig
from memory_inject.testing import FixtureMemory

CONFIGS = {
    "bracket": MemoryInjectConfig(),
    "sectioned": MemoryInjectConfig(renderer="sectioned"),
    "governed": MemoryInjectConfig(governance=GovernanceConfig(enabled=True)),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_non_entry_is_named_and_the_entry_still_renders(name: str) -> None:
    good = MemoryEntry("k", "server deploy note", "core", None, score=0.9)
    store = FixtureMemory({None: [42, good, "text"]})
    result = render_memory_context(store, "server deploy", config=CONFIGS[name])
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert ["k"] == [e.key for e in result.entries]
    assert event.success is False
    assert "invalid_entries: store returned 2 non-entries" == event.error
    assert {"<invalid #0>": "invalid_entry:int", "<invalid #1>": "invalid_entry:str"} == {
        k: v for k, v in event.dropped.items() if k.startswith("<invalid")
    }
