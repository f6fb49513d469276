"""Package shape: the public API, import direction and the demo (the README's main job)."""

from __future__ import annotations

import ast
import io
import re
import types
from datetime import UTC, datetime
from pathlib import Path

import memory_inject
from memory_inject import MemoryInjectConfig
from memory_inject.demo import DEMO_TURNS, open_demo_store, run_demo
from memory_inject.storage.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
# models -> config -> policy -> stages -> pipeline -> adapters; storage sees only models/errors.
LAYERS = [
    "models",
    "exceptions",
    "contract",
    "_text",
    "_tokens",
    "config",
    "policy",
    "stages",
    "render",
    "standing",
    "signals",
    "pipeline",
]


def imports_of(path: Path) -> set[str]:
    if path.is_dir():  # a package: what any of its modules imports
        return set().union(*(imports_of(p) for p in sorted(path.glob("*.py"))))
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

    def test_all_is_exactly_the_public_names(self) -> None:
        """__all__ is sorted and equals the root's public names, modules aside (httpx's test)."""
        public = sorted(
            name
            for name, value in vars(memory_inject).items()
            if not name.startswith("_")
            and not isinstance(value, types.ModuleType)
            and name != "annotations"
        )
        assert sorted(memory_inject.__all__) == memory_inject.__all__
        assert public == memory_inject.__all__

    def test_the_readme_imports_of_the_core_are_exported_at_the_root(self) -> None:
        """Every name the README imports from a core subpackage is also a root name
        (the adapters and the test doubles keep their own namespaces)."""
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        imported = {
            name.strip()
            for module, names in re.findall(
                r"^from memory_inject\.(\w+) import (.+)$", readme, re.M
            )
            if module not in ("adapters", "testing")
            for name in names.split(",")
        }
        assert set() == imported - set(memory_inject.__all__)

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
        """storage/ imports only models, records, errors, embedders, the stopword list, what
        a word is (``_words``: letters, digits and their combining marks),
        the contract (the seam's RecallQuery / RecallAnswer values it answers with),
        the contract's filter-first rules for restricted queries, and the answer of a
        store with only ``recall`` (``_recall_only``: the Markdown store answers as the
        seam would ask it, and adds the blocks it could not read), and the library's own
        threads its async twins run blocking calls on, never asyncio's default executor
        (``_deadline``: the recall threads; ``_workers``: writes), and the skip set's key
        rules a refill's exclusion is built from (``_skip_keys``)."""
        allowed = {
            "_skip_keys",
            "_deadline",
            "_workers",
            "_filter_first",
            "_recall_only",
            "models",
            "records",
            "exceptions",
            "storage",
            "embedders",
            "_stopwords",
            "_words",
            "contract",
        }
        storage = ROOT / "memory_inject" / "storage"
        for path in storage.rglob("*.py"):  # its engine sub-packages too
            found = imports_of(path)
            if path == storage / "__init__.py":
                # The face's __getattr__ keeps the old path memory_inject.storage.open_store,
                # resolved on first use: a module-level import of stores could not even run.
                found -= {"stores"}
            assert set() == found - allowed, path.relative_to(storage).as_posix()


def _module_graph() -> dict[str, set[str]]:
    """Every module of the distribution and the ``memory_inject`` modules it imports."""
    roots = {"memory_inject": ROOT / "memory_inject", "memory_inject.adapters": ROOT / "adapters"}
    files: dict[str, Path] = {}
    for prefix, folder in roots.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join([prefix, *parts])] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = []  # typing-only imports are not run
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                # ``from pkg import submodule`` depends on the submodule, not on pkg's body
                subs = {f"{node.module}.{a.name}" for a in node.names} & files.keys()
                found |= subs or {node.module}
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        graph[name] = {m for m in found if m in files and m != name}
    return graph


class TestModuleGraph:
    def test_no_import_cycle(self) -> None:
        """No module reaches itself through imports (typing-only imports aside)."""
        graph = _module_graph()
        cycles: list[list[str]] = []
        state: dict[str, int] = {}

        def visit(node: str, path: list[str]) -> None:
            state[node] = 1
            for nxt in sorted(graph[node]):
                if state.get(nxt) == 1:
                    cycles.append([*path[path.index(nxt) :], nxt])
                elif nxt not in state:
                    visit(nxt, [*path, nxt])
            state[node] = 2

        for node in sorted(graph):
            if node not in state:
                visit(node, [node])
        assert [] == cycles

    def test_the_core_imports_neither_storage_nor_adapters(self) -> None:
        """Storage and adapters may import the core; the core imports neither.

        The package root (which re-exports ``InMemoryStore``), the CLI package
        and the demo are applications of the library, not its core; so is
        ``memory_inject.stores``, whose ``open_store`` reads an agent config
        and opens the store it names.
        """
        outer = ("memory_inject.storage", "memory_inject.adapters")

        def is_app(name: str) -> bool:
            return name in (
                "memory_inject",
                "memory_inject.demo",
                "memory_inject.stores",  # open_store: agent config in, store out
            ) or name.startswith(("memory_inject.cli.", "memory_inject.cli"))

        bad = {
            name: sorted(m for m in deps if m.startswith(outer))
            for name, deps in _module_graph().items()
            if not name.startswith(outer) and not is_app(name)
        }
        assert {} == {k: v for k, v in bad.items() if v}


class TestDemo:
    def test_demo_renders_each_injecting_origin_and_skips_the_sub_turn(
        self, tmp_path: Path
    ) -> None:
        """The demo seeds the store, renders blocks and never shows chat rows to cron."""
        now = datetime.now(UTC)
        store = open_demo_store(tmp_path / "demo.db", now)
        assert isinstance(store, SQLiteStore)  # SQLite ships with the package
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


def _distribution_modules() -> list[Path]:
    """Every module of the distribution: the package and the adapters shipped inside it."""
    found = [*(ROOT / "memory_inject").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]
    return sorted(p for p in found if "__pycache__" not in p.parts)


class TestModuleShape:
    """Issue 28: every module is small enough to read whole, and says what it owns."""

    def test_no_module_is_over_400_lines(self) -> None:
        """HOUSE_STYLE's bound: a module over 400 lines is split by job."""
        sizes = {
            str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
            for p in _distribution_modules()
        }
        assert len(sizes) > 100
        assert {} == {name: n for name, n in sizes.items() if n > 400}

    def test_every_module_opens_with_a_docstring(self) -> None:
        """The opening docstring says what the module owns (and is not empty)."""
        bare = [
            str(p.relative_to(ROOT))
            for p in _distribution_modules()
            if not (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").strip()
        ]
        assert [] == bare
