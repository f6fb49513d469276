"""A store's write and read arguments of the wrong type are a ``TypeError`` naming them.

``store(..., session_id=5)`` was kept as ``'5'`` by SQLite (``True`` as ``'1'``, session
"1"'s row) and as ``5`` by ``InMemoryStore`` (a row no render ever showed), and
``recall(None, 5)`` was an ``AttributeError`` from inside the store. Found by a helper
trying the public API with the wrong types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Factory = Callable[..., Any]


@pytest.mark.parametrize("session", [5, 5.0, True, b"s1"])
def test_a_session_id_that_is_not_a_str_is_refused(store_factory: Factory, session: Any) -> None:
    store = store_factory()
    with pytest.raises(TypeError, match="'session_id' must be a string or None"):
        store.store("k", "deploys go to prod-3", "core", session_id=session)
    assert store.get("k") is None
    store.store("k", "deploys go to prod-3", "core", session_id="5")
    assert "5" == store.get("k").session_id


@pytest.mark.parametrize(
    ("args", "kwargs", "name"),
    [
        ((None, 5), {}, "query"),
        ((b"deploys", 5), {}, "query"),
        (("deploys", "5"), {}, "limit"),
        (("deploys", True), {}, "limit"),
        (("deploys", 5), {"session_id": 5}, "session_id"),
    ],
)
def test_a_recall_argument_of_the_wrong_type_is_named(
    store_factory: Factory, args: tuple[Any, ...], kwargs: dict[str, Any], name: str
) -> None:
    store = store_factory()
    store.store("k", "deploys go to prod-3", "core")
    with pytest.raises(TypeError, match=f"recall: '{name}' must be"):
        store.recall(*args, **kwargs)
    assert ["k"] == [e.key for e in store.recall("deploys", 5)]
