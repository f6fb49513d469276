"""A number written with an exponent and no dot is a number (twenty-eighth round).

PyYAML reads YAML 1.1, where "1e-3" is text; a number setting then refused it as "must
be a number (got '1e-3')", a value that reads as a number. YAML 1.2 and every other
reader take it as one; so does the agent file now.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_inject import load_agent_config
from memory_inject.exceptions import ConfigError


@pytest.mark.parametrize(("written", "value"), [("5e-1", 0.5), ("1E-3", 0.001), ("+2e-1", 0.2)])
def test_an_exponent_without_a_dot_is_a_number(tmp_path: Path, written: str, value: float) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(f"agent: a\nmemory:\n  min_relevance_score: {written}\n")
    assert value == pytest.approx(load_agent_config(path).memory.min_relevance_score)


def test_a_quoted_one_is_still_text(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text('agent: a\nmemory:\n  min_relevance_score: "5e-1"\n')
    with pytest.raises(ConfigError, match="'min_relevance_score' must be a number"):
        load_agent_config(path)
