"""Profile and project identity for a working directory (PI's ``src/profile.ts``, spec 1.4).

:func:`resolve_profile` takes the first hit, in PI's order:

1. ``explicit_config``: the ``explicit`` argument, slugged.
2. ``git_remote``: the nearest ``.git`` directory's ``[remote "origin"] url``:
   ``git-`` + the first 16 hex digits of its SHA-256. The config is parsed
   section by section (PI's lazy regex can take a ``url`` from the next
   section); ``include`` files are not followed. A ``.git`` *file* is
   followed to its ``gitdir``: a worktree reads its main repository's config
   (through ``commondir``), a submodule its own, so a worktree gets the same
   id as its main checkout.
3. ``git_root``: ``gitroot-`` + SHA-256 of the repository root's absolute path
   (for a worktree, the main checkout's root: the id does not change with
   the worktree's directory).
4. ``package_name``: the nearest ``pyproject.toml`` with ``[project].name``
   (or ``[tool.poetry].name``), else the nearest ``package.json`` (its
   ``name``, or its directory's name when that is empty), slugged.
5. ``cwd_fallback``: the slug of the directory's name.

Steps 4 and 5 are names, not identities: ``clientA/api`` and ``clientB/API``
both resolve to ``project:api`` and share their project memories. Set
``governance.profile_id`` (or give the project a git remote) where that matters.

``profile_id`` is ``"project:" + project_id``. Paths are made absolute without
resolving symlinks, as Node's ``path.resolve`` does. Only files are read: no
``git`` subprocess.

Unlike PI, ``git_root`` and ``package_name`` are filled whenever they are found
(the manifest search stops at the repository root), whatever step chose the
id. PI sets ``package_name`` only on step 4, so in a git repository whose
package name differs from its directory, project-scoped records written
under the package name never matched (spec 1.17.3).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
from attrs import field, frozen

from memory_inject._phrases import normalize, slug

__all__ = [
    "ProfileIdentity",
    "ProfileSource",
    "TurnProfile",
    "project_keys_for",
    "resolve_profile",
    "stamp_profile",
    "turn_profile",
]

ProfileSource = Literal["explicit_config", "git_remote", "git_root", "package_name", "cwd_fallback"]


@frozen
class ProfileIdentity:
    """Who the memory belongs to in this directory, and how that was decided."""

    profile_id: str
    project_id: str
    source: ProfileSource
    git_root: Path | None = None
    package_name: str | None = None
    #: Normalised names a project-scoped record may use for this project.
    project_keys: frozenset[str] = field(factory=frozenset)


def resolve_profile(cwd: str | os.PathLike[str], *, explicit: str | None = None) -> ProfileIdentity:
    """The identity of ``cwd``: explicit setting, git remote, git root, manifest name, dir name."""
    start = Path(os.path.abspath(cwd))
    git_dir = _find_git(start)
    git_root = git_dir.parent if git_dir is not None else None
    manifest = _find_manifest(start, stop=git_root)
    package_name = manifest[0] if manifest is not None else None

    source: ProfileSource
    config_dir, main_root = _git_config_dir(git_dir) if git_dir is not None else (None, None)
    url = (_origin_url(config_dir) or None) if config_dir is not None else None
    if explicit is not None and explicit.strip():
        source, project_id = "explicit_config", slug(explicit)
    elif url is not None:
        source, project_id = "git_remote", "git-" + _digest(url)
    elif git_root is not None:
        source, project_id = "git_root", "gitroot-" + _digest(str(main_root or git_root))
    elif manifest is not None:
        source, project_id = "package_name", slug(manifest[0] or manifest[1].name)
    else:
        source, project_id = "cwd_fallback", slug(start.name)

    identity = ProfileIdentity(
        profile_id="project:" + project_id,
        project_id=project_id,
        source=source,
        git_root=git_root,
        package_name=package_name,
    )
    return attrs.evolve(identity, project_keys=project_keys_for(identity, start))


@frozen
class TurnProfile:
    """The profile a turn renders and autosaves for, and the project keys of its directory."""

    profile_id: str
    project_keys: frozenset[str]


@functools.lru_cache(maxsize=256)
def _identity_at(where: str) -> ProfileIdentity:
    return resolve_profile(where)


def turn_profile(
    configured: str | None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> TurnProfile:
    """The one profile resolution of a turn, shared by the render and the autosave.

    The id is, first found: ``profile`` given as a string, the config's
    ``governance.profile_id`` (``configured``), ``profile`` given as an
    identity, the identity of ``cwd`` (default: the working directory; read
    once per directory and cached). Project keys come from the identity, and from the id
    itself when it is ``project:<id>``.
    """
    if isinstance(profile, ProfileIdentity):
        identity = profile
    else:
        identity = _identity_at(os.fspath(cwd) if cwd is not None else os.getcwd())
    chosen = profile if isinstance(profile, str) else configured or identity.profile_id
    keys = identity.project_keys
    if chosen.startswith(_PROJECT_PREFIX) and (named := normalize(chosen[len(_PROJECT_PREFIX) :])):
        # A profile given as "project:<id>" (what import_pi says to set) names the project
        # its records are scoped to, whatever the checkout's directory is called.
        keys = keys | {named}
    return TurnProfile(chosen, keys)


_PROJECT_PREFIX = "project:"


def project_keys_for(identity: ProfileIdentity, cwd: str | os.PathLike[str]) -> frozenset[str]:
    """Normalised package name, project id, repository (or cwd) name and cwd name.

    These are the names :class:`~memory_inject.stages.governance.ProjectScope`
    accepts for a record's ``scope.project``. PI uses the package name *or*
    the project id; both are kept here, so an explicit project id still
    matches when a manifest names the package differently.
    """
    here = Path(os.path.abspath(cwd))
    root = identity.git_root if identity.git_root is not None else here
    names = (identity.package_name, identity.project_id, root.name, here.name)
    return frozenset(k for k in (normalize(n) for n in names if n) if k)


def stamp_profile(fields: Mapping[str, Any], identity: ProfileIdentity) -> dict[str, Any]:
    """A copy of a record's fields with ``profile_id`` set when it has none.

    Every record written through this library carries its profile; PI's
    curator forgets to, which makes its records pass every profile (spec 1.17.4).
    """
    out = dict(fields)
    if not out.get("profile_id"):
        out["profile_id"] = identity.profile_id
    return out


# -- file readers ------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _find_git(start: Path) -> Path | None:
    """The first ``.git`` (directory or file) from ``start`` upwards."""
    for directory in (start, *start.parents):
        candidate = directory / ".git"
        if candidate.is_dir() or candidate.is_file():
            return candidate
    return None


_GITDIR = re.compile(r"gitdir:\s*(.+?)\s*$")


def _git_config_dir(dot_git: Path) -> tuple[Path | None, Path | None]:
    """The directory holding ``dot_git``'s config, and the main checkout's root for a worktree.

    A ``.git`` directory holds its own config. A ``.git`` file (``gitdir:
    <path>``) points to the worktree's or submodule's git directory; a
    worktree's ``commondir`` file points to the main repository's, whose
    parent is the main checkout. Unreadable or malformed files give ``None``.
    """
    if dot_git.is_dir():
        return dot_git, None
    try:
        with dot_git.open(encoding="utf-8", errors="replace") as fh:
            first = fh.readline(4096)
    except OSError:
        return None, None
    m = _GITDIR.match(first)
    if m is None:
        return None, None
    gitdir = Path(os.path.abspath(dot_git.parent / m.group(1)))
    try:
        common_ref = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return (gitdir if gitdir.is_dir() else None), None  # a submodule: its own config
    common = Path(os.path.abspath(gitdir / common_ref.strip()))
    if not common.is_dir():
        return None, None
    return common, (common.parent if common.name == ".git" else None)


def _find_manifest(start: Path, *, stop: Path | None) -> tuple[str | None, Path] | None:
    """``(name, directory)`` of the nearest project manifest, up to ``stop`` inclusive."""
    for directory in (start, *start.parents):
        name = _pyproject_name(directory / "pyproject.toml")
        if name:
            return name, directory
        package = directory / "package.json"
        if package.is_file():
            data = _read_json(package)
            if data is not None:
                value = data.get("name")
                text = value.strip() if isinstance(value, str) else ""
                return (text or None), directory
        if directory == stop:
            break
    return None


def _pyproject_name(path: Path) -> str | None:
    """``[project].name`` or ``[tool.poetry].name``; a tool-config-only file has none."""
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    tool = data.get("tool")
    for table in (data.get("project"), tool.get("poetry") if isinstance(tool, dict) else None):
        if isinstance(table, dict):
            name = table.get("name")
            if isinstance(name, str) and name.strip():
                return name.strip()
    return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- git config: just enough of git's format to find remote.origin.url --------------

_SECTION = re.compile(r'\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\\n]|\\.)*)")?\s*\]')
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9-]*)\s*(?:=(.*))?$")


def _origin_url(git_dir: Path) -> str | None:
    try:
        text = (git_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return _git_config_value(text, "remote", "origin", "url")


def _git_config_value(text: str, section: str, subsection: str | None, key: str) -> str | None:
    """The first value of ``section.subsection.key`` in a git config text.

    Section and key names are case-insensitive, a quoted subsection is
    case-sensitive (the legacy ``[section.sub]`` form is not), values may be
    quoted, escaped, commented (``#``/``;``) and continued with ``\\``.
    """
    want_section, want_key = section.lower(), key.lower()
    current: tuple[str, str | None] | None = None
    for line in _logical_lines(text):
        rest = line.strip()
        if rest.startswith("["):
            m = _SECTION.match(rest)
            if m is None:
                current = None
                continue
            name, sub = m.group(1), m.group(2)
            if sub is not None:
                current = (name.lower(), re.sub(r"\\(.)", r"\1", sub))
            elif "." in name:
                head, _, tail = name.partition(".")
                current = (head.lower(), tail.lower())
            else:
                current = (name.lower(), None)
            rest = rest[m.end() :].strip()
        if not rest or rest[0] in "#;" or current != (want_section, subsection):
            continue
        m = _KEY.match(rest)
        if m is not None and m.group(1).lower() == want_key:
            return _config_value(m.group(2)) if m.group(2) is not None else "true"
    return None


def _logical_lines(text: str) -> list[str]:
    """Physical lines joined where a line ends with an unescaped backslash."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        trailing = len(raw) - len(raw.rstrip("\\"))
        if trailing % 2 == 1:
            pending += raw[:-1]
            continue
        out.append(pending + raw)
        pending = ""
    if pending:
        out.append(pending)
    return out


def _config_value(raw: str) -> str:
    chars: list[str] = []
    quoted = False
    i = 0
    escapes = {"n": "\n", "t": "\t", "b": "\b"}
    while i < len(raw):
        c = raw[i]
        if c == '"':
            quoted = not quoted
        elif c == "\\" and i + 1 < len(raw):
            i += 1
            chars.append(escapes.get(raw[i], raw[i]))
        elif c in "#;" and not quoted:
            break
        else:
            chars.append(c)
        i += 1
    return "".join(chars).strip()
