"""Issue 28, the public face: the quickstart's names at the root, open_store above storage,
the block readers in memory_inject.testing, one RENDERERS, no dead stage forms."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import memory_inject
import memory_inject.render
import memory_inject.stages
import memory_inject.storage
from memory_inject import (
    AgentConfig,
    BackendConfig,
    MemoryInjectConfig,
    MemorySkipped,
    SQLiteStore,
    arender_memory_context,
    memory_skipped,
    open_store,
    render_memory_context,
)
from memory_inject.config import RENDERERS, RendererConfig
from memory_inject.models import MemoryEntry, TurnOrigin
from memory_inject.policy import resolve_inject_policy
from memory_inject.render import build_renderer, get_renderer
from memory_inject.stages import StageContext
from memory_inject.testing import parse_bracket, parse_relevant, parse_sectioned

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
QUERY = "where do production deploys go?"


@pytest.fixture(params=["sqlite", "postgres"])
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AgentConfig]:
    """An agent whose memory.backend is a SQLite file or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield AgentConfig("a", MemoryInjectConfig(backend=BackendConfig(path="m.db")))
        return
    from psycopg.conninfo import make_conninfo

    from tests.storage._pg_backend import create_database, drop_database

    server = request.getfixturevalue("pg_dsn")
    name = create_database(server)
    dsn = make_conninfo(server, dbname=name)
    try:
        yield AgentConfig("a", MemoryInjectConfig(backend=BackendConfig(kind="postgres", dsn=dsn)))
    finally:
        drop_database(server, name)


class TestQuickstartFromTheRoot:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_open_store_from_the_root_opens_the_agents_store_and_renders(
        self, agent: AgentConfig, tmp_path: Path, mode: str
    ) -> None:
        """memory_inject.open_store opens the store the agent names, and a turn renders from it."""
        store: Any = open_store(agent, tmp_path)
        try:
            if agent.memory.backend.kind == "sqlite":
                assert isinstance(store, SQLiteStore)
                assert (tmp_path / "m.db").is_file()
            store.store("deploy_target", "Production deploys go to prod-3.", "core")
            render: Callable[..., Any] = render_memory_context
            if mode == "async":
                render = lambda *a, **k: asyncio.run(arender_memory_context(*a, **k))  # noqa: E731
            result = render(store, QUERY, config=agent.memory)
        finally:
            store.close()
        assert ["- deploy_target: Production deploys go to prod-3."] == parse_bracket(result.text)

    def test_memory_skipped_from_the_root_hears_a_skipped_turn(self) -> None:
        """The root's memory_skipped / MemorySkipped are the signal a skipped turn sends."""
        heard: list[MemorySkipped] = []

        def on_skip(sender: object, *, event: MemorySkipped) -> None:
            heard.append(event)

        policy = resolve_inject_policy(TurnOrigin.SUB_TURN, has_session=False)
        store = memory_inject.InMemoryStore()
        with memory_skipped.connected_to(on_skip):
            result = render_memory_context(store, QUERY, policy=policy)
        assert ("", ["sub_turn"]) == (result.text, [e.origin for e in heard])

    def test_the_old_storage_path_is_the_same_open_store(self) -> None:
        """memory_inject.storage.open_store still works, as the very function the root exports."""
        from memory_inject.storage import open_store as old

        assert old is memory_inject.open_store
        assert "open_store" not in memory_inject.storage.__all__

    def test_an_unknown_storage_name_is_still_an_attribute_error(self) -> None:
        """The storage package's lazy names do not swallow a typo."""
        with pytest.raises(AttributeError, match="open_stor"):
            _ = memory_inject.storage.open_stor


def _entry(key: str, content: str, **kw: Any) -> MemoryEntry:
    return MemoryEntry(key, content, "core", NOW, score=0.9, **kw)


class TestBlockReaders:
    def test_the_render_package_no_longer_exports_the_readers(self) -> None:
        """parse_* live in memory_inject.testing only: the render package is the formats."""
        readers = {"parse_bracket", "parse_relevant", "parse_sectioned"}
        assert set() == readers & set(dir(memory_inject.render))
        assert readers <= set(memory_inject.testing.__all__)

    @pytest.mark.parametrize(
        ("kind", "read"),
        [
            ("bracket", parse_bracket),
            ("relevant_memories", parse_relevant),
            ("sectioned", lambda text: parse_sectioned(text)["Selected Memory"]),
        ],
    )
    def test_each_reader_reads_back_one_line_per_rendered_entry(
        self, kind: str, read: Callable[[str], list[str]]
    ) -> None:
        """A block of two entries reads back as two entry lines, the first naming the first."""
        config = MemoryInjectConfig(renderer=RendererConfig(kind=kind))
        rows = [_entry("alpha", "first thing"), _entry("beta", "second thing")]
        out = build_renderer(config.renderer)(StageContext(config, NOW), rows)
        lines = read(out.text)
        assert [1, 1] == [sum(c in line for line in lines) for c in ("first thing", "second thing")]
        assert 2 == len(lines)

    @pytest.mark.parametrize("read", [parse_bracket, parse_relevant, parse_sectioned])
    def test_each_reader_refuses_text_that_is_not_its_block(self, read: Callable[..., Any]) -> None:
        """Arbitrary text is a ValueError, not an empty answer."""
        with pytest.raises(ValueError, match="not a"):
            read("hello\n")


def _defined_at_top_level(name: str) -> list[str]:
    """The modules of memory_inject that assign ``name`` at their top level."""
    found = []
    for path in sorted((ROOT / "memory_inject").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append(path.relative_to(ROOT).as_posix())
    return found


class TestOneName:
    def test_renderers_is_defined_once_in_config(self) -> None:
        """RENDERERS has one home (the config's renderer names); render imports it."""
        assert ["memory_inject/config/_renderer.py"] == _defined_at_top_level("RENDERERS")

    @pytest.mark.parametrize("name", RENDERERS)
    def test_every_config_renderer_name_has_its_default_renderer(self, name: str) -> None:
        """get_renderer serves each name the config accepts, a renderer of that name."""
        assert name == get_renderer(name).name


class TestNoDeadCode:
    def test_no_function_form_of_a_configured_stage(self) -> None:
        """A configured stage is its class only: no ``decay`` beside ``Decay`` and the like."""
        names = set(memory_inject.stages.__all__)
        classes = {n for n in names if n[0].isupper()}
        lowered = {c.lower() for c in classes}
        forms = {n for n in names - classes if n.replace("_", "") in lowered}
        assert set() == forms

    def test_every_name_the_dedupe_module_exports_is_imported_by_another_module(self) -> None:
        """stages/_dedupe.py exports only what the rest of the library imports from it."""
        from memory_inject.stages import _dedupe

        imported: set[str] = set()
        for path in (ROOT / "memory_inject").rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == _dedupe.__name__:
                    imported.update(a.name for a in node.names)
        assert set() == set(_dedupe.__all__) - imported
