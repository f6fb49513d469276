"""The store contract: capabilities are decided the same way everywhere, and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory_inject import AsyncMemory, Memory
from memory_inject.contract import MemoryStore, supports
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


class _Bare:
    """Answers recall only: no name, no capability."""

    def recall(self, query: str, limit: int, **kw: object) -> list[object]:
        return []


class _InstanceInfo(_Bare):
    """Gains a capability through an instance attribute, set per object."""

    name = "instance-info"

    def __init__(self, with_info: bool) -> None:
        if with_info:
            self.answer = lambda q: None


class _Proxy:
    """Forwards every attribute to another store (the shape of a wrapping proxy)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


class TestSupports:
    @pytest.mark.parametrize("name", sorted(CAPABILITIES))
    def test_supports_is_isinstance_on_every_kind_of_store(self, name: str, tmp_path: Path) -> None:
        """supports() answers what isinstance answers: real stores, bare and per-instance ones."""
        proto = CAPABILITIES[name]
        with SQLiteStore(tmp_path / "m.db") as sqlite:
            stores: list[object] = [
                InMemoryStore(),
                sqlite,
                _Bare(),
                _InstanceInfo(True),
                _InstanceInfo(False),
                "m.db",
                None,
            ]
            for _ in range(2):  # the second round answers from the per-class cache
                assert [isinstance(s, proto) for s in stores] == [
                    supports(s, proto) for s in stores
                ]

    def test_a_forwarding_proxy_has_its_inner_stores_capabilities(self, tmp_path: Path) -> None:
        """A __getattr__ proxy supports exactly what the store it wraps supports."""
        with SQLiteStore(tmp_path / "m.db") as sqlite:
            for inner in (InMemoryStore(), sqlite):
                proxy = _Proxy(inner)
                assert [supports(inner, p) for p in CAPABILITIES.values()] == [
                    supports(proxy, p) for p in CAPABILITIES.values()
                ]
                assert supports(proxy, Memory)
