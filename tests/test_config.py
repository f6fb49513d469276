"""Tests for memory_inject.config: defaults, examples, per-origin overrides and every error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest
import yaml

from memory_inject.config import (
    AgentConfig,
    BudgetConfig,
    MemoryInjectConfig,
    RendererConfig,
    RerankConfig,
    SectionCapsConfig,
    config_to_dict,
    load_agent_config,
    parse_agent_config,
)
from memory_inject.exceptions import ConfigError
from memory_inject.models import TurnOrigin
from memory_inject.policy import InjectPolicy, resolve_inject_policy

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
AGENT_FILES = sorted((CONFIG_DIR / "agents").glob("*.yaml"))
ORIGINS = "['interactive', 'channel', 'cron', 'daemon', 'agent_direct', 'sub_turn']"


def write(tmp_path: Path, text: str, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_agent_config(path)
    return info.value


def problems_of(tmp_path: Path, text: str) -> tuple[str, ...]:
    """The problem lines a file gives, with the file name stripped for readability."""
    path = write(tmp_path, text)
    err = load_error(path)
    prefix = f"{path}: "
    assert all(p.startswith(prefix) for p in err.problems)
    assert all(p in str(err) for p in err.problems)
    return tuple(p[len(prefix) :] for p in err.problems)


class TestDefaultsFile:
    def test_defaults_yaml_equals_code_defaults(self) -> None:
        """config/defaults.yaml holds exactly what MemoryInjectConfig() holds."""
        loaded = load_agent_config(CONFIG_DIR / "defaults.yaml")
        assert config_to_dict(MemoryInjectConfig()) == config_to_dict(loaded.memory)

    def test_defaults_yaml_names_every_key(self) -> None:
        """Every key of the config and its groups is written out, none left to the code."""
        raw = yaml.safe_load((CONFIG_DIR / "defaults.yaml").read_text(encoding="utf-8"))
        expected = config_to_dict(MemoryInjectConfig())
        actual = raw["memory"]
        assert sorted(expected) == sorted(actual)
        for group in ("decay", "rerank", "budget", "renderer", "backend"):
            assert sorted(expected[group]) == sorted(actual[group])

    @pytest.mark.parametrize("kind", ["sectioned", "relevant_memories"])
    def test_defaults_yaml_lists_every_renderer_setting(self, kind: str) -> None:
        """Each format's settings are written out, as comments, with their defaults."""
        text = (CONFIG_DIR / "defaults.yaml").read_text(encoding="utf-8")
        data = config_to_dict(MemoryInjectConfig(renderer=kind))["renderer"]
        del data["kind"]
        caps = data.pop("section_caps", {})
        settings = {**data, **caps}
        assert f"# kind: {kind}\n" in text
        for key, value in settings.items():
            assert re.search(rf"\n\s+#\s+{key}: {json.dumps(value)}\s", text), key

    def test_defaults_yaml_agent_name(self) -> None:
        """The defaults file is the agent named 'default'."""
        assert "default" == load_agent_config(CONFIG_DIR / "defaults.yaml").agent

    def test_file_without_memory_gets_defaults(self, tmp_path: Path) -> None:
        """An agent file with only 'agent' gets the code defaults."""
        loaded = load_agent_config(write(tmp_path, "agent: bob\n"))
        assert AgentConfig(agent="bob") == loaded
        assert config_to_dict(MemoryInjectConfig()) == config_to_dict(loaded.memory)


class TestExampleAgents:
    def test_there_are_examples(self) -> None:
        """The three documented example agents exist."""
        expected = {"alice.yaml", "scheduler.yaml", "support-bot.yaml"}
        assert expected == expected & {p.name for p in AGENT_FILES}

    @pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: p.stem)
    def test_example_loads(self, path: Path) -> None:
        """Each example file loads, and its agent is named after the file."""
        loaded = load_agent_config(path)
        assert path.stem == loaded.agent
        assert str(path) == loaded.source

    def test_alice_matches_the_issue(self) -> None:
        """alice.yaml is the issue's example plus its own SQLite file."""
        alice = load_agent_config(CONFIG_DIR / "agents" / "alice.yaml").memory
        assert ".memory/alice.db" == alice.backend.path
        assert "sqlite" == alice.backend.kind
        assert ("cron", "sub_turn") == alice.origin_names
        assert 7.0 == alice.decay.half_life_days

    def test_scheduler_cron_budget(self) -> None:
        """scheduler.yaml gives cron turns a two-entry, token-capped block and daemons none."""
        sched = load_agent_config(CONFIG_DIR / "agents" / "scheduler.yaml")
        cron = sched.for_origin("cron").budget
        assert (2, 300) == (cron.max_entries, cron.max_total_tokens)
        assert BudgetConfig() == sched.memory.budget
        assert False is sched.memory.is_enabled_for("daemon")
        assert True is sched.memory.is_enabled_for("cron")

    def test_support_bot_uses_mmr(self) -> None:
        """support-bot.yaml turns the rerank arm on with the MMR strategy."""
        bot = load_agent_config(CONFIG_DIR / "agents" / "support-bot.yaml").memory
        assert (True, "mmr") == (bot.rerank.enabled, bot.rerank.strategy)
        assert 4 == bot.for_origin("channel").budget.max_entries
        assert bot.rerank == bot.for_origin("channel").rerank


class TestOriginOverrides:
    def test_override_deep_merges(self) -> None:
        """cron's budget {max_entries: 2} keeps every other budget key of the base."""
        alice = load_agent_config(CONFIG_DIR / "agents" / "alice.yaml").memory
        expected = attrs.evolve(alice.budget, max_entries=2)
        assert expected == alice.for_origin(TurnOrigin.CRON).budget
        assert alice.rerank == alice.for_origin("cron").rerank
        assert alice.backend == alice.for_origin("cron").backend

    def test_origin_without_override_is_the_base(self) -> None:
        """for_origin of an origin with no override returns the base config itself."""
        alice = load_agent_config(CONFIG_DIR / "agents" / "alice.yaml").memory
        assert alice is alice.for_origin(TurnOrigin.INTERACTIVE)
        assert alice is alice.for_origin("channel")

    def test_null_override_is_the_base(self, tmp_path: Path) -> None:
        """An origin mapped to null (an empty YAML entry) has no override."""
        cfg = load_agent_config(write(tmp_path, "agent: a\nmemory:\n  origins: {cron: null}\n"))
        assert cfg.memory is cfg.for_origin("cron")

    def test_resolved_config_is_cached(self) -> None:
        """Resolving the same origin twice gives the same object (no re-validation per turn)."""
        alice = load_agent_config(CONFIG_DIR / "agents" / "alice.yaml").memory
        assert alice.for_origin("cron") is alice.for_origin(TurnOrigin.CRON)

    def test_enabled_false_per_origin(self, tmp_path: Path) -> None:
        """'enabled: false' under an origin disables that origin only."""
        path = write(tmp_path, "agent: a\nmemory:\n  origins: {channel: {enabled: false}}\n")
        cfg = load_agent_config(path).memory
        expected = {o.value: o is not TurnOrigin.CHANNEL for o in TurnOrigin}
        assert expected == {o.value: cfg.is_enabled_for(o) for o in TurnOrigin}
        assert False is cfg.for_origin("channel").enabled

    def test_disabled_origin_skips_injection(self) -> None:
        """The policy reports 'origin_disabled' for an origin the config switches off."""
        sched = load_agent_config(CONFIG_DIR / "agents" / "scheduler.yaml").memory
        expected = InjectPolicy(inject=False, reason="origin_disabled")
        assert expected == resolve_inject_policy("daemon", has_session=False, config=sched)

    def test_origin_can_reenable(self, tmp_path: Path) -> None:
        """An origin can be switched on when the base is off."""
        text = "agent: a\nmemory:\n  enabled: false\n  origins: {interactive: {enabled: true}}\n"
        cfg = load_agent_config(write(tmp_path, text)).memory
        assert (True, False) == (cfg.is_enabled_for("interactive"), cfg.is_enabled_for("cron"))

    def test_override_token_cap_can_be_null(self, tmp_path: Path) -> None:
        """An origin may set max_total_tokens back to null (no token cap)."""
        text = (
            "agent: a\nmemory:\n  budget: {max_total_tokens: 500}\n"
            "  origins: {interactive: {budget: {max_total_tokens: null}}}\n"
        )
        cfg = load_agent_config(write(tmp_path, text)).memory
        assert (500, None) == (
            cfg.budget.max_total_tokens,
            cfg.for_origin("interactive").budget.max_total_tokens,
        )


class TestUnknownKeys:
    def test_unknown_key_with_suggestion(self, tmp_path: Path) -> None:
        """A misspelled key is named with its path and the closest known key."""
        expected = (
            "'max_entrys' is not a known key (did you mean 'max_entries'?) (got 3)"
            " @ $.memory.budget",
        )
        assert expected == problems_of(tmp_path, "agent: a\nmemory:\n  budget: {max_entrys: 3}\n")

    def test_unknown_top_level_key(self, tmp_path: Path) -> None:
        """A misspelled 'memory' is caught at the top level."""
        expected = ("'memroy' is not a known key (did you mean 'memory'?) (got {}) @ $",)
        assert expected == problems_of(tmp_path, "agent: a\nmemroy: {}\n")

    def test_unknown_key_without_suggestion(self, tmp_path: Path) -> None:
        """A key that resembles nothing gets no suggestion."""
        expected = ("'colour' is not a known key (got 'red') @ $.memory",)
        assert expected == problems_of(tmp_path, "agent: a\nmemory:\n  colour: red\n")

    def test_backend_is_not_overridable(self, tmp_path: Path) -> None:
        """An origin cannot override the backend (one store per agent)."""
        text = "agent: a\nmemory:\n  origins: {cron: {backend: {kind: memory}}}\n"
        expected = (
            "'backend' is not a known key (got {'kind': 'memory'}) @ $.memory.origins.cron",
        )
        assert expected == problems_of(tmp_path, text)

    def test_unknown_origin(self, tmp_path: Path) -> None:
        """An unknown origin name is reported with the closest origin and the full list."""
        text = "agent: a\nmemory:\n  origins: {crons: {enabled: false}}\n"
        expected = (
            f"'crons' is not an origin (did you mean 'cron'?); origins are {ORIGINS}"
            " @ $.memory.origins",
        )
        assert expected == problems_of(tmp_path, text)

    def test_missing_agent(self, tmp_path: Path) -> None:
        """A file without 'agent' is refused."""
        expected = ("'agent' is required (got nothing) @ $",)
        assert expected == problems_of(tmp_path, "memory: {}\n")


class TestWrongTypes:
    def test_string_for_int(self, tmp_path: Path) -> None:
        """A string where an integer belongs is refused with its path."""
        expected = ("'recall_limit' must be an integer (got 'five') @ $.memory",)
        assert expected == problems_of(tmp_path, "agent: a\nmemory:\n  recall_limit: five\n")

    def test_bool_for_int(self, tmp_path: Path) -> None:
        """YAML true is not an integer, although Python's bool is an int."""
        expected = ("'max_entries' must be an integer (got True) @ $.memory.budget",)
        text = "agent: a\nmemory:\n  budget: {max_entries: true}\n"
        assert expected == problems_of(tmp_path, text)

    def test_float_for_int(self, tmp_path: Path) -> None:
        """5.0 is not an integer count."""
        expected = ("'recall_limit' must be an integer (got 5.0) @ $.memory",)
        assert expected == problems_of(tmp_path, "agent: a\nmemory:\n  recall_limit: 5.0\n")

    def test_list_for_mapping(self, tmp_path: Path) -> None:
        """A list where a group mapping belongs is refused."""
        expected = ("'rerank' must be a mapping (got [1, 2]) @ $.memory.rerank",)
        assert expected == problems_of(tmp_path, "agent: a\nmemory:\n  rerank: [1, 2]\n")

    def test_string_for_bool(self, tmp_path: Path) -> None:
        """A quoted 'no' is a string, not false."""
        text = "agent: a\nmemory:\n  origins: {cron: {enabled: 'no'}}\n"
        expected = ("'enabled' must be true or false (got 'no') @ $.memory.origins.cron",)
        assert expected == problems_of(tmp_path, text)

    def test_nan_refused(self, tmp_path: Path) -> None:
        """.nan is a float but not a usable threshold."""
        expected = ("'min_relevance_score' must be a finite number (got nan) @ $.memory",)
        text = "agent: a\nmemory:\n  min_relevance_score: .nan\n"
        assert expected == problems_of(tmp_path, text)

    def test_int_accepted_for_float(self, tmp_path: Path) -> None:
        """An integer is a valid number and is stored as a float."""
        cfg = load_agent_config(
            write(tmp_path, "agent: a\nmemory:\n  decay: {half_life_days: 30}\n")
        )
        assert 30.0 == cfg.memory.decay.half_life_days
        assert float is type(cfg.memory.decay.half_life_days)

    def test_empty_agent_name(self, tmp_path: Path) -> None:
        """The agent name must be a non-empty string."""
        expected = ("'agent' must be a non-empty string (got 7) @ $",)
        assert expected == problems_of(tmp_path, "agent: 7\n")

    def test_null_memory(self, tmp_path: Path) -> None:
        """'memory:' with nothing under it is the defaults (round 35: every key of the file
        ``init`` writes commented out), as an origin mapped to nothing is no override; a
        'memory' of another type is still refused."""
        path = tmp_path / "a.yaml"
        path.write_text("agent: a\nmemory:\n")
        assert MemoryInjectConfig() == load_agent_config(path).memory
        expected = ("'memory' must be a mapping (got 'x') @ $.memory",)
        assert expected == problems_of(tmp_path, "agent: a\nmemory: x\n")


class TestOutOfRange:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("budget: {max_entries: -1}", "'max_entries' must be >= 0 (got -1) @ $.memory.budget"),
            ("rerank: {mmr_lambda: 1.5}", "'mmr_lambda' must be <= 1 (got 1.5) @ $.memory.rerank"),
            (
                "rerank: {candidate_multiplier: 0}",
                "'candidate_multiplier' must be >= 1 (got 0) @ $.memory.rerank",
            ),
            (
                "rerank: {candidate_multiplier: 21}",
                "'candidate_multiplier' must be <= 20 (got 21) @ $.memory.rerank",
            ),
            (
                "min_relevance_score: -0.1",
                "'min_relevance_score' must be >= 0 (got -0.1) @ $.memory",
            ),
            ("decay: {half_life_days: 0}", "'half_life_days' must be > 0 (got 0) @ $.memory.decay"),
            ("rerank: {pool_cap: 1025}", "'pool_cap' must be <= 1024 (got 1025) @ $.memory.rerank"),
            (
                "budget: {entry_max_chars: 0}",
                "'entry_max_chars' must be >= 1 (got 0) @ $.memory.budget",
            ),
        ],
        ids=[
            "max_entries",
            "mmr_lambda",
            "multiplier_0",
            "multiplier_21",
            "min_relevance",
            "half_life",
            "pool_cap",
            "entry_max_chars",
        ],
    )
    def test_out_of_range(self, tmp_path: Path, text: str, expected: str) -> None:
        """A value outside its range is refused with the bound it broke."""
        assert (expected,) == problems_of(tmp_path, f"agent: a\nmemory:\n  {text}\n")

    @pytest.mark.parametrize(
        ("backend", "expected"),
        [
            (
                "{kind: postgres}",
                "'dsn' must be set when 'kind' is postgres (got null) @ $.memory.backend.dsn",
            ),
            (
                '{path: "a\\0b.db"}',
                "'path' must not hold a NUL character (got 'a\\x00b.db') @ $.memory.backend.path",
            ),
            (
                "{embedder: model2vec}",
                "'embedder_model' must name a local model2vec path when 'embedder' is model2vec "
                "(got null) @ $.memory.backend.embedder_model",
            ),
            (
                "{embedder: hashing, fusion: weighted, vector_weight: 0, keyword_weight: 0}",
                "'vector_weight' + 'keyword_weight' must be > 0 when 'fusion' is weighted "
                "(got 0 + 0) @ $.memory.backend.vector_weight",
            ),
            (
                '{kind: postgres, dsn: "hots=/tmp/pg dbname=memory"}',
                "'dsn' is not a PostgreSQL connection string: invalid connection option "
                '"hots" @ $.memory.backend.dsn',
            ),
        ],
        ids=[
            "postgres_without_dsn",
            "nul_in_path",
            "model2vec_without_model",
            "no_weight",
            "malformed_dsn",
        ],
    )
    def test_a_backend_open_store_would_refuse(
        self, tmp_path: Path, backend: str, expected: str
    ) -> None:
        """``validate`` said "ok" to both, and the agent failed when it opened its store
        with an error naming neither the file nor the key."""
        assert (expected,) == problems_of(tmp_path, f"agent: a\nmemory:\n  backend: {backend}\n")
        text = 'agent: a\nmemory:\n  backend: {kind: postgres, dsn: "postgresql://db/m"}\n'
        assert "postgres" == load_agent_config(write(tmp_path, text)).memory.backend.kind

    def test_out_of_range_in_origin(self, tmp_path: Path) -> None:
        """A bad value inside an origin override is reported with the origin in the path."""
        text = "agent: a\nmemory:\n  origins: {cron: {budget: {max_entries: -2}}}\n"
        expected = ("'max_entries' must be >= 0 (got -2) @ $.memory.origins.cron.budget",)
        assert expected == problems_of(tmp_path, text)

    def test_bounds_are_inclusive(self, tmp_path: Path) -> None:
        """The edges of each range are accepted."""
        text = (
            "agent: a\nmemory:\n  min_relevance_score: 0\n"
            "  rerank: {mmr_lambda: 1, candidate_multiplier: 20, pool_cap: 1024}\n"
            "  budget: {max_entries: 0}\n"
        )
        cfg = load_agent_config(write(tmp_path, text)).memory
        assert (0.0, 1.0, 20, 0) == (
            cfg.min_relevance_score,
            cfg.rerank.mmr_lambda,
            cfg.rerank.candidate_multiplier,
            cfg.budget.max_entries,
        )


class TestChoices:
    def test_duplicate_key_is_refused_with_its_line(self, tmp_path: Path) -> None:
        """A key given twice is an error naming the key and the line, not last-wins."""
        (problem,) = problems_of(
            tmp_path, "agent: a\nmemory:\n  budget: {max_entries: 1}\n  budget: {}\n"
        )
        assert "line 4" in problem and "'budget' is given twice" in problem

    def test_groups_must_be_their_class(self) -> None:
        """Programmatic construction rejects a group that is not its config class."""
        with pytest.raises(TypeError, match="budget"):
            MemoryInjectConfig(budget=None)  # type: ignore[arg-type]  # deliberately not a group

    def test_origins_take_part_in_equality(self) -> None:
        """Two configs that differ only per origin are not equal."""
        assert MemoryInjectConfig() != MemoryInjectConfig(origins={"cron": {"enabled": False}})

    def test_unknown_renderer(self, tmp_path: Path) -> None:
        """An unknown renderer is refused with the list of renderers."""
        expected = (
            "'renderer' must be one of 'bracket', 'sectioned', 'relevant_memories'"
            " (got 'html') @ $.memory",
        )
        assert expected == problems_of(tmp_path, "agent: a\nmemory:\n  renderer: html\n")

    def test_unknown_strategy(self, tmp_path: Path) -> None:
        """An unknown rerank strategy is refused (zeroclaw only logged a warning)."""
        expected = "'strategy' must be one of 'none', 'mmr' (got 'bm25') @ $.memory.rerank"
        text = "agent: a\nmemory:\n  rerank: {strategy: bm25}\n"
        assert (expected,) == problems_of(tmp_path, text)

    def test_choice_is_normalized(self, tmp_path: Path) -> None:
        """Choices are matched trimmed and case-insensitively, as zeroclaw's strategy was."""
        text = "agent: a\nmemory:\n  renderer: ' Bracket '\n  rerank: {strategy: MMR}\n"
        cfg = load_agent_config(write(tmp_path, text)).memory
        assert ("bracket", "mmr") == (cfg.renderer.kind, cfg.rerank.strategy)

    @pytest.mark.parametrize("blank", ["''", "'  '"])
    def test_blank_strategy_is_none(self, tmp_path: Path, blank: str) -> None:
        """A blank rerank strategy reads as none, as the spec's ``s in ("none", "")``."""
        text = f"agent: a\nmemory:\n  rerank: {{enabled: true, strategy: {blank}}}\n"
        cfg = load_agent_config(write(tmp_path, text)).memory
        assert "none" == cfg.rerank.strategy
        assert "none" == RerankConfig(strategy=" ").strategy
        # blank is no wildcard for the other choices
        assert problems_of(tmp_path, "agent: a\nmemory:\n  renderer: ''\n")

    def test_unknown_tokenizer(self, tmp_path: Path) -> None:
        """A tokenizer that cannot be loaded offline fails at load time, not mid-turn."""
        expected = (
            "'tokenizer' must name a tiktoken encoding available offline"
            " (got 'no_such_encoding') @ $.memory.budget",
        )
        text = "agent: a\nmemory:\n  budget: {tokenizer: no_such_encoding}\n"
        assert expected == problems_of(tmp_path, text)

    def test_unknown_tokenizer_in_origin(self, tmp_path: Path) -> None:
        """An origin's tokenizer is checked too, with the origin in the path."""
        expected = (
            "'tokenizer' must name a tiktoken encoding available offline"
            " (got 'no_such_encoding') @ $.memory.origins.cron.budget",
        )
        text = "agent: a\nmemory:\n  origins: {cron: {budget: {tokenizer: no_such_encoding}}}\n"
        assert expected == problems_of(tmp_path, text)


class TestBadFiles:
    def test_empty_file(self, tmp_path: Path) -> None:
        """An empty file says it is empty instead of failing on None."""
        expected = ("the file is empty; expected a mapping with 'agent' and 'memory' @ $",)
        assert expected == problems_of(tmp_path, "")

    def test_comments_only_is_empty(self, tmp_path: Path) -> None:
        """A file of comments is as empty as an empty file."""
        expected = ("the file is empty; expected a mapping with 'agent' and 'memory' @ $",)
        assert expected == problems_of(tmp_path, "# nothing yet\n")

    def test_list_file(self, tmp_path: Path) -> None:
        """A file holding only a list is refused at the top level."""
        expected = ("the top level must be a mapping (got a list) @ $",)
        assert expected == problems_of(tmp_path, "- agent: a\n- memory: {}\n")

    def test_scalar_file(self, tmp_path: Path) -> None:
        """A file holding only a scalar is refused at the top level."""
        expected = ("the top level must be a mapping (got a str) @ $",)
        assert expected == problems_of(tmp_path, "just some words\n")

    def test_invalid_yaml_names_the_line(self, tmp_path: Path) -> None:
        """A syntax error gives the line and column of the problem."""
        text = "agent: a\nmemory:\n  budget: {max_entries: 4\n  renderer: bracket\n"
        expected = ("is not valid YAML at line 4, column 11: expected ',' or '}', but got ':' @ $",)
        assert expected == problems_of(tmp_path, text)

    def test_alias_bomb_refused(self, tmp_path: Path) -> None:
        """A billion-laughs file is refused at its first alias, before anything expands."""
        levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
            levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
        expected = (
            "is not valid YAML at line 2, column 8: YAML aliases are not allowed in"
            " config files @ $",
        )
        assert expected == problems_of(tmp_path, "\n".join(levels) + "\n")

    def test_deep_nesting_refused(self, tmp_path: Path) -> None:
        """Deeply nested flow sequences give a ConfigError, not a RecursionError."""
        text = "agent: a\nmemory:\n  budget: " + "[" * 5000 + "]" * 5000 + "\n"
        assert ("is nested too deeply @ $",) == problems_of(tmp_path, text)

    def test_python_tags_refused(self, tmp_path: Path) -> None:
        """Python object tags are not constructed (safe loading)."""
        problems = problems_of(tmp_path, "agent: !!python/object/apply:os.system [echo]\n")
        assert 1 == len(problems)
        assert problems[0].startswith("is not valid YAML at line 1, column 8: ")

    def test_file_over_the_size_limit(self, tmp_path: Path) -> None:
        """A file over 256 KiB is refused after reading at most the limit."""
        path = write(tmp_path, "agent: a\n# " + "x" * (1 << 20) + "\n", "big.yaml")
        err = load_error(path)
        expected = (
            f"{path}: file is over 262144 bytes; config files are limited to 262144 bytes @ $",
        )
        assert expected == err.problems

    def test_directory(self, tmp_path: Path) -> None:
        """A directory path is refused with its own message."""
        err = load_error(tmp_path)
        assert (f"{tmp_path}: is a directory, not a YAML file @ $",) == err.problems

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file is a ConfigError naming the file, not a FileNotFoundError."""
        path = tmp_path / "nobody.yaml"
        err = load_error(path)
        assert 1 == len(err.problems)
        assert err.problems[0].startswith(f"{path}: cannot be read: [Errno 2] No such file")
        assert err.problems[0].endswith(" @ $")

    def test_not_utf8(self, tmp_path: Path) -> None:
        """A file that is not UTF-8 is a ConfigError naming the file."""
        path = tmp_path / "binary.yaml"
        path.write_bytes(b"\xff\xfe\x00agent")
        err = load_error(path)
        assert err.problems[0].startswith(f"{path}: cannot be read: 'utf-8' codec")


class TestErrorReport:
    def test_several_problems_all_listed(self, tmp_path: Path) -> None:
        """Every problem of a file is listed at once, with the count in the header."""
        path = write(
            tmp_path,
            "agent: ''\nmemory:\n  recall_limit: -1\n"
            "  budget: {max_entries: -1, tokenizer: ''}\n"
            "  rerank: {mmr_lambda: 2}\n  colour: red\n",
        )
        err = load_error(path)
        expected = "\n".join(
            [
                f"{path}: 6 problems:",
                f"  - {path}: 'agent' must be a non-empty string (got '') @ $",
                f"  - {path}: 'recall_limit' must be >= 0 (got -1) @ $.memory",
                f"  - {path}: 'max_entries' must be >= 0 (got -1) @ $.memory.budget",
                f"  - {path}: 'tokenizer' must be a non-empty string (got '') @ $.memory.budget",
                f"  - {path}: 'mmr_lambda' must be <= 1 (got 2) @ $.memory.rerank",
                f"  - {path}: 'colour' is not a known key (got 'red') @ $.memory",
            ]
        )
        assert expected == str(err)
        assert 6 == len(err.problems)

    def test_one_problem_header(self, tmp_path: Path) -> None:
        """One problem says '1 problem', singular."""
        path = write(tmp_path, "agent: a\nmemory:\n  budget: {max_entries: -1}\n")
        assert str(load_error(path)).startswith(f"{path}: 1 problem:\n")

    def test_config_error_is_a_value_error(self, tmp_path: Path) -> None:
        """Callers that catch ValueError keep working."""
        with pytest.raises(ValueError, match=r"'max_entries' must be >= 0"):
            load_agent_config(write(tmp_path, "agent: a\nmemory:\n  budget: {max_entries: -1}\n"))

    def test_source_is_kept(self, tmp_path: Path) -> None:
        """The error keeps the file name it was loaded from."""
        path = write(tmp_path, "[]\n")
        assert str(path) == load_error(path).source


class TestProgrammatic:
    def test_bad_group_value_raises_value_error(self) -> None:
        """Building a config in Python validates like attrs, with the same message as YAML."""
        with pytest.raises(ValueError, match=r"^'max_entries' must be >= 0 \(got -1\)$"):
            MemoryInjectConfig(budget=BudgetConfig(max_entries=-1))

    def test_bad_choice_raises_value_error(self) -> None:
        """An unknown strategy fails at construction."""
        with pytest.raises(
            ValueError, match=r"^'strategy' must be one of 'none', 'mmr' \(got 'x'\)$"
        ):
            RerankConfig(strategy="x")

    def test_bad_origin_override_raises_value_error(self) -> None:
        """A bad origin override fails when the config is built, not at the first turn."""
        with pytest.raises(
            ValueError,
            match=r"^'max_entries' must be >= 0 \(got -1\)"
            r" @ \$\.origins\.cron\.budget$",
        ):
            MemoryInjectConfig(origins={"cron": {"budget": {"max_entries": -1}}})

    def test_to_dict_round_trips(self) -> None:
        """config_to_dict output, written under 'memory', loads back to an equal config."""
        cfg = MemoryInjectConfig(recall_limit=7, origins={"cron": {"budget": {"max_entries": 1}}})
        loaded = parse_agent_config({"agent": "a", "memory": config_to_dict(cfg)}).memory
        assert config_to_dict(cfg) == config_to_dict(loaded)


RENDERER_KINDS = "'bracket', 'sectioned', 'relevant_memories'"
#: A bad renderer value (YAML, under memory) -> the problem lines it gives.
BAD_RENDERERS = {
    "unknown name": (
        "renderer: html",
        (f"'renderer' must be one of {RENDERER_KINDS} (got 'html') @ $.memory",),
    ),
    "a number": (
        "renderer: 5",
        (
            f"'renderer' must be one of {RENDERER_KINDS} or a mapping with 'kind' (got 5)"
            " @ $.memory",
        ),
    ),
    "null": (
        "renderer: null",
        (
            f"'renderer' must be one of {RENDERER_KINDS} or a mapping with 'kind' (got None)"
            " @ $.memory",
        ),
    ),
    "a list": (
        "renderer: [sectioned]",
        (
            f"'renderer' must be one of {RENDERER_KINDS} or a mapping with 'kind'"
            " (got ['sectioned']) @ $.memory",
        ),
    ),
    "no kind": (
        "renderer: {max_total_chars: 100}",
        ("'kind' is required (got nothing) @ $.memory.renderer",),
    ),
    "unknown kind, and a bad setting": (
        "renderer: {kind: markdown, max_total_chars: -1}",
        (
            f"'kind' must be one of {RENDERER_KINDS} (got 'markdown') @ $.memory.renderer",
            "'max_total_chars' must be >= 0 (got -1) @ $.memory.renderer",
        ),
    ),
    "kind not a string": (
        "renderer: {kind: 1}",
        ("'kind' must be a string (got 1) @ $.memory.renderer",),
    ),
    "unknown key": (
        "renderer: {kind: sectioned, max_totl_chars: 100}",
        (
            "'max_totl_chars' is not a known key (did you mean 'max_total_chars'?) (got 100)"
            " @ $.memory.renderer",
        ),
    ),
    "sectioned key on relevant_memories": (
        "renderer: {kind: relevant_memories, max_hard_rules: 6}",
        (
            "'max_hard_rules' is not a known key for kind 'relevant_memories'"
            " (a sectioned setting) (got 6) @ $.memory.renderer",
        ),
    ),
    "relevant_memories key on sectioned": (
        "renderer: {kind: sectioned, max_entries: 3}",
        (
            "'max_entries' is not a known key for kind 'sectioned'"
            " (a relevant_memories setting) (got 3) @ $.memory.renderer",
        ),
    ),
    "section_caps on bracket": (
        "renderer: {kind: bracket, section_caps: {daily_log: 1}}",
        (
            "'section_caps' is not a known key for kind 'bracket'"
            " (a sectioned setting) (got {'daily_log': 1}) @ $.memory.renderer",
        ),
    ),
    "integer is a decimal": (
        "renderer: {kind: sectioned, max_total_chars: 1.5}",
        ("'max_total_chars' must be an integer (got 1.5) @ $.memory.renderer",),
    ),
    "integer is a boolean": (
        "renderer: {kind: relevant_memories, max_entries: true}",
        ("'max_entries' must be an integer (got True) @ $.memory.renderer",),
    ),
    "integer is a string": (
        "renderer: {kind: sectioned, max_contested: '2'}",
        ("'max_contested' must be an integer (got '2') @ $.memory.renderer",),
    ),
    "number is a string": (
        "renderer: {kind: sectioned, hard_rule_min_confidence: high}",
        ("'hard_rule_min_confidence' must be a number (got 'high') @ $.memory.renderer",),
    ),
    "number not finite": (
        "renderer: {kind: sectioned, contested_min_overlap: .nan}",
        ("'contested_min_overlap' must be a finite number (got nan) @ $.memory.renderer",),
    ),
    "negative total": (
        "renderer: {kind: sectioned, max_total_chars: -1}",
        ("'max_total_chars' must be >= 0 (got -1) @ $.memory.renderer",),
    ),
    "negative count": (
        "renderer: {kind: sectioned, max_hard_rules: -1}",
        ("'max_hard_rules' must be >= 0 (got -1) @ $.memory.renderer",),
    ),
    "confidence as a percent": (
        "renderer: {kind: sectioned, hard_rule_min_confidence: 85}",
        ("'hard_rule_min_confidence' must be <= 1 (got 85) @ $.memory.renderer",),
    ),
    "negative overlap": (
        "renderer: {kind: sectioned, contested_min_overlap: -0.1}",
        ("'contested_min_overlap' must be >= 0 (got -0.1) @ $.memory.renderer",),
    ),
    "negative max_entries": (
        "renderer: {kind: relevant_memories, max_entries: -1}",
        ("'max_entries' must be >= 0 (got -1) @ $.memory.renderer",),
    ),
    "section_caps not a mapping": (
        "renderer: {kind: sectioned, section_caps: 500}",
        ("'section_caps' must be a mapping (got 500) @ $.memory.renderer.section_caps",),
    ),
    "unknown section": (
        "renderer: {kind: sectioned, section_caps: {dailylog: 1000}}",
        (
            "'dailylog' is not a known key (did you mean 'daily_log'?) (got 1000)"
            " @ $.memory.renderer.section_caps",
        ),
    ),
    "negative section cap": (
        "renderer: {kind: sectioned, section_caps: {daily_log: -5}}",
        ("'daily_log' must be >= 0 (got -5) @ $.memory.renderer.section_caps",),
    ),
    "bad name in an origin": (
        "origins: {cron: {renderer: htm}}",
        (f"'renderer' must be one of {RENDERER_KINDS} (got 'htm') @ $.memory.origins.cron",),
    ),
    "another format's key in an origin": (
        "origins: {cron: {renderer: {kind: bracket, max_contested: 1}}}",
        (
            "'max_contested' is not a known key for kind 'bracket' (a sectioned setting) (got 1)"
            " @ $.memory.origins.cron.renderer",
        ),
    ),
    "no kind in an origin": (
        "origins: {cron: {renderer: {max_total_chars: 100}}}",
        ("'kind' is required (got nothing) @ $.memory.origins.cron.renderer",),
    ),
    "out of range in an origin": (
        "origins: {daemon: {renderer: {kind: sectioned, section_caps: {scratchpad: -1}}}}",
        ("'scratchpad' must be >= 0 (got -1) @ $.memory.origins.daemon.renderer.section_caps",),
    ),
}


class TestRendererConfig:
    def test_a_name_is_the_kind_with_its_defaults(self, tmp_path: Path) -> None:
        """renderer: sectioned loads as RendererConfig(kind='sectioned'), every setting default."""
        cfg = load_agent_config(write(tmp_path, "agent: a\nmemory:\n  renderer: sectioned\n"))
        assert RendererConfig(kind="sectioned") == cfg.memory.renderer
        assert "sectioned" == cfg.memory.renderer.kind

    def test_the_mapping_form_sets_every_setting(self, tmp_path: Path) -> None:
        """Each key of the mapping lands in RendererConfig; caps not given keep their default."""
        text = (
            "agent: a\nmemory:\n  renderer:\n    kind: Sectioned\n    max_total_chars: 12000\n"
            "    section_caps: {hard_rules: 1500, daily_log: 1000}\n    max_hard_rules: 6\n"
            "    hard_rule_min_confidence: 0.9\n    max_contested: 1\n"
            "    contested_min_overlap: 0.3\n"
        )
        expected = RendererConfig(
            kind="sectioned",
            max_total_chars=12000,
            section_caps=SectionCapsConfig(hard_rules=1500, daily_log=1000),
            max_hard_rules=6,
            hard_rule_min_confidence=0.9,
            max_contested=1,
            contested_min_overlap=0.3,
        )
        assert expected == load_agent_config(write(tmp_path, text)).memory.renderer

    def test_relevant_memories_max_entries(self, tmp_path: Path) -> None:
        """relevant_memories takes max_entries, null by default."""
        text = "agent: a\nmemory:\n  renderer: {kind: relevant_memories, max_entries: 3}\n"
        assert 3 == load_agent_config(write(tmp_path, text)).memory.renderer.max_entries
        assert None is RendererConfig(kind="relevant_memories").max_entries

    @pytest.mark.parametrize("name", list(BAD_RENDERERS))
    def test_bad_values_name_the_key_and_the_path(self, tmp_path: Path, name: str) -> None:
        """Every kind of bad renderer value is a ConfigError with the file, key and path."""
        yaml_text, expected = BAD_RENDERERS[name]
        assert expected == problems_of(tmp_path, f"agent: a\nmemory:\n  {yaml_text}\n")

    def test_to_dict_writes_only_the_kinds_settings(self) -> None:
        """config_to_dict gives kind plus the kind's own settings, which load back equal."""
        cfg = MemoryInjectConfig(
            renderer=RendererConfig(kind="sectioned", max_hard_rules=3),
            origins={"cron": {"renderer": {"kind": "relevant_memories", "max_entries": 1}}},
        )
        data = config_to_dict(cfg)
        assert {"kind": "bracket"} == config_to_dict(MemoryInjectConfig())["renderer"]
        assert {
            "kind": "sectioned",
            "max_total_chars": 14000,
            "section_caps": attrs.asdict(SectionCapsConfig()),
            "max_hard_rules": 3,
            "hard_rule_min_confidence": 0.85,
            "max_contested": 2,
            "contested_min_overlap": 0.15,
            "max_records": None,
            "max_l1": None,
            "max_l2": None,
            "daily_digest": False,
            "daily_today_only": False,
            "max_sessions": 0,
            "max_questions": 0,
        } == data["renderer"]
        loaded = parse_agent_config({"agent": "a", "memory": data}).memory
        assert data == config_to_dict(loaded)
        assert cfg.for_origin("cron").renderer == loaded.for_origin("cron").renderer

    def test_repr_shows_the_kinds_settings_only(self) -> None:
        """The repr leaves out the settings of the other formats."""
        expected = "RendererConfig(kind='relevant_memories', max_entries=2)"
        assert expected == repr(RendererConfig(kind="relevant_memories", max_entries=2))


class TestRendererOverrides:
    BASE = (
        "agent: a\nmemory:\n"
        "  renderer: {kind: sectioned, max_total_chars: 12000, max_hard_rules: 6,"
        " section_caps: {daily_log: 1000}}\n"
        "  origins:\n"
    )

    def load(self, tmp_path: Path, origins: str) -> MemoryInjectConfig:
        return load_agent_config(write(tmp_path, self.BASE + origins)).memory

    def test_same_kind_merges_into_the_base(self, tmp_path: Path) -> None:
        """An override of the base's kind keeps every base setting it does not set."""
        cfg = self.load(
            tmp_path, "    cron: {renderer: {kind: sectioned, section_caps: {scratchpad: 100}}}\n"
        )
        expected = attrs.evolve(
            cfg.renderer, section_caps=SectionCapsConfig(daily_log=1000, scratchpad=100)
        )
        assert expected == cfg.for_origin("cron").renderer
        assert 12000 == cfg.for_origin("cron").renderer.max_total_chars

    def test_a_name_of_the_same_kind_keeps_the_base_settings(self, tmp_path: Path) -> None:
        """renderer: sectioned in an override is {kind: sectioned}: nothing changes."""
        cfg = self.load(tmp_path, "    cron: {renderer: sectioned}\n")
        assert cfg.renderer == cfg.for_origin("cron").renderer

    def test_another_kind_replaces_the_base(self, tmp_path: Path) -> None:
        """An override of another kind starts from that kind's defaults, not the base's settings."""
        cfg = self.load(
            tmp_path,
            "    cron: {renderer: relevant_memories}\n"
            "    daemon: {renderer: {kind: relevant_memories, max_entries: 2}}\n"
            "    channel: {renderer: bracket}\n",
        )
        assert RendererConfig(kind="relevant_memories") == cfg.for_origin("cron").renderer
        daemon = RendererConfig(kind="relevant_memories", max_entries=2)
        assert daemon == cfg.for_origin("daemon").renderer
        assert RendererConfig() == cfg.for_origin("channel").renderer

    def test_a_mapping_over_a_name(self, tmp_path: Path) -> None:
        """A base given by name takes an origin's settings of the same kind."""
        text = (
            "agent: a\nmemory:\n  renderer: sectioned\n"
            "  origins: {cron: {renderer: {kind: sectioned, max_total_chars: 500}}}\n"
        )
        cfg = load_agent_config(write(tmp_path, text)).memory
        assert (
            RendererConfig(kind="sectioned", max_total_chars=500) == cfg.for_origin("cron").renderer
        )


class TestRendererProgrammatic:
    def test_a_name_is_accepted(self) -> None:
        """MemoryInjectConfig(renderer='sectioned') keeps working: a name is a RendererConfig."""
        assert RendererConfig(kind="sectioned") == MemoryInjectConfig(renderer="sectioned").renderer

    def test_an_unknown_name_raises_the_file_message(self) -> None:
        """An unknown name fails at construction with the message a file gives, without path."""
        with pytest.raises(
            ValueError, match=rf"^'renderer' must be one of {RENDERER_KINDS} \(got 'html'\)$"
        ):
            MemoryInjectConfig(renderer="html")

    def test_a_setting_of_another_format_raises(self) -> None:
        """A non-default setting of another format than kind fails at construction."""
        with pytest.raises(
            ValueError,
            match=r"^'max_hard_rules' is not a known key for kind 'bracket'"
            r" \(a sectioned setting\) \(got 3\)$",
        ):
            RendererConfig(max_hard_rules=3)

    def test_out_of_range_setting_raises(self) -> None:
        """Renderer settings are validated like every other setting."""
        with pytest.raises(ValueError, match=r"^'daily_log' must be >= 0 \(got -1\)$"):
            SectionCapsConfig(daily_log=-1)
        with pytest.raises(ValueError, match=r"^'hard_rule_min_confidence' must be <= 1"):
            RendererConfig(kind="sectioned", hard_rule_min_confidence=2)

    def test_a_bad_origin_renderer_raises(self) -> None:
        """A bad renderer override fails when the config is built, with its path."""
        with pytest.raises(
            ValueError, match=r"^'kind' is required \(got nothing\) @ \$\.origins\.cron\.renderer$"
        ):
            MemoryInjectConfig(origins={"cron": {"renderer": {"max_entries": 1}}})
