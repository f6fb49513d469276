"""Every public definition has a docstring (house style), found by reading the source with ``ast``.

The rule, applied to every ``.py`` file under a folder, private modules included:

* **Modules**: every module (``__init__.py`` and ``_helper.py`` too) has a module docstring.
* **Module level**: every function and class whose name does not start with ``_`` has one,
  wherever it is defined (a private module's public names are what it shares with its
  package). Definitions under a module-level ``if``/``try`` (``if TYPE_CHECKING:``) count.
* **In a public class**: every method, property, classmethod and staticmethod whose name does
  not start with ``_`` has one, and so does every public nested class (walked the same way).
  Members of private classes and functions nested in functions are not checked.
* **Exemptions**:

  - ``@overload`` stubs; the implementation carries the docstring.
  - A property's ``@x.setter`` / ``@x.deleter``; the getter carries it.
  - Dunder methods other than ``__init__``: the data model says what they do and the class
    docstring says what the class does with them.
  - ``__init__`` when it takes no parameters besides ``self``, or when the class docstring
    names every parameter in double backticks (````max_entries````); otherwise ``__init__``
    needs its own docstring.
  - A member of a ``Protocol`` class (one that lists ``Protocol`` among its bases) that the
    class docstring names in double backticks (````recall```` or ````recall(query)````).

Module-level constants are not checked: ``ast`` gives them no docstring.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The folders checked, and at least how many definitions the walker must find in each.
FOLDERS = {"memory_inject": 300, "adapters": 60}


@attrs.frozen
class Definition:
    """One checked definition: where it is, its dotted name, and whether it has a docstring."""

    path: Path
    line: int
    name: str
    documented: bool

    def describe(self, root: Path) -> str:
        """``file:line name``, with the file relative to ``root``."""
        return f"{self.path.relative_to(root).as_posix()}:{self.line} {self.name}"


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _decorator_names(node: Function | ast.ClassDef) -> set[str]:
    """The last dotted part of each decorator: ``typing.overload`` -> ``overload``."""
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _is_accessor(node: Function) -> bool:
    """True for a property's ``@x.setter`` or ``@x.deleter``."""
    return any(
        isinstance(d, ast.Attribute) and d.attr in {"setter", "deleter"}
        for d in node.decorator_list
    )


def _is_protocol(node: ast.ClassDef) -> bool:
    """True when ``Protocol`` (or ``typing.Protocol``, ``Protocol[T]``) is among the bases."""
    for base in node.bases:
        target = base.value if isinstance(base, ast.Subscript) else base
        if isinstance(target, ast.Name) and target.id == "Protocol":
            return True
        if isinstance(target, ast.Attribute) and target.attr == "Protocol":
            return True
    return False


def _names_in_backticks(docstring: str | None, name: str) -> bool:
    """True when ``docstring`` has ````name```` or ````name(...)````."""
    return (
        bool(docstring) and re.search(rf"``{re.escape(name)}(``|\()", docstring or "") is not None
    )


def _init_documented_by_class(init: Function, class_doc: str | None) -> bool:
    """True when ``__init__`` takes only ``self``, or the class docstring names each parameter."""
    args = init.args
    params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)][1:]
    params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return all(_names_in_backticks(class_doc, p) for p in params)


def _class_members(node: ast.ClassDef, path: Path, prefix: str) -> Iterator[Definition]:
    class_doc = ast.get_docstring(node)
    protocol = _is_protocol(node)
    for child in node.body:
        if isinstance(child, ast.ClassDef):
            if not child.name.startswith("_"):
                yield from _class(child, path, prefix)
            continue
        if not isinstance(child, Function):
            continue
        if "overload" in _decorator_names(child) or _is_accessor(child):
            continue
        if child.name == "__init__":
            if _init_documented_by_class(child, class_doc):
                continue
        elif child.name.startswith("_") or (
            protocol and _names_in_backticks(class_doc, child.name)
        ):
            continue
        documented = ast.get_docstring(child) is not None
        yield Definition(path, child.lineno, f"{prefix}{child.name}", documented)


def _class(node: ast.ClassDef, path: Path, prefix: str) -> Iterator[Definition]:
    name = f"{prefix}{node.name}"
    yield Definition(path, node.lineno, name, ast.get_docstring(node) is not None)
    yield from _class_members(node, path, f"{name}.")


def _module_level(body: list[ast.stmt], path: Path) -> Iterator[Definition]:
    for node in body:
        if isinstance(node, ast.If):
            yield from _module_level(node.body + node.orelse, path)
        elif isinstance(node, ast.Try):
            handlers = [s for h in node.handlers for s in h.body]
            yield from _module_level(node.body + handlers + node.orelse + node.finalbody, path)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _class(node, path, "")
        elif (
            isinstance(node, Function)
            and not node.name.startswith("_")
            and "overload" not in _decorator_names(node)
        ):
            documented = ast.get_docstring(node) is not None
            yield Definition(path, node.lineno, node.name, documented)


def public_definitions(folder: Path) -> list[Definition]:
    """Every definition the rule checks in ``folder``'s modules, in file and line order."""
    found: list[Definition] = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found.append(Definition(path, 1, "(module)", ast.get_docstring(tree) is not None))
        found.extend(_module_level(tree.body, path))
    return found


def missing_docstrings(folder: Path, root: Path = ROOT) -> list[str]:
    """``file:line name`` for each checked definition in ``folder`` that has no docstring."""
    return [d.describe(root) for d in public_definitions(folder) if not d.documented]


class TestPackageDocstrings:
    @pytest.mark.parametrize("folder", FOLDERS)
    def test_every_public_definition_has_a_docstring(self, folder: str) -> None:
        """Every module and public definition under the folder has a docstring."""
        missing = missing_docstrings(ROOT / folder)
        assert [] == missing, "missing docstrings:\n" + "\n".join(missing)

    @pytest.mark.parametrize("folder", FOLDERS)
    def test_the_walker_finds_the_public_api(self, folder: str) -> None:
        """The walker finds the package's definitions, so an empty missing list means something."""
        found = public_definitions(ROOT / folder)
        assert len(found) >= FOLDERS[folder]


class TestWalker:
    def write(self, tmp_path: Path, source: str) -> Path:
        """A one-module package in ``tmp_path`` holding ``source``."""
        (tmp_path / "mod.py").write_text(source, encoding="utf-8")
        return tmp_path

    def test_lists_undocumented_modules_functions_classes_and_methods(self, tmp_path: Path) -> None:
        """A module, function, class, method and property without docstrings are each listed."""
        source = (
            "def f(): pass\n"
            "class C:\n"
            "    def m(self): pass\n"
            "    @property\n"
            "    def p(self): return 1\n"
        )
        folder = self.write(tmp_path, source)
        expected = ["mod.py:1 (module)", "mod.py:1 f", "mod.py:2 C", "mod.py:3 C.m", "mod.py:5 C.p"]
        assert expected == missing_docstrings(folder, root=tmp_path)

    def test_private_names_overloads_setters_and_dunders_are_skipped(self, tmp_path: Path) -> None:
        """Private names and classes, overload stubs, setters and dunders are not checked."""
        source = (
            '"""Doc."""\n'
            "from typing import overload\n"
            "def _f(): pass\n"
            "class _C:\n"
            "    def m(self): pass\n"
            "@overload\n"
            "def g(x: int) -> int: ...\n"
            "def g(x):\n"
            '    """Doc."""\n'
            "class D:\n"
            '    """Doc."""\n'
            "    def _m(self): pass\n"
            "    def __repr__(self): pass\n"
            "    def __init__(self): pass\n"
            "    @property\n"
            "    def p(self):\n"
            '        """Doc."""\n'
            "    @p.setter\n"
            "    def p(self, v): pass\n"
        )
        folder = self.write(tmp_path, source)
        assert [] == missing_docstrings(folder, root=tmp_path)

    def test_init_needs_a_docstring_unless_the_class_names_its_parameters(
        self, tmp_path: Path
    ) -> None:
        """``__init__`` with parameters is listed unless the class docstring names each one."""
        source = (
            '"""Doc."""\n'
            "class A:\n"
            '    """Takes ``size`` and ``name``."""\n'
            "    def __init__(self, size, *, name): pass\n"
            "class B:\n"
            '    """Takes ``size``."""\n'
            "    def __init__(self, size, *, name): pass\n"
        )
        folder = self.write(tmp_path, source)
        assert ["mod.py:7 B.__init__"] == missing_docstrings(folder, root=tmp_path)

    def test_protocol_members_named_by_the_class_docstring_are_exempt(self, tmp_path: Path) -> None:
        """A Protocol member the class docstring names in backticks needs no docstring itself."""
        source = (
            '"""Doc."""\n'
            "from typing import Protocol\n"
            "class P(Protocol):\n"
            '    """Has ``recall(query)``."""\n'
            "    def recall(self, query): ...\n"
            "    def store(self): ...\n"
            "class NotAProtocol:\n"
            '    """Has ``recall``."""\n'
            "    def recall(self): pass\n"
        )
        folder = self.write(tmp_path, source)
        expected = ["mod.py:6 P.store", "mod.py:9 NotAProtocol.recall"]
        assert expected == missing_docstrings(folder, root=tmp_path)

    def test_definitions_under_module_level_if_and_try_are_checked(self, tmp_path: Path) -> None:
        """Functions defined under a module-level ``if`` or ``try`` are checked like any other."""
        source = (
            '"""Doc."""\n'
            "if True:\n"
            "    def f(): pass\n"
            "try:\n"
            "    pass\n"
            "except ImportError:\n"
            "    def g(): pass\n"
        )
        folder = self.write(tmp_path, source)
        assert ["mod.py:3 f", "mod.py:7 g"] == missing_docstrings(folder, root=tmp_path)

    def test_nested_public_classes_are_walked(self, tmp_path: Path) -> None:
        """A public class inside a public class is checked with its methods."""
        source = '"""Doc."""\nclass A:\n    """Doc."""\n    class B:\n        def m(self): pass\n'
        folder = self.write(tmp_path, source)
        assert ["mod.py:4 A.B", "mod.py:5 A.B.m"] == missing_docstrings(folder, root=tmp_path)
