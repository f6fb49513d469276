"""Bad configuration: every malformed agent file is one ConfigError naming the file and the path.

A hand-made corpus (wrong types, unknown keys, out-of-range numbers, empty
files, lists, huge files, YAML bombs, hostile tags, undecodable bytes) and
three hypothesis generators (random YAML data, mutations of the real default
config, random YAML-ish text). Every load runs under a per-file alarm, so a
hang fails the test instead of blocking CI, and the whole corpus is loaded
once more in a fresh interpreter to bound its memory.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_inject.config import (
    AgentConfig,
    BackendConfig,
    BudgetConfig,
    DecayConfig,
    GovernanceConfig,
    MemoryInjectConfig,
    PlanQueryConfig,
    RecallPlanConfig,
    RendererConfig,
    RerankConfig,
    SectionCapsConfig,
    TrivialPromptConfig,
    config_to_dict,
    load_agent_config,
)
from memory_inject.exceptions import ConfigError
from memory_inject.models import TurnOrigin

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs SIGALRM")

#: Per-file ceiling. Generous (a 1 MB file parses in a few seconds on a slow
#: runner): it exists so that a hang fails instead of blocking CI.
PER_FILE_S = 30.0
#: Peak memory the whole corpus may add to a fresh interpreter.
MAX_RSS_GROWTH_MB = 200
EXAMPLES = 300


class Hang(Exception):
    """A load outlived PER_FILE_S."""


def load_bounded(path: Path) -> AgentConfig:
    """``load_agent_config`` under an alarm: a hang raises Hang instead of blocking."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"{path} took more than {PER_FILE_S} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, PER_FILE_S)
    try:
        return load_agent_config(path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_names_file_and_path(err: ConfigError, path: Path) -> None:
    """Each problem starts with the file and ends with a JSON-path-like location."""
    assert str(path) == err.source
    assert err.problems
    for problem in err.problems:
        assert problem.startswith(f"{path}: ")
        assert re.search(r" @ \$[\w.\[\]-]*$", problem), problem
    assert str(err).startswith(f"{path}: ")


def load_or_error(path: Path) -> ConfigError | None:
    """None for a valid file; the ConfigError otherwise. Anything else propagates (a bug)."""
    try:
        load_bounded(path)
    except ConfigError as err:
        check_names_file_and_path(err, path)
        return err
    return None


# -- the hand-made corpus ----------------------------------------------------------


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "agent: bomb\nmemory:\n" + "".join(f"  {line}\n" for line in lines)


def nested(n: int, opener: str, closer: str) -> str:
    return "agent: deep\nmemory: " + opener * n + "1" + closer * n + "\n"


#: name -> (file content, expected end of the first problem's path)
CORPUS: dict[str, tuple[str | bytes, str]] = {
    "empty": ("", "@ $"),
    "blank lines": ("\n\n   \n", "@ $"),
    "only a comment": ("# nothing here\n", "@ $"),
    "only a document marker": ("---\n...\n", "@ $"),
    "null document": ("~\n", "@ $"),
    "top-level integer": ("42\n", "@ $"),
    "top-level string": ("agent\n", "@ $"),
    "top-level list": ("- agent: a\n- memory: {}\n", "@ $"),
    "top-level flow list": ("[1, 2, 3]\n", "@ $"),
    "agent missing": ("memory: {recall_limit: 3}\n", "@ $"),
    "agent is a number": ("agent: 42\n", "@ $"),
    "agent is empty": ("agent: ''\n", "@ $"),
    "agent is a list": ("agent: [a, b]\n", "@ $"),
    "memory is a number": ("agent: a\nmemory: 5\n", "@ $.memory"),
    "memory is a list": ("agent: a\nmemory: [recall_limit, 3]\n", "@ $.memory"),
    "recall_limit is text": ("agent: a\nmemory: {recall_limit: five}\n", "@ $.memory"),
    "recall_limit is negative": ("agent: a\nmemory: {recall_limit: -1}\n", "@ $.memory"),
    "recall_limit is a float": ("agent: a\nmemory: {recall_limit: 2.5}\n", "@ $.memory"),
    "recall_limit is a bool": ("agent: a\nmemory: {recall_limit: yes}\n", "@ $.memory"),
    "recall_limit is null": ("agent: a\nmemory: {recall_limit: null}\n", "@ $.memory"),
    "score above one": ("agent: a\nmemory: {min_relevance_score: 1.5}\n", "@ $.memory"),
    "score is nan": ("agent: a\nmemory: {min_relevance_score: .nan}\n", "@ $.memory"),
    "score is infinite": ("agent: a\nmemory: {min_relevance_score: -.inf}\n", "@ $.memory"),
    "half-life zero": ("agent: a\nmemory: {decay: {half_life_days: 0}}\n", "@ $.memory.decay"),
    "multiplier too big": (
        "agent: a\nmemory: {rerank: {candidate_multiplier: 21}}\n",
        "@ $.memory.rerank",
    ),
    "pool over the ceiling": (
        "agent: a\nmemory: {rerank: {pool_cap: 1025}}\n",
        "@ $.memory.rerank",
    ),
    "mmr lambda 2": ("agent: a\nmemory: {rerank: {mmr_lambda: 2}}\n", "@ $.memory.rerank"),
    "max_entries negative": (
        "agent: a\nmemory: {budget: {max_entries: -4}}\n",
        "@ $.memory.budget",
    ),
    "entry_max_chars zero": (
        "agent: a\nmemory: {budget: {entry_max_chars: 0}}\n",
        "@ $.memory.budget",
    ),
    "deadline zero": ("agent: a\nmemory: {deadline_ms: 0}\n", "@ $.memory"),
    "budget is a list": ("agent: a\nmemory: {budget: [1, 2]}\n", "@ $.memory.budget"),
    "budget is a string": ("agent: a\nmemory: {budget: big}\n", "@ $.memory.budget"),
    "unknown renderer": ("agent: a\nmemory: {renderer: markdown}\n", "@ $.memory"),
    "renderer is a list": ("agent: a\nmemory: {renderer: [sectioned]}\n", "@ $.memory"),
    "renderer without kind": (
        "agent: a\nmemory: {renderer: {max_total_chars: 10}}\n",
        "@ $.memory.renderer",
    ),
    "renderer kind unknown": (
        "agent: a\nmemory: {renderer: {kind: html}}\n",
        "@ $.memory.renderer",
    ),
    "renderer setting of another kind": (
        "agent: a\nmemory: {renderer: {kind: bracket, max_hard_rules: 2}}\n",
        "@ $.memory.renderer",
    ),
    "renderer setting out of range": (
        "agent: a\nmemory: {renderer: {kind: sectioned, max_total_chars: -1}}\n",
        "@ $.memory.renderer",
    ),
    "section cap unknown": (
        "agent: a\nmemory: {renderer: {kind: sectioned, section_caps: {daily: 1}}}\n",
        "@ $.memory.renderer.section_caps",
    ),
    "origin renderer of another kind's key": (
        "agent: a\nmemory:\n  origins:\n"
        "    cron: {renderer: {kind: relevant_memories, max_contested: 1}}\n",
        "@ $.memory.origins.cron.renderer",
    ),
    "unknown backend": ("agent: a\nmemory: {backend: {kind: redis}}\n", "@ $.memory.backend"),
    "unknown top-level key": ("agent: a\nmemroy: {}\n", "@ $"),
    "unknown memory key": ("agent: a\nmemory: {recal_limit: 3}\n", "@ $.memory"),
    "unknown budget key": ("agent: a\nmemory: {budget: {max_entrys: 3}}\n", "@ $.memory.budget"),
    "non-string keys": ("agent: a\nmemory: {7: 2, null: 3, 2.5: 5}\n", "@ $.memory"),
    "unknown origin": (
        "agent: a\nmemory: {origins: {webhook: {enabled: false}}}\n",
        "@ $.memory.origins",
    ),
    "origins is a list": ("agent: a\nmemory: {origins: [cron, daemon]}\n", "@ $.memory.origins"),
    "origin override is a list": (
        "agent: a\nmemory: {origins: {cron: [1]}}\n",
        "@ $.memory.origins.cron",
    ),
    "origin overrides the backend": (
        "agent: a\nmemory: {origins: {cron: {backend: {}}}}\n",
        "@ $.memory.origins.cron",
    ),
    "origin nested origins": (
        "agent: a\nmemory: {origins: {cron: {origins: {}}}}\n",
        "@ $.memory.origins.cron",
    ),
    "origin override out of range": (
        "agent: a\nmemory:\n  origins:\n    daemon:\n      budget: {max_entries: -1}\n",
        "@ $.memory.origins.daemon.budget",
    ),
    "plan queries is a mapping": (
        "agent: a\nmemory: {recall_plan: {queries: {a: 1}}}\n",
        "@ $.memory.recall_plan",
    ),
    "plan query is a number": (
        "agent: a\nmemory: {recall_plan: {queries: [5]}}\n",
        "@ $.memory.recall_plan.queries[0]",
    ),
    "plan query source unknown": (
        "agent: a\nmemory:\n  recall_plan:\n    queries: [{source: web, limit: 0}]\n",
        "@ $.memory.recall_plan.queries[0]",
    ),
    "governance stages is a string": (
        "agent: a\nmemory: {governance: {stages: status}}\n",
        "@ $.memory.governance",
    ),
    "governance stage unknown": (
        "agent: a\nmemory: {governance: {stages: [status, vibes]}}\n",
        "@ $.memory.governance",
    ),
    "duplicate key": ("agent: a\nagent: b\n", "@ $"),
    "duplicate nested key": ("agent: a\nmemory:\n  recall_limit: 1\n  recall_limit: 2\n", "@ $"),
    "billion laughs": (billion_laughs(), "@ $"),
    "billion laughs in a list": (
        "agent: a\nx: &x [1, 2]\ny: &y [*x, *x, *x]\nz: [*y, *y]\n",
        "@ $",
    ),
    "self-referencing anchor": ("agent: a\nmemory: &m {origins: *m}\n", "@ $"),
    "merge key alias": ("base: &b {recall_limit: 3}\nagent: a\nmemory: {<<: *b}\n", "@ $"),
    "deep flow lists": (nested(50_000, "[", "]"), "@ $"),
    "deep flow mappings": (nested(30_000, "{a: ", "}"), "@ $"),
    "deep block mappings": (
        "agent: a\nmemory:\n"
        + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(400))
        + " " * 401
        + "1\n",
        "@ $",
    ),
    "many unknown keys (150 kB)": (
        "agent: a\nmemory:\n" + "".join(f"  key_{i}: {i}\n" for i in range(10_000)),
        "@ $.memory",
    ),
    "over the size limit (2 MB)": ("agent: a\n" + "#" * (2 << 20) + "\n", "@ $"),
    "python object tag": ("agent: !!python/object/apply:os.system ['echo pwned']\n", "@ $"),
    "python name tag": ("agent: a\nmemory: !!python/name:os.system\n", "@ $"),
    "custom tag": ("agent: !vault secret\n", "@ $"),
    "set instead of a string": ("agent: !!set {a, b}\n", "@ $"),
    "omap instead of a mapping": ("agent: a\nmemory: !!omap [{recall_limit: 1}]\n", "@ $.memory"),
    "binary instead of a string": ("agent: !!binary aGVsbG8=\n", "@ $"),
    "unsupported YAML version": ("%YAML 2.0\n---\nagent: a\n", "@ $"),
    "two documents": ("agent: a\n---\nagent: b\n", "@ $"),
    "tab indentation": ("agent: a\nmemory:\n\trecall_limit: 3\n", "@ $"),
    "unclosed flow mapping": ("agent: a\nmemory: {recall_limit: 3\n", "@ $"),
    "unclosed quote": ("agent: 'a\n", "@ $"),
    "NUL byte": ("agent: a\x00b\n", "@ $"),
    "control characters": ("agent: a\x1b[2J\x07\n", "@ $"),
    "invalid UTF-8": (b"agent: \xff\xfe\xfa\n", "@ $"),
    "UTF-16 with BOM": ("agent: a\n".encode("utf-16"), "@ $"),
    "random bytes": (bytes(range(256)) * 64, "@ $"),
    "tokenizer unknown": (
        "agent: a\nmemory:\n  budget: {max_total_tokens: 100, tokenizer: no_such_encoding}\n",
        "@ $.memory.budget",
    ),
}


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


class TestCorpus:
    @pytest.mark.parametrize("name", list(CORPUS))
    def test_each_bad_file_is_one_config_error(self, tmp_path: Path, name: str) -> None:
        """The file's error names the file and the path of the problem, and nothing else raises."""
        content, where = CORPUS[name]
        path = write(tmp_path / "agent.yaml", content)
        err = load_or_error(path)
        assert err is not None, f"{name} loaded without error"
        assert err.problems[0].endswith(where) or where == "@ $", err.problems[0]
        assert where in err.problems[0]

    def test_a_directory_is_a_config_error(self, tmp_path: Path) -> None:
        """Pointing at a directory is a ConfigError, not an IsADirectoryError."""
        assert load_or_error(tmp_path) is not None

    def test_a_missing_file_is_a_config_error(self, tmp_path: Path) -> None:
        """A path that does not exist is a ConfigError naming it."""
        assert load_or_error(tmp_path / "nope.yaml") is not None

    def test_corpus_in_bounded_memory(self, tmp_path: Path) -> None:
        """A fresh interpreter loads the whole corpus growing its peak RSS by < 200 MB."""
        for n, (content, _) in enumerate(CORPUS.values()):
            write(tmp_path / f"{n:03d}.yaml", content)
        script = r"""
import json, resource, sys
from pathlib import Path
from memory_inject.config import load_agent_config
from memory_inject.exceptions import ConfigError

def peak_mb():
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024

files = sorted(Path(sys.argv[1]).glob("*.yaml"))
before = peak_mb()
outcomes = {}
for f in files:
    try:
        load_agent_config(f)
        outcomes[f.name] = "loaded"
    except ConfigError:
        outcomes[f.name] = "ConfigError"
print(json.dumps({"growth_mb": peak_mb() - before, "outcomes": outcomes}))
"""
        proc = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=PER_FILE_S * 4,
            check=False,
        )
        assert 0 == proc.returncode, proc.stderr
        out = json.loads(proc.stdout)
        assert {"ConfigError"} == set(out["outcomes"].values())
        assert len(CORPUS) == len(out["outcomes"])
        assert out["growth_mb"] < MAX_RSS_GROWTH_MB, out["growth_mb"]


# -- hypothesis ------------------------------------------------------------------------

GROUPS = (
    MemoryInjectConfig,
    DecayConfig,
    RerankConfig,
    BudgetConfig,
    BackendConfig,
    RecallPlanConfig,
    PlanQueryConfig,
    GovernanceConfig,
    TrivialPromptConfig,
    RendererConfig,
    SectionCapsConfig,
)
KNOWN_KEYS = sorted(
    {a.name for cls in GROUPS for a in attrs.fields(cls) if a.init}
    | {"agent", "memory"}
    | {o.value for o in TurnOrigin}
)
CHOICES = [
    "bracket",
    "sectioned",
    "relevant_memories",
    "none",
    "mmr",
    "sqlite",
    "postgres",
    "memory",
    "bm25",
    "hybrid",
    "weighted",
    "rrf",
    "founder_os",
    "hits",
    "score",
    "default",
    "semantic",
    "lexical",
    "entity",
    "plugin",
    "cl100k_base",
    "status",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.integers(-3, 3000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(CHOICES),
    st.binary(max_size=8),
)
keys = st.one_of(
    st.sampled_from(KNOWN_KEYS),
    st.text(max_size=12),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


@st.composite
def mutated_defaults(draw: st.DrawFn) -> Any:
    """The full default config with a few values replaced, added or removed."""
    memory = config_to_dict(MemoryInjectConfig())
    for _ in range(draw(st.integers(1, 4))):
        node: Any = memory
        path = []
        while isinstance(node, dict) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node, key=str)))
            if not isinstance(node[key], dict):
                break
            path.append(key)
            node = node[key]
        if not isinstance(node, dict):
            continue
        action = draw(st.sampled_from(["replace", "add", "delete"]))
        target = draw(st.sampled_from(sorted(node, key=str))) if node else None
        if action == "replace" and target is not None:
            node[target] = draw(values)
        elif action == "delete" and target is not None:
            del node[target]
        else:
            node[draw(keys)] = draw(values)
    return {"agent": draw(st.one_of(st.just("fuzz"), scalars)), "memory": memory}


YAML_TOKENS = [
    "agent:",
    "agent: a",
    "memory:",
    "origins:",
    "cron:",
    "budget:",
    "recall_limit:",
    "max_entries:",
    "renderer:",
    "queries:",
    " ",
    "  ",
    "\n",
    "\n  ",
    "\n    ",
    "- ",
    ": ",
    ",",
    "{",
    "}",
    "[",
    "]",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "<<: ",
    "!!str ",
    "!!map ",
    "!!seq ",
    "!!null ",
    "!!bool ",
    "!!set ",
    "!!omap ",
    "!!binary ",
    "!custom ",
    "!!python/object:os.system ",
    "%YAML 1.1\n",
    "%TAG ! tag:example.com,2000:\n",
    "---\n",
    "...\n",
    "# c",
    "'",
    '"',
    "|\n",
    ">-\n",
    "\t",
    "\ufeff",
    "~",
    "null",
    "yes",
    "no",
    "0x1F",
    "0o17",
    "1e400",
    ".nan",
    "-.inf",
    "-1",
    "3",
    "99999999999999999999",
    "1_000",
    "2001-12-14t21:59:43.10-05:00",
    "\\",
    "\x00",
    "\x85",
    "\u2028",
    "\r\n",
    "\r",
]
yaml_text = st.lists(
    st.one_of(st.sampled_from(YAML_TOKENS), st.sampled_from(KNOWN_KEYS), st.text(max_size=10)),
    max_size=40,
).map("".join)


MAPPING_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:set")
CONTAINER_TAGS = (
    *MAPPING_TAGS,
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:omap",
    "tag:yaml.org,2002:pairs",
)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def agent_file(tmp_path: Path) -> Callable[[str | bytes], Path]:
    path = tmp_path / "fuzzed-agent.yaml"
    return lambda content: write(path, content)


class TestFuzzedFiles:
    @FUZZ
    @given(doc=values)
    def test_random_yaml_data(self, agent_file: Callable[[str | bytes], Path], doc: Any) -> None:
        """Any YAML data at the top level: a valid agent or a ConfigError, never a traceback."""
        load_or_error(agent_file(yaml.safe_dump(doc, allow_unicode=True)))

    @FUZZ
    @given(doc=mutated_defaults())
    def test_mutated_default_config(
        self, agent_file: Callable[[str | bytes], Path], doc: Any
    ) -> None:
        """The real defaults with wrong types, unknown keys and bad numbers spliced in."""
        load_or_error(agent_file(yaml.safe_dump(doc, allow_unicode=True)))

    @FUZZ
    @given(text=yaml_text)
    def test_random_yaml_text(self, agent_file: Callable[[str | bytes], Path], text: str) -> None:
        """YAML-ish text with tags, anchors, directives and controls: ConfigError or valid."""
        load_or_error(agent_file(text))

    @FUZZ
    @given(data=st.binary(max_size=300))
    def test_random_bytes(self, agent_file: Callable[[str | bytes], Path], data: bytes) -> None:
        """Arbitrary bytes: ConfigError or valid, never a traceback."""
        load_or_error(agent_file(data))
