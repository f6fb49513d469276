"""Run a suite through the sync and the async twin of every adapter method.

A test module does ``from tests._twins import call, twin  # noqa: F401``; the
autouse ``twin`` fixture runs each of its tests twice, and ``call(obj, "handle",
...)`` calls ``obj.handle(...)`` in sync mode and ``asyncio.run(obj.ahandle(...))``
in async mode, so the two twins must give the same results to pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

_MODE = {"async": False}


@pytest.fixture(autouse=True, params=["sync", "async"])
def twin(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test through the sync methods, then through their async twins."""
    _MODE["async"] = request.param == "async"
    yield str(request.param)
    _MODE["async"] = False


def call(obj: Any, name: str, /, *args: Any, **kwargs: Any) -> Any:
    """``obj.<name>(...)``, or ``asyncio.run(obj.a<name>(...))`` in async mode."""
    if _MODE["async"]:
        return asyncio.run(getattr(obj, "a" + name)(*args, **kwargs))
    return getattr(obj, name)(*args, **kwargs)
