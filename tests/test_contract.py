"""The store contract: capabilities are decided the same way everywhere, and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory_inject import AsyncMemory, Memory
from memory_inject.contract import MemoryStore
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage._capabilities import CAPABILITIES, STORE_CLASSES, provides, store_class

ROOT = Path(__file__).resolve().parent.parent
_ROW = re.compile(r"^\| `(Supports\w+)` \|[^|]*\|([^|]*)\|([^|]*)\|([^|]*)\|", re.MULTILINE)


def documented() -> dict[str, dict[str, bool]]:
    """The capability table of docs/storage.md: ``{protocol: {backend: has it}}``."""
    text = (ROOT / "docs" / "storage.md").read_text(encoding="utf-8")
    return {
        m[1]: dict(zip(STORE_CLASSES, (c.strip() == "yes" for c in m.groups()[1:]), strict=True))
        for m in _ROW.finditer(text)
    }


class TestCapabilities:
    def test_docs_table_matches_the_stores(self) -> None:
        """docs/storage.md lists every capability and exactly which store has it."""
        actual = {
            name: {b: provides(store_class(b), proto) for b in STORE_CLASSES}
            for name, proto in CAPABILITIES.items()
        }
        assert actual == documented()

    @pytest.mark.parametrize("name", sorted(CAPABILITIES))
    def test_class_check_agrees_with_isinstance(self, name: str, tmp_path: Path) -> None:
        """The suite's class-level selection gives what isinstance gives on a real store."""
        proto = CAPABILITIES[name]
        with SQLiteStore(tmp_path / "m.db") as sqlite:
            stores = [InMemoryStore(), sqlite]
            assert [provides(type(s), proto) for s in stores] == [
                isinstance(s, proto) for s in stores
            ]

    @pytest.mark.parametrize("backend", list(STORE_CLASSES))
    def test_every_builtin_store_is_a_memory_store(self, backend: str) -> None:
        """Each built-in store has the full store contract (and so is a Memory)."""
        cls = store_class(backend)
        assert (True, True, True) == (
            provides(cls, MemoryStore),
            provides(cls, Memory),
            provides(cls, AsyncMemory),
        )

    def test_every_capability_is_a_runtime_checkable_protocol(self) -> None:
        """isinstance works on each capability, and each says who calls it."""
        for proto in CAPABILITIES.values():
            assert (True, True) == (
                getattr(proto, "_is_runtime_protocol", False),
                bool(proto.__doc__ and proto.__doc__.strip()),
            )
