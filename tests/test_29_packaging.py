"""The distribution ships every package of the source tree (a wheel, not only an editable install).

The editable install the README uses finds sub-packages through the directory, so a
package missing from ``[tool.setuptools] packages`` only breaks ``pip install
memory-inject``: the wheel of 2026-12-02 had no ``memory_inject.storage.sqlite`` or
``memory_inject.storage.postgres``, and the default store could not be imported.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setuptools() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        table = tomllib.load(f)["tool"]["setuptools"]
    assert isinstance(table, dict)
    return table


def _source_packages() -> set[str]:
    """Every directory with an ``__init__.py``, named as the distribution imports it."""
    table = _setuptools()
    package_dir = table["package-dir"]
    assert isinstance(package_dir, dict)
    found: set[str] = set()
    for name, folder in package_dir.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(base).parts
            found.add(".".join((name, *rel)))
    return found


def test_every_source_package_is_in_the_distribution() -> None:
    """Each package directory under ``memory_inject/`` and ``adapters/`` is listed."""
    packages = _setuptools()["packages"]
    assert isinstance(packages, list)
    source = _source_packages()
    assert {"memory_inject.storage.sqlite", "memory_inject.storage.postgres"} <= source
    assert [] == sorted(source - set(packages))
    assert [] == sorted(set(packages) - source)


def test_the_data_files_ship_as_package_data() -> None:
    """``memory_inject/data`` (defaults, the demo's memories, the tokenizer) is package data."""
    data = _setuptools()["package-data"]
    assert isinstance(data, dict)
    patterns = data["memory_inject"]
    assert isinstance(patterns, list)
    shipped = {p for pattern in patterns for p in (ROOT / "memory_inject").glob(pattern)}
    on_disk = {p for p in (ROOT / "memory_inject" / "data").iterdir() if p.is_file()}
    assert on_disk and on_disk <= shipped
