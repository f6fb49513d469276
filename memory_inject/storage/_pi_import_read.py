"""Reading a PI memory root, project, ``.pi`` folder or one of its files (before any write).

This module owns what :func:`~memory_inject.storage.pi_import.import_pi`
reads (the table in :mod:`.pi_import`): where ``PATH`` points (a settings
file's ``localPath``, a root, ``~/.pi``), each kind of file turned into
records, tombstones, evidence and profiles, every problem a ``ValueError``
naming the file and line, and what has no home here as warnings. Nothing is
written until everything is read; :mod:`.pi_import` writes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_inject.storage._jsonl import record_from_json
from memory_inject.storage._pi_import_text import file_text as _text
from memory_inject.storage._pi_import_text import json_lines as _json_lines
from memory_inject.storage._pi_import_text import pi_lines
from memory_inject.storage._pi_import_text import string_field as _string
from memory_inject.storage._pi_import_text import when_field as _when
from memory_inject.storage._pi_records import is_pi_record
from memory_inject.storage.records import MemoryRecord

__all__ = ["DAILY_PREFIX", "SCRATCHPAD_PREFIX", "SPECIAL_JSONL", "PiReader"]

SCRATCHPAD_PREFIX = "pi-scratchpad:"
DAILY_PREFIX = "pi-daily:"
_SETTINGS_KEY = "pi-persistent-intelligence"
_ALIAS_KEY = "pi-pi"
#: The single files :func:`import_pi` reads by name (the CLI routes them here).
SPECIAL_JSONL = ("tombstones.jsonl", "evidence.jsonl", "profiles.jsonl")
_RECORD_FILES = ("L1.identity.jsonl", "L2.playbooks.jsonl")
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")
_ITEM = re.compile(r"^- \[([ xX])\] (.+)$")  # PI's scratchpad line
_ITEM_LIKE = re.compile(r"^\s*[-*]\s*\[")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
#: Files and folders of a PI root that hold nothing to import here, and why (warned about
#: when present and not empty). Derived ones (rendered/, runtime/, search/, reports/,
#: schemas/) are skipped silently.
_NO_HOME: Mapping[str, str] = {
    "memory/reinforcement.jsonl": "PI's reinforcement events have no counterpart "
    "(uses are counted per record here: times_used)",
    "inbox": "PI's curation candidates are not memories",
    "patches": "PI's patch history is not memories",
    "sessions": "PI's session store is not imported (Today's Sessions reads "
    "'category: session' records)",
    "config.json": "PI's settings have counterparts in the agent's YAML, not in the store",
}


def _normalize(text: str) -> str:
    """PI's normaliser: lower case, runs of non-``[a-z0-9]`` become ``-``, no edge dashes."""
    return _NOT_ALNUM.sub("-", text.strip().lower()).strip("-")


def _pi_names(obj: Mapping[str, Any], message: str) -> str:
    """``message`` about a PI line with the fields named as the line names them (a record's
    ``timestamp`` is PI's ``created_at``, or ``updated_at`` without one, ...)."""
    if not is_pi_record(obj):
        return message
    ours = {
        "timestamp": "created_at" if obj.get("created_at") is not None else "updated_at",
        "expires_at": "valid_to",
        "rule_type": "ruleType",
    }
    return re.sub(
        r"'(timestamp|expires_at|rule_type)' must",
        lambda m: f"'{ours[m.group(1)]}' must",
        message,
    )


def _root_of(path: Path) -> str:
    """The PI memory root a scratchpad (or a ``daily/`` folder) is in, as written in its
    rows (``pi_root``): two roots imported into one store keep their own items."""
    return str(path.parent.resolve())


def _scratch_key(text: str) -> str:
    """A scratchpad item's key: its words and a hash of its text (done or not, the same)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    words = _normalize(text)[:40].strip("-")
    return f"{SCRATCHPAD_PREFIX}{words}:{digest}" if words else f"{SCRATCHPAD_PREFIX}{digest}"


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(microsecond=0)


def _is_root(path: Path) -> bool:
    return (
        (path / "memory").is_dir()
        or (path / "scratchpad.md").is_file()
        or (path / "daily").is_dir()
    )


class PiReader:
    """Collects what a PI root or file holds (``read``); :mod:`.pi_import` writes it."""

    def __init__(self) -> None:
        self.root: Path | None = None
        # key -> (where it was read, the record); the import names "where" in its errors
        self.records: dict[str, tuple[str, MemoryRecord]] = {}
        self.scratch: dict[str, tuple[str, MemoryRecord]] | None = None  # None: none read
        self.scratch_roots: set[str] = set()  # the roots whose scratchpad.md was read
        self.daily: dict[str, tuple[str, MemoryRecord]] = {}
        self.tombstones: dict[str, dict[str, Any]] = {}
        self.n_tombstones = 0
        self.evidence: list[tuple[dict[str, Any], tuple[str, ...]]] = []
        self.profiles: list[str] = []
        self.profile_id: str | None = None
        self.warnings: list[str] = []

    # -- what PATH is ----------------------------------------------------------------

    def read(self, path: Path) -> None:
        """Read ``path`` (a root, project, ``.pi`` dir, settings file or one PI file)."""
        if not path.exists():
            raise ValueError(f"{path}: no such file or directory")
        if path.is_dir():
            self._read_dir(path)
            return
        name = path.name
        if name == "settings.json":
            project = path.parent.parent if path.parent.name == ".pi" else path.parent
            root = self._settings(path, project)
            if root is not None:
                self._read_root(root)
            else:
                self._no_root(path)
        elif _DAY.match(name):
            self._read_daily(path)
        elif name == "scratchpad.md":
            self._read_scratchpad(path)
        elif path.suffix.lower() == ".md":
            raise ValueError(
                f"{path}: a markdown file imports as PI's scratchpad.md or a daily log "
                "named YYYY-MM-DD.md"
            )
        elif name == "tombstones.jsonl":
            self._read_tombstones(path)
        elif name == "evidence.jsonl":
            self._read_evidence(path)
        elif name == "profiles.jsonl":
            self._read_profiles(path)
        else:
            self._read_records(path)

    def _read_dir(self, path: Path) -> None:
        """A project or ``.pi`` dir through its settings; a root as is; ``~/.pi`` or ``~``."""
        settings = path / ".pi" / "settings.json"
        project = path
        if not settings.is_file() and path.name == ".pi":
            settings, project = path / "settings.json", path.parent
        if settings.is_file():  # a project's own folders (a memory/ of its code) are not PI's
            root = self._settings(settings, project)
            if root is None:
                self._no_root(settings)
            else:
                self._read_root(root)
            return
        for candidate in (path, path / "agent" / "pi-memory", path / ".pi" / "agent" / "pi-memory"):
            if _is_root(candidate):
                self._read_root(candidate)
                return
        raise ValueError(
            f"{path}: no PI memory here (a memory root holds memory/, scratchpad.md or "
            "daily/; a project holds .pi/settings.json with a localPath)"
        )

    def _no_root(self, settings: Path) -> None:
        self.warnings.append(
            f"{settings}: no localPath, so this project's PI memory is PI's global root "
            "(~/.pi/agent/pi-memory, or $PI_MEMORY_ROOT): import that directory too"
        )

    def _settings(self, path: Path, project: Path) -> Path | None:
        """Read ``.pi/settings.json``: the profile it names and the root it points to (if any)."""
        text = _text(path)
        try:
            settings = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: must hold a JSON object (got {type(settings).__name__})")
        sections = []
        for key in (_SETTINGS_KEY, _ALIAS_KEY):
            value = settings.get(key)
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{path}: {key!r} must be an object (got {value!r:.80})")
            sections.append(value or {})
        ours, alias = sections
        where = f"{path}: {_SETTINGS_KEY!r}"
        identity = ours.get("projectIdentity")
        if identity is not None:
            if not isinstance(identity, dict):
                raise ValueError(
                    f"{where}: 'projectIdentity' must be an object (got {identity!r:.80})"
                )
            project_id = _string(identity, "project_id", f"{where}: 'projectIdentity'")
            if project_id is not None and project_id.strip():
                self.profile_id = "project:" + (_normalize(project_id) or "default")
            if identity.get("aliases"):
                self.warnings.append(
                    f"{path}: projectIdentity.aliases not imported (PI never matches on them)"
                )
        local = _string(ours, "localPath", where)
        if not local:
            local = _string(alias, "localPath", f"{path}: {_ALIAS_KEY!r}")
            local = os.path.join(local, "pi-memory") if local else None
        if not local:
            return None
        root = Path(os.path.expanduser(local))
        root = root if root.is_absolute() else project / root
        if not root.is_dir():
            raise ValueError(f"{path}: localPath {local!r} is not a directory ({root})")
        return root

    # -- a root ----------------------------------------------------------------------

    def _read_root(self, root: Path) -> None:
        self.root = root
        memory = root / "memory"
        record_files = [memory / name for name in _RECORD_FILES]
        record_files += sorted((memory / "projects").glob("*.jsonl"))
        record_files.append(memory / "inquiries.jsonl")
        for path in record_files:
            if path.is_file():
                self._read_records(path)
        for name, read in (
            ("evidence.jsonl", self._read_evidence),
            ("tombstones.jsonl", self._read_tombstones),
            ("profiles.jsonl", self._read_profiles),
        ):
            if (memory / name).is_file():
                read(memory / name)
        known = {*_RECORD_FILES, "inquiries.jsonl", *SPECIAL_JSONL, "reinforcement.jsonl"}
        for path in sorted(memory.glob("*.jsonl")) if memory.is_dir() else ():
            if path.name not in known and path.stat().st_size:
                self.warnings.append(f"{path}: not imported (not one of PI's memory files)")
        if (root / "scratchpad.md").is_file():
            self._read_scratchpad(root / "scratchpad.md")
        daily = root / "daily"
        for path in sorted(daily.iterdir()) if daily.is_dir() else ():
            if path.is_file() and _DAY.match(path.name):
                self._read_daily(path)
            else:
                self.warnings.append(f"{path}: not imported (a daily log is YYYY-MM-DD.md)")
        for rel, why in _NO_HOME.items():
            path = root / rel
            if (path.is_file() and path.stat().st_size) or (path.is_dir() and any(path.iterdir())):
                self.warnings.append(f"{path}: not imported: {why}")

    # -- each kind of file -----------------------------------------------------------

    def _read_records(self, path: Path) -> None:
        for where, obj in _json_lines(path):
            try:
                record = record_from_json(obj)
            except ValueError as exc:
                raise ValueError(f"{where}: {_pi_names(obj, str(exc))}") from None
            before = self.records.get(record.key)
            if before is not None:
                self.warnings.append(
                    f"{where}: the record id {record.key!r} again (first at {before[0]}): "
                    "this line is the one imported"
                )
            self.records[record.key] = (where, record)

    def _read_scratchpad(self, path: Path) -> None:
        base = _mtime(path)
        items: dict[str, tuple[str, MemoryRecord]] = {}
        for n, line in enumerate(pi_lines(_text(path)), start=1):
            where = f"{path}: line {n}"
            match = _ITEM.match(line)
            if match is None:
                if _ITEM_LIKE.match(line):
                    self.warnings.append(
                        f"{where}: not a scratchpad item ('- [ ] text' or '- [x] text'), "
                        "skipped as PI skips it"
                    )
                continue
            text = match.group(2).strip()
            key = _scratch_key(text)
            if not text or key in items:
                why = "an empty item" if not text else "the same item again"
                self.warnings.append(f"{where}: {why}, skipped")
                continue
            # The first item is the newest, so a newest-first read keeps the file's order.
            stamp = base - timedelta(milliseconds=len(items))
            record = MemoryRecord(
                key=key,
                content=text,
                category="scratchpad",
                timestamp=stamp,
                status="active" if match.group(1) == " " else "done",
                memory_kind="task",
                layer="L3",
                metadata={"pi_file": "scratchpad.md", "pi_root": _root_of(path)},
            )
            items[key] = (where, record)
        self.scratch = {**(self.scratch or {}), **items}
        self.scratch_roots.add(_root_of(path))

    def _read_daily(self, path: Path) -> None:
        year, month, day_ = (int(g) for g in _DAY.findall(path.name)[0])
        try:
            day = date(year, month, day_)
        except ValueError:
            raise ValueError(f"{path}: {path.stem!r} is not a date") from None
        text = _text(path).strip()
        if not text:
            self.warnings.append(f"{path}: empty, not imported")
            return
        modified = _mtime(path)
        # PI appends to a day's log during that (UTC) day; a copy made later has a later time.
        stamp = modified if modified.date() == day else datetime(year, month, day_, tzinfo=UTC)
        key = f"{DAILY_PREFIX}{day.isoformat()}"
        record = MemoryRecord(
            key=key,
            content=text,
            category="daily",
            timestamp=stamp,
            layer="L3",
            metadata={"pi_file": f"daily/{path.name}", "pi_root": _root_of(path.parent)},
        )
        self.daily[key] = (str(path), record)

    def _read_tombstones(self, path: Path) -> None:
        for where, obj in _json_lines(path):
            key = str(_string(obj, "deleted_record_id", where, required=True))
            _string(obj, "deletion_mode", where)
            self.tombstones[key] = {**obj, "_when": _when(obj, "deleted_at", where)}
            self.n_tombstones += 1

    def _read_evidence(self, path: Path) -> None:
        for where, obj in _json_lines(path):
            ids = obj.get("related_memory_ids") or []
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ValueError(
                    f"{where}: 'related_memory_ids' must be a list of strings (got {ids!r:.80})"
                )
            self.evidence.append((obj, tuple(dict.fromkeys(ids))))

    def _read_profiles(self, path: Path) -> None:
        for where, obj in _json_lines(path):
            profile = str(_string(obj, "profile_id", where, required=True))
            if profile not in self.profiles:
                self.profiles.append(profile)

    def evidence_of(self, key: str) -> list[dict[str, Any]]:
        """The evidence lines that name ``key`` (copies, for a record's metadata)."""
        return [dict(obj) for obj, ids in self.evidence if key in ids]
