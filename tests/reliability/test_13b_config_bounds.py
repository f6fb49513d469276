"""Configs that load and then break every render, and loader tracebacks (issue 13, items 7-8).

Every numeric key has an upper bound checked at load, so a value that would
overflow the deadline arithmetic or ask a store for 1e20 rows is refused with
the file and the key named. A 400-digit integer for a float key, deep nesting,
bad tags, devices and FIFOs give a ``ConfigError`` from the loader and a clean
``memory-inject validate`` exit. A ``tokenizer:`` naming an encoding that has
no offline copy is refused without a download being attempted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_inject import _tokens
from memory_inject.cli import cli
from memory_inject.config import MemoryInjectConfig, load_agent_config
from memory_inject.exceptions import ConfigError

# -- the numeric keys, found by walking the config classes ---------------------------


def _numeric_keys(cls: type, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """``(path, attribute)`` of every int or float setting reachable from ``cls``."""
    for a in attrs.fields(cls):
        if not a.init:
            continue
        default = a.default
        factory = getattr(default, "factory", None)
        value = factory() if callable(factory) else default
        if attrs.has(type(value)) and a.metadata.get("kind") is None:
            yield from _numeric_keys(type(value), (*path, a.name))
        elif a.metadata.get("kind") in ("int", "float"):
            yield (*path, a.name), a


NUMERIC = sorted(_numeric_keys(MemoryInjectConfig), key=lambda item: item[0])
# Keys that only a sectioned or relevant_memories renderer accepts need their kind set.
_KIND_FOR = {"max_entries": "relevant_memories"}


def _yaml_for(path: tuple[str, ...], value: object) -> str:
    """An agent file setting ``memory.<path>`` to ``value`` (and the renderer kind it needs)."""
    mapping: dict[str, Any] = {}
    node = mapping
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    if path[0] == "renderer":
        kind = _KIND_FOR.get(path[-1], "sectioned") if len(path) == 2 else "sectioned"
        mapping["renderer"]["kind"] = kind
    return "agent: a\nmemory: " + _flow(mapping) + "\n"


def _flow(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return str(value)


def _load(tmp_path: Path, text: str, name: str = "agent.yaml") -> ConfigError:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_agent_config(path)
    return info.value


class TestUpperBounds:
    def test_every_numeric_key_has_an_upper_bound(self) -> None:
        """No int or float setting is unbounded above: each carries an ``le`` at load."""
        unbounded = [".".join(p) for p, a in NUMERIC if "le" not in a.metadata]
        assert [] == unbounded
        assert len(NUMERIC) >= 30  # the walk found the nested groups too

    def test_one_past_each_bound_names_the_file_and_the_key(self, tmp_path: Path) -> None:
        """For every numeric key, its bound plus one is refused with the file, key and path."""
        missed = []
        for path, attr in NUMERIC:
            bound = attr.metadata["le"]
            over = bound + 1 if attr.metadata["kind"] == "int" else float(bound) * 2 + 1
            err = _load(tmp_path, _yaml_for(path, over), "bounds.yaml")
            where = "$.memory" + "".join(f".{p}" for p in path[:-1])
            if not any(
                p.startswith(f"{tmp_path / 'bounds.yaml'}: '{path[-1]}' must be <= ")
                and p.endswith(f" @ {where}")
                for p in err.problems
            ):
                missed.append((".".join(path), err.problems))
        assert [] == missed

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        key=st.sampled_from(["deadline_ms", "recall_limit"]),
        value=st.integers(min_value=10**6, max_value=10**30),
    )
    def test_huge_deadlines_and_limits_are_refused_at_load(self, key: str, value: int) -> None:
        """A deadline of years or a recall of 1e20 rows fails the load, never a render."""
        build: Callable[[], MemoryInjectConfig] = {
            "deadline_ms": lambda: MemoryInjectConfig(deadline_ms=value),
            "recall_limit": lambda: MemoryInjectConfig(recall_limit=value),
        }[key]
        with pytest.raises(ValueError, match=f"'{key}' must be <= "):
            build()

    def test_a_huge_plan_query_limit_is_refused(self, tmp_path: Path) -> None:
        """A recall-plan query limit of 1e20 is refused with its list path."""
        text = (
            "agent: a\nmemory:\n  recall_plan:\n    enabled: true\n"
            "    queries: [{source: lexical, limit: 100000000000000000000}]\n"
        )
        err = _load(tmp_path, text)
        assert any(
            "'limit' must be <= 1024" in p and p.endswith("@ $.memory.recall_plan.queries[0]")
            for p in err.problems
        ), err.problems

    def test_per_origin_overrides_are_bounded_too(self, tmp_path: Path) -> None:
        """An override past a bound is refused at its origin's path."""
        text = "agent: a\nmemory:\n  origins:\n    cron: {deadline_ms: 10000000000000}\n"
        err = _load(tmp_path, text)
        assert any(
            "'deadline_ms' must be <= 600000" in p and p.endswith("@ $.memory.origins.cron")
            for p in err.problems
        ), err.problems


FLOATS = [p for p, a in NUMERIC if a.metadata["kind"] == "float"]


class TestHugeIntegersForFloatKeys:
    @pytest.mark.parametrize("path", FLOATS, ids=[".".join(p) for p in FLOATS])
    def test_a_400_digit_integer_is_a_config_error(self, tmp_path: Path, path: tuple[str]) -> None:
        """An integer too large for a float is 'must be a finite number', not OverflowError."""
        err = _load(tmp_path, _yaml_for(path, "9" * 400))
        assert any(f"'{path[-1]}' must be a finite number" in p for p in err.problems)

    def test_programmatic_construction_words_it_the_same(self) -> None:
        """The attrs validator refuses the same value with the same words."""
        with pytest.raises(ValueError, match="'min_relevance_score' must be a finite number"):
            MemoryInjectConfig(min_relevance_score=7**500)


# -- validate: the hardened loader --------------------------------------------------


def _validate(*paths: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["validate", *paths])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


class TestValidate:
    def test_deep_nesting_is_one_problem(self, tmp_path: Path) -> None:
        """200 nested mappings: 'nested too deeply', exit 1, no RecursionError."""
        path = tmp_path / "deep.yaml"
        path.write_text("agent: a\nmemory: " + "{a: " * 200 + "1" + "}" * 200 + "\n")
        code, out = _validate(str(path))
        assert (1, f"{path}: is nested too deeply @ $\n") == (code, out)

    def test_nesting_just_under_the_recursion_limit_is_refused_early(self, tmp_path: Path) -> None:
        """40 nested lists (well within Python's stack) are refused by the depth guard."""
        path = tmp_path / "deep.yaml"
        path.write_text("agent: a\nmemory: {recall_limit: " + "[" * 40 + "]" * 40 + "}\n")
        code, out = _validate(str(path))
        assert (1, f"{path}: is nested too deeply @ $\n") == (code, out)


# -- tokenizers that would download --------------------------------------------------


@pytest.fixture
def no_download(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record (and refuse) every BPE file tiktoken tries to fetch or read."""
    import tiktoken.load

    fetched: list[str] = []

    def refuse(blobpath: str, *args: object, **kwargs: object) -> bytes:
        fetched.append(blobpath)
        raise OSError("network is off in this test")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    _tokens.load_encoding.cache_clear()
    yield fetched
    _tokens.load_encoding.cache_clear()


class TestOfflineTokenizers:
    @pytest.mark.parametrize("name", ["o200k_base", "gpt2", "r50k_base", "p50k_base"])
    def test_a_registered_online_encoding_is_refused_without_fetching(
        self, tmp_path: Path, no_download: list[str], name: str
    ) -> None:
        """The loader names the key and never asks tiktoken for the file."""
        text = f"agent: a\nmemory:\n  budget: {{max_total_tokens: 100, tokenizer: {name}}}\n"
        err = _load(tmp_path, text)
        assert [] == no_download
        assert any(
            p.startswith(f"{tmp_path / 'agent.yaml'}: 'tokenizer' must name a tiktoken encoding")
            and f"(got {name!r})" in p
            and p.endswith("@ $.memory.budget")
            for p in err.problems
        ), err.problems

    def test_the_offline_encoding_still_loads(self, tmp_path: Path) -> None:
        """cl100k_base resolves to its offline twin and counts tokens."""
        path = tmp_path / "agent.yaml"
        path.write_text("agent: a\nmemory:\n  budget: {max_total_tokens: 100}\n")
        assert 100 == load_agent_config(path).memory.budget.max_total_tokens
        assert _tokens.count_tokens("hello world", "cl100k_base") > 0
