"""Loading reports every problem of a file, and a blank ``profile_id`` is one (round 30).

Found by a tester: the checks that compare two keys (``embedder_model`` with ``embedder``,
``dsn`` with ``kind``, ``min_size`` with ``max_size``, the fusion weights) and the offline
tokenizer check ran only when no key had a problem of its own, so a file with two problems
reported one, against configuration.md's "every problem it found". And
``governance.profile_id: ""`` loaded, and ``remember()`` stamped rows with the profile of
the process's working directory instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_inject import load_agent_config
from memory_inject.cli import cli
from memory_inject.config import GovernanceConfig
from memory_inject.exceptions import ConfigError

HASHING_MODEL = (
    "'embedder_model' must be null when 'embedder' is hashing, which has no model "
    "(got 'foo') @ $.memory.backend.embedder_model"
)
NO_MODEL2VEC_MODEL = (
    "'embedder_model' must name a local model2vec path when 'embedder' is model2vec "
    "(got null) @ $.memory.backend.embedder_model"
)
READERS = "'readers' must be >= 1 (got 0) @ $.memory.backend"


def _problems(tmp_path: Path, memory: str) -> tuple[str, ...]:
    """The problems of an agent file with this ``memory`` mapping (no file prefix)."""
    path = tmp_path / "a.yaml"
    path.write_text(f"agent: a\nmemory: {memory}\n")
    with pytest.raises(ConfigError) as info:
        load_agent_config(path)
    prefix = f"{path}: "
    assert all(p.startswith(prefix) for p in info.value.problems)
    return tuple(p[len(prefix) :] for p in info.value.problems)


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ("{embedder: hashing, embedder_model: foo, readers: 0}", (READERS, HASHING_MODEL)),
        ("{embedder: model2vec, readers: 0}", (READERS, NO_MODEL2VEC_MODEL)),
        (
            "{kind: postgres, path: '', embedder: hashing, embedder_model: foo}",
            (
                "'path' must be a non-empty string (got '') @ $.memory.backend",
                "'dsn' must be set when 'kind' is postgres (got null) @ $.memory.backend.dsn",
                HASHING_MODEL,
            ),
        ),
        (
            "{fusion: rrf, vector_weight: 0, keyword_weight: 0, readers: 0}",
            (
                READERS,
                "'vector_weight' + 'keyword_weight' must be > 0 when 'fusion' is rrf "
                "(got 0 + 0) @ $.memory.backend.vector_weight",
            ),
        ),
    ],
)
def test_a_cross_key_problem_is_reported_beside_a_key_problem(
    tmp_path: Path, backend: str, expected: tuple[str, ...]
) -> None:
    assert expected == _problems(tmp_path, f"{{backend: {backend}}}")


def test_the_pool_bounds_are_compared_beside_a_bad_pool_key(tmp_path: Path) -> None:
    assert (
        "'spare' is not a known key (got 1) @ $.memory.backend.pool",
        "'min_size' must be at most 'max_size' (8) (got 9) @ $.memory.backend.pool.min_size",
    ) == _problems(tmp_path, "{backend: {pool: {min_size: 9, max_size: 8, spare: 1}}}")


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        # A key with its own problem is not compared: no "(got null)" for a dsn that is there.
        ("{kind: postgres, dsn: 5}", "'dsn' must be a string (got 5) @ $.memory.backend"),
        (
            "{embedder: hashed, embedder_model: foo}",
            "'embedder' must be one of 'none', 'hashing', 'sentence-transformers', "
            "'minilm-onnx', 'model2vec' (got 'hashed') @ $.memory.backend",
        ),
        (
            "{embedder: model2vec, embedder_model: 5}",
            "'embedder_model' must be a string (got 5) @ $.memory.backend",
        ),
        (
            "{fusion: rrf, vector_weight: abc, keyword_weight: 0}",
            "'vector_weight' must be a number (got 'abc') @ $.memory.backend",
        ),
        (
            "{fusion: rrff, vector_weight: 0, keyword_weight: 0}",
            "'fusion' must be one of 'auto', 'weighted', 'rrf', 'minmax', 'max' "
            "(got 'rrff') @ $.memory.backend",
        ),
        (
            "{pool: {min_size: x, max_size: 8}}",
            "'min_size' must be an integer (got 'x') @ $.memory.backend.pool",
        ),
        (
            "{pool: {min_size: 9, max_size: 0}}",
            "'max_size' must be >= 1 (got 0) @ $.memory.backend.pool",
        ),
    ],
)
def test_a_check_on_a_key_that_failed_is_skipped(
    tmp_path: Path, backend: str, expected: str
) -> None:
    assert (expected,) == _problems(tmp_path, f"{{backend: {backend}}}")


def test_the_choices_are_compared_as_they_load(tmp_path: Path) -> None:
    """``embedder: Hashing`` loads as ``hashing``; the model check reads it that way too."""
    assert (HASHING_MODEL,) == _problems(
        tmp_path, "{backend: {embedder: ' Hashing', embedder_model: foo}}"
    )


def test_an_unavailable_tokenizer_is_reported_beside_other_problems(tmp_path: Path) -> None:
    assert (
        "'recall_limit' must be >= 0 (got -1) @ $.memory",
        "'tokenizer' must name a tiktoken encoding available offline (got 'no_such_encoding')"
        " @ $.memory.origins.cron.budget",
    ) == _problems(
        tmp_path, "{recall_limit: -1, origins: {cron: {budget: {tokenizer: no_such_encoding}}}}"
    )


@pytest.mark.parametrize(
    "memory",
    [
        "{budget: [x], origins: {cron: {budget: {tokenizer: ''}}}}",
        "{budget: {tokenizer: 5}, origins: [cron]}",
        "{origins: {cron: 5, daemon: {budget: 7}}}",
        "{origins: {crons: {budget: {tokenizer: cl100k_base}}}}",
    ],
)
def test_bad_shapes_around_a_tokenizer_are_reported_not_raised(tmp_path: Path, memory: str) -> None:
    problems = _problems(tmp_path, memory)
    assert problems
    assert not any("tiktoken" in p for p in problems)


def test_validate_prints_both_problems(tmp_path: Path) -> None:
    bad = tmp_path / "two.yaml"
    bad.write_text(
        "agent: x\nmemory:\n  backend: {embedder: hashing, embedder_model: foo, readers: 0}\n"
    )
    result = CliRunner().invoke(cli, ["validate", str(bad)])
    assert 1 == result.exit_code
    assert [f"{bad}: {READERS}", f"{bad}: {HASHING_MODEL}"] == result.stdout.splitlines()


# -- governance.profile_id ------------------------------------------------------


@pytest.mark.parametrize("value", ["''", "'   '", '"\\t"'])
def test_a_blank_profile_id_is_refused_with_the_file_and_key(tmp_path: Path, value: str) -> None:
    (problem,) = _problems(tmp_path, f"{{governance: {{profile_id: {value}}}}}")
    assert problem.startswith("'profile_id' must be a non-empty string (got ")
    assert problem.endswith(") @ $.memory.governance")


def test_a_blank_profile_id_in_an_origin_is_refused(tmp_path: Path) -> None:
    assert (
        "'profile_id' must be a non-empty string (got '') @ $.memory.origins.cron.governance",
    ) == _problems(tmp_path, "{origins: {cron: {governance: {profile_id: ''}}}}")


def test_a_blank_profile_id_is_refused_in_code_too() -> None:
    with pytest.raises(ValueError, match="'profile_id' must be a non-empty string"):
        GovernanceConfig(profile_id=" ")


def test_a_null_or_named_profile_id_loads(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("agent: a\nmemory: {governance: {profile_id: null}}\n")
    assert load_agent_config(path).memory.governance.profile_id is None
    path.write_text("agent: a\nmemory: {governance: {profile_id: 'project:alpha'}}\n")
    assert "project:alpha" == load_agent_config(path).memory.governance.profile_id


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (
            "{backend: {kind: postgres, dsn: ''}}",
            "'dsn' must be set when 'kind' is postgres (got '')",
        ),
        (
            "{backend: {kind: postgres, dsn: '  '}}",
            "'dsn' must be set when 'kind' is postgres (got '  ')",
        ),
        (
            "{backend: {embedder: model2vec, embedder_model: '  '}}",
            "'embedder_model' must name a local model2vec path when 'embedder' is model2vec "
            "(got '  ')",
        ),
    ],
)
def test_a_blank_value_is_named_as_given(tmp_path: Path, memory: str, expected: str) -> None:
    """A helper's review (round 30): an empty ``dsn`` was reported as "(got null)", and a
    blank model2vec path loaded."""
    assert any(expected in p for p in _problems(tmp_path, memory))


@pytest.mark.parametrize(
    ("memory", "hint"),
    [
        ("{origins: {CRON: {enabled: false}}}", "'CRON' is not an origin (did you mean 'cron'?)"),
        ("{Budget: {max_entries: 2}}", "'Budget' is not a known key (did you mean 'budget'?)"),
        ("{budgte: {max_entries: 2}}", "'budgte' is not a known key (did you mean 'budget'?)"),
    ],
)
def test_a_key_in_another_case_gets_its_hint(tmp_path: Path, memory: str, hint: str) -> None:
    """``CRON`` had no "did you mean" (difflib compares case); `` cron`` had one (round 35)."""
    (problem,) = _problems(tmp_path, memory)
    assert problem.startswith(hint)
