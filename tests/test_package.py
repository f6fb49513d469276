"""Package shape: the public API, import direction and the demo (the README's main job)."""

from __future__ import annotations

import ast
import io
from datetime import UTC, datetime
from pathlib import Path

import memory_inject
from memory_inject import MemoryInjectConfig
from memory_inject.demo import DEMO_TURNS, open_demo_store, run_demo

ROOT = Path(__file__).resolve().parent.parent
# models -> config -> policy -> stages -> pipeline -> adapters; storage sees only models/errors.
LAYERS = [
    "models",
    "exceptions",
    "_text",
    "_tokens",
    "config",
    "policy",
    "stages",
    "rerank",
    "render",
    "signals",
    "pipeline",
]


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m.split(".")[1] for m in found if m.startswith("memory_inject.")}


def sources_of(name: str) -> list[Path]:
    """The files of a core module, or of every module of a core package."""
    package = ROOT / "memory_inject" / name
    return sorted(package.glob("*.py")) if package.is_dir() else [package.with_suffix(".py")]


class TestPublicApi:
    def test_all_is_sorted_and_importable(self) -> None:
        """__all__ is sorted and every name in it exists."""
        names = memory_inject.__all__
        assert sorted(names) == list(names)
        assert all(hasattr(memory_inject, n) for n in names)

    def test_the_issue_contract_names_are_exported(self) -> None:
        """The names other code relies on are importable from memory_inject."""
        required = {
            "TurnOrigin",
            "InjectPolicy",
            "resolve_inject_policy",
            "MemoryEntry",
            "MemoryCategory",
            "Memory",
            "InMemoryStore",
            "MemoryInjectConfig",
            "TurnMeta",
            "render_memory_context",
            "RenderResult",
            "MemoryRecall",
            "load_agent_config",
            "AgentConfig",
            "ConfigError",
        }
        assert set() == required - set(memory_inject.__all__)


class TestImportDirection:
    def test_core_modules_only_import_inward(self) -> None:
        """A core module never imports a module that comes later in the layering."""
        for i, name in enumerate(LAYERS):
            later = set(LAYERS[i + 1 :]) - {"signals"}
            for path in sources_of(name):
                assert set() == imports_of(path) & later, path.name

    def test_config_does_not_import_storage(self) -> None:
        """No module of config/ imports storage, not even inside a function."""
        for path in sources_of("config"):
            assert "storage" not in imports_of(path), path.name

    def test_storage_depends_only_on_models_and_exceptions(self) -> None:
        """storage/ imports nothing from the pipeline side."""
        allowed = {"models", "exceptions", "storage", "embedders"}
        for path in (ROOT / "memory_inject" / "storage").glob("*.py"):
            assert set() == imports_of(path) - allowed, path.name


class TestDemo:
    def test_demo_renders_each_injecting_origin_and_skips_the_sub_turn(
        self, tmp_path: Path
    ) -> None:
        """The demo seeds the store, renders blocks and never shows chat rows to cron."""
        now = datetime.now(UTC)
        store = open_demo_store(tmp_path / "demo.db", now)
        out = io.StringIO()
        try:
            rendered = run_demo(store, MemoryInjectConfig(), out, now)
        finally:
            store.close()
        text = out.getvalue()
        assert len(DEMO_TURNS) == text.count("=== turn")
        assert rendered >= 3
        assert "skipped: sub_turn" in text
        cron = text.split("=== turn 3")[1].split("=== turn 4")[0]
        assert "telegram_" not in cron.split("dropped:")[1]
        assert "Incident 2231" in cron
