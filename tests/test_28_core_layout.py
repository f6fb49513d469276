"""Issue 28, the turn wing: plan logic in one home, every core module small, splits layered.

A pure restructuring: these tests pin the new shape (where the plan logic lives, how
long the core modules are, which way the split modules import) and that every old
public import path still answers with the very same object.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from memory_inject.config import MemoryInjectConfig, RecallPlanConfig
from memory_inject.config._recall_plan import PlanQueryConfig

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memory_inject"
#: The engineers of the store wing, the CLI and the adapters split those folders.
OTHER_WINGS = ("storage", "cli")
MAX_LINES = 400

#: Each module split out of a core module, and the modules it must never import:
#: its parent (which re-exports it, or drives it) and anything above the parent.
SPLITS = {
    "memory_inject._calls": {"memory_inject._recall", "memory_inject.pipeline"},
    "memory_inject._window_rows": {
        "memory_inject._calls",
        "memory_inject._recall",
        "memory_inject.pipeline",
    },
    "memory_inject._recalled": {"memory_inject._recall", "memory_inject.pipeline"},
    "memory_inject._turn": {"memory_inject.pipeline", "memory_inject._refill"},
    "memory_inject._refill": {"memory_inject.pipeline"},
    "memory_inject.plan": {"memory_inject._recall", "memory_inject.pipeline"},
    "memory_inject._slots": {"memory_inject._deadline", "memory_inject._recall"},
    "memory_inject._slot_notes": {
        "memory_inject._slots",
        "memory_inject._deadline",
        "memory_inject._recall",
    },
    "memory_inject._recall_query": {"memory_inject.contract"},
    "memory_inject._store_capabilities": {"memory_inject.contract"},
    "memory_inject._supports": {"memory_inject.contract"},
    "memory_inject._render_ears": {"memory_inject.contract"},
    "memory_inject._model_embedders": {"memory_inject.embedders"},
    "memory_inject.stages._threat_rules": {"memory_inject.stages.threat"},
    "memory_inject.stages._threat_view": {
        "memory_inject.stages.threat",
        "memory_inject.stages._threat_rules",
    },
    "memory_inject.config._backend": {"memory_inject.config.schema"},
    "memory_inject.config._turn_groups": {"memory_inject.config.schema"},
    "memory_inject.render._sectioned_format": {"memory_inject.render.sectioned"},
}

#: Public names that moved, by the old import path that must keep answering.
REEXPORTS = {
    "memory_inject.contract": {
        "RecallQuery": "memory_inject._recall_query",
        "RecallAnswer": "memory_inject._recall_query",
        "SupportsRecords": "memory_inject._store_capabilities",
        "SupportsJsonl": "memory_inject._store_capabilities",
        "SupportsNamespaces": "memory_inject._store_capabilities",
        "SupportsVectors": "memory_inject._store_capabilities",
        "SupportsClose": "memory_inject._store_capabilities",
        "SupportsPath": "memory_inject._store_capabilities",
        "SupportsErase": "memory_inject._store_capabilities",
        "report_wait": "memory_inject._render_ears",
        "supports": "memory_inject._supports",
    },
    "memory_inject.config.schema": {
        "BackendConfig": "memory_inject.config._backend",
        "PoolConfig": "memory_inject.config._backend",
        "GovernanceConfig": "memory_inject.config._turn_groups",
        "TrivialPromptConfig": "memory_inject.config._turn_groups",
        "StandingConfig": "memory_inject.config._turn_groups",
        "SessionsConfig": "memory_inject.config._turn_groups",
        "ThreatScanConfig": "memory_inject.config._turn_groups",
        "THREAT_RULE_IDS": "memory_inject.config._turn_groups",
    },
    "memory_inject.stages.threat": {
        "RULES": "memory_inject.stages._threat_rules",
        "RULESET_VERSION": "memory_inject.stages._threat_rules",
        "ThreatRule": "memory_inject.stages._threat_rules",
        "fold": "memory_inject.stages._threat_view",
    },
    "memory_inject.render.sectioned": {
        "SECTIONED_TITLE": "memory_inject.render._sectioned_format",
        "CONTESTED_WARNING": "memory_inject.render._sectioned_format",
        "SECTION_TITLES": "memory_inject.render._sectioned_format",
        "DEFAULT_SECTION_CAPS": "memory_inject.render._sectioned_format",
    },
    "memory_inject.embedders": {
        "SentenceTransformerEmbedder": "memory_inject._model_embedders",
        "Model2VecEmbedder": "memory_inject._model_embedders",
    },
    "memory_inject._deadline": {
        "MAX_STUCK_PER_STORE": "memory_inject._slots",
        "MAX_THREADS": "memory_inject._slot_notes",
        "Busy": "memory_inject._slots",
        "Waited": "memory_inject._slots",
        "stuck_calls": "memory_inject._slots",
    },
    "memory_inject._slots": {
        "EXHAUSTED": "memory_inject._slot_notes",
        "MAX_THREADS": "memory_inject._slot_notes",
        "waited_note": "memory_inject._slot_notes",
        "waited_store_note": "memory_inject._slot_notes",
    },
}


def _core_modules() -> list[Path]:
    """Every module of the package outside the store wing and the CLI."""
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in OTHER_WINGS
    )


def _imports(module: str) -> set[str]:
    """The ``memory_inject`` modules a module imports, typing-only imports included."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("memory_inject")}


def _defined(module: str) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


class TestModuleSize:
    def test_every_core_module_is_under_400_lines(self) -> None:
        """No module of the turn wing (the package outside storage/ and cli/) reaches 400 lines."""
        lines = {
            p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in _core_modules()
        }
        assert {} == {k: v for k, v in lines.items() if v >= MAX_LINES}

    @pytest.mark.parametrize("module", sorted(SPLITS))
    def test_a_split_module_says_what_it_owns(self, module: str) -> None:
        """Each split module opens with a docstring naming what it owns and its parent's home."""
        doc = importlib.import_module(module).__doc__
        assert doc is not None
        assert len(doc.strip().splitlines()) >= 3


class TestPlanHome:
    def test_plan_logic_is_in_plan(self) -> None:
        """plan_for and recall_limit_for live in memory_inject.plan, and agree with the config."""
        from memory_inject.plan import PlanQuery, plan_for, recall_limit_for

        cfg = MemoryInjectConfig(
            recall_limit=7,
            recall_plan=RecallPlanConfig(
                enabled=True, queries=(PlanQueryConfig("lexical", 3),), cap=4
            ),
        )
        plan = plan_for(cfg)
        assert plan is not None
        assert (PlanQuery("lexical", 3),) == plan.queries
        assert 4 == plan.cap
        assert 7 == recall_limit_for(cfg)
        assert plan_for(MemoryInjectConfig()) is None

    def test_the_recall_module_keeps_only_the_driver(self) -> None:
        """_recall runs calls; it no longer builds them nor merges their results."""
        defined = _defined("memory_inject._recall")
        moved = {"build_calls", "_Entities", "Call", "_collect", "Recalled", "describe"}
        assert set() == defined & moved
        assert {"run_sync", "run_async", "_steps"} <= defined

    def test_the_pipeline_keeps_the_turn_and_the_refill_elsewhere(self) -> None:
        """pipeline holds the entry points; the turn's preparation and the refill moved out."""
        defined = _defined("memory_inject.pipeline")
        moved = {"_prepare", "_Turn", "_Withholding", "_owed", "plan_for", "recall_limit_for"}
        assert set() == defined & moved
        assert {"render_memory_context", "arender_memory_context", "run_stages"} <= defined


class TestSplitLayering:
    @pytest.mark.parametrize("module", sorted(SPLITS))
    def test_a_split_module_never_imports_its_parent(self, module: str) -> None:
        """A module split out of another sits in its parent's layer: it never imports upward."""
        assert set() == _imports(module) & SPLITS[module]


class TestReexports:
    @pytest.mark.parametrize(
        ("old", "name", "home"),
        [(old, name, home) for old, names in REEXPORTS.items() for name, home in names.items()],
    )
    def test_the_old_import_path_answers_with_the_same_object(
        self, old: str, name: str, home: str
    ) -> None:
        """``from <old module> import <name>`` still works and gives the moved object itself.

        What contract re-exports reports contract as its module: the contract suite reads
        ``__module__`` to find a capability protocol's members.
        """
        moved = getattr(importlib.import_module(home), name)
        assert moved is getattr(importlib.import_module(old), name)
        if old == "memory_inject.contract":
            assert old == moved.__module__
