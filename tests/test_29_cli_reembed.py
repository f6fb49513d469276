"""``memory-inject import --reembed`` embeds every row again (twenty-eighth round).

After a switch to another model of the same size, an export's vectors are the old
model's and a plain import keeps them; the flag embeds each row with the agent's
embedder instead (``import_jsonl(reembed=True)``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memory_inject import load_agent_config, open_store
from memory_inject.cli import cli
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.sqlite import SQLiteStore

FACT = "My dog is called Biscuit."


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        (tmp_path / "a.yaml").write_text(
            "agent: a\nmemory:\n  backend: {path: .memory/a.db, embedder: hashing}\n",
            encoding="utf-8",
        )
        yield tmp_path
    finally:
        os.chdir(old)


class OldModel:
    """Another model of the agent's size: the hashing vectors, reversed."""

    name = "old"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.inner = HashingEmbedder(dim)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(reversed(list(v))) for v in self.inner.embed(texts)]


@pytest.mark.parametrize("reembed", [False, True])
def test_the_flag_takes_the_agents_vectors(workdir: Path, reembed: bool) -> None:
    agent = load_agent_config(workdir / "a.yaml")
    store = open_store(agent)
    assert isinstance(store, SQLiteStore) and store.embedder is not None
    dim = store.embedder.dim
    fresh = list(store.embedder.embed([FACT])[0])
    store.close()
    old = OldModel(dim)
    with SQLiteStore(workdir / "old.db", embedder=old) as source:
        source.store("dog", FACT)
        source.export_jsonl(workdir / "dump.jsonl")
    args = ["import", "dump.jsonl", "--agent", "a.yaml"]
    result = run(*args, "--reembed") if reembed else run(*args)
    assert 0 == result.exit_code, result.stderr
    store = open_store(agent)
    assert isinstance(store, SQLiteStore)
    got = store.get("dog")
    store.close()
    assert got is not None and got.embedding is not None
    want = fresh if reembed else old.embed([FACT])[0]
    assert list(got.embedding) == pytest.approx(want, abs=1e-6)
