"""PerObject: a value derived from an immutable object, built once for the object's life."""

from __future__ import annotations

import gc

from memory_inject._cache import PerObject


class _Obj:
    """A weak-referenceable stand-in for a config."""


class TestPerObject:
    def test_built_once_per_object_and_separately_for_another(self) -> None:
        """The build runs once per object; an equal-looking other object gets its own value."""
        calls: list[int] = []

        def build(o: _Obj) -> list[int]:
            calls.append(id(o))
            return []

        cache: PerObject[_Obj, list[int]] = PerObject(build)
        a, b = _Obj(), _Obj()
        assert cache(a) is cache(a)
        assert cache(a) is not cache(b)
        assert [id(a), id(b)] == calls

    def test_an_entry_goes_with_its_object(self) -> None:
        """When the object dies its value is dropped, so a reused id cannot hit a stale value."""
        cache: PerObject[_Obj, str] = PerObject(lambda o: f"v{id(o)}")
        a = _Obj()
        cache(a)
        assert 1 == len(cache)
        del a
        gc.collect()
        assert 0 == len(cache)
        b = _Obj()
        assert f"v{id(b)}" == cache(b)
