"""``embedder_model`` with the hashing embedder is a config error (twenty-eighth round).

Found by a helper: the setting was silently ignored, so a file that named a model for
``embedder: hashing`` loaded and embedded with no model at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_inject import load_agent_config
from memory_inject.exceptions import ConfigError


def test_a_model_for_the_hashing_embedder_is_named(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(
        "agent: a\nmemory:\n  backend: {embedder: hashing, embedder_model: all-MiniLM-L6-v2}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_agent_config(path)
    assert (
        f"{path}: 'embedder_model' must be null when 'embedder' is hashing, which has no "
        "model (got 'all-MiniLM-L6-v2') @ $.memory.backend.embedder_model",
    ) == info.value.problems


def test_hashing_without_a_model_loads(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("agent: a\nmemory:\n  backend: {embedder: hashing}\n")
    assert "hashing" == load_agent_config(path).memory.backend.embedder
