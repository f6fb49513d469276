"""Issue 36: a PI root imported again converges on what PI's files say (``import_pi``).

A record PI privacy-purged after the first import is erased and kept only as its
``[deleted]`` marker (before: soft-forgotten with its text, tags and evidence); lines are
PI's lines (``"\\n"`` only, not ``str.splitlines``); a bad date is named by its PI field;
the same scratchpad item open in two roots is two rows; a record id twice is warned about.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.pi_import import SCRATCHPAD_PREFIX, import_pi
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore

PURGED_TEXT = "PRIVATE-diagnosis-XYZZY"


def _record(id_: str, statement: str, **extra: Any) -> dict[str, Any]:
    rec = {
        "id": id_,
        "layer": "L2",
        "scope": {"type": "global"},
        "tags": ["health"],
        "statement": statement,
        "evidence": [{"type": "u", "ref": "r", "note": "n"}],
        "confidence": 0.9,
        "stability": "stable",
        "created_at": "2026-05-01",
        "updated_at": "2026-05-01",
        "status": "active",
    }
    rec.update(extra)
    return rec


def _root(base: Path, *records: dict[str, Any]) -> Path:
    root = base / "pi-memory"
    (root / "memory").mkdir(parents=True)
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    (root / "memory" / "L2.playbooks.jsonl").write_text(lines, encoding="utf-8")
    return root


def _purge(root: Path, key: str, mode: str = "privacy_purge") -> None:
    (root / "memory" / "L2.playbooks.jsonl").write_text("")
    stone = {
        "deleted_record_id": key,
        "deletion_mode": mode,
        "deletion_reason": "privacy_sensitive",
        "deleted_at": "2026-05-19T12:00:00Z",
        "content_removed": True,
    }
    (root / "memory" / "tombstones.jsonl").write_text(json.dumps(stone) + "\n")


def _export(store: Any) -> list[dict[str, Any]]:
    buf = io.StringIO()
    store.export_jsonl(buf)
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def _row(store: Any, key: str) -> dict[str, Any]:
    return next(r for r in _export(store) if r["key"] == key)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(str(tmp_path / "s.db"))
    yield opened
    opened.close()


def _db_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))


# -- 1. a record privacy-purged after it was imported ----------------------------------


def test_a_purge_after_the_import_erases_the_stored_text(store: Any, tmp_path: Path) -> None:
    """The re-import leaves the marker the first import would write, and none of the text."""
    root = _root(tmp_path, _record("mem_priv", PURGED_TEXT, evidence_records=[{"x": PURGED_TEXT}]))
    import_pi(store, root)
    _purge(root, "mem_priv")
    result = import_pi(store, root)
    assert result.forgotten == 1
    assert store.get("mem_priv") is None or store.get("mem_priv").deleted_at is not None
    row = _row(store, "mem_priv")
    assert row["content"] == "[deleted]"
    assert not row.get("tags")
    assert row["status"] == "deleted"
    assert row["deleted_at"].startswith("2026-05-19T12:00:00")
    assert PURGED_TEXT not in json.dumps(_export(store))
    store.close()
    assert PURGED_TEXT.encode() not in _db_bytes(tmp_path)


def test_importing_the_purged_root_again_changes_nothing(store: Any, tmp_path: Path) -> None:
    root = _root(tmp_path, _record("mem_priv", PURGED_TEXT))
    import_pi(store, root)
    _purge(root, "mem_priv")
    import_pi(store, root)
    first = _row(store, "mem_priv")
    again = import_pi(store, root)
    assert again.forgotten == 0
    row = _row(store, "mem_priv")
    assert {k: row[k] for k in ("content", "status", "deleted_at", "timestamp")} == {
        k: first[k] for k in ("content", "status", "deleted_at", "timestamp")
    }
    assert sum(1 for r in _export(store) if r["key"] == "mem_priv") <= 1


def test_a_row_soft_forgotten_by_an_older_import_is_erased_too(tmp_path: Path) -> None:
    """A store where an import before this fix only forgot the purged row converges."""
    store = SQLiteStore(str(tmp_path / "s.db"))
    root = _root(tmp_path, _record("mem_priv", PURGED_TEXT))
    import_pi(store, root)
    store.forget("mem_priv")  # what the import used to do
    _purge(root, "mem_priv")
    import_pi(store, root)
    row = _row(store, "mem_priv")
    assert (row["content"], row["status"]) == ("[deleted]", "deleted")
    assert row["deleted_at"].startswith("2026-05-19T12:00:00")
    store.close()
    assert PURGED_TEXT.encode() not in _db_bytes(tmp_path)


def test_an_audit_preserving_tombstone_keeps_the_text(store: Any, tmp_path: Path) -> None:
    root = _root(tmp_path, _record("mem_audit", "deploy from laptop"))
    import_pi(store, root)
    _purge(root, "mem_audit", mode="audit_preserving")
    assert import_pi(store, root).forgotten == 1
    row = _row(store, "mem_audit")
    assert row["content"] == "deploy from laptop"
    assert row["status"] == "deleted"
    assert row["deleted_at"].startswith("2026-05-19T12:00:00")
    assert row["metadata"]["pi_tombstone"]["deletion_mode"] == "audit_preserving"
    assert import_pi(store, root).forgotten == 0


# -- 2. PI's lines -----------------------------------------------------------------------


@pytest.mark.parametrize("odd", ["\u2028", "\u2029", "\x85"])
def test_a_statement_holding_a_line_separator_is_one_line(odd: str, tmp_path: Path) -> None:
    text = f"Use bun test{odd}then typecheck"
    root = _root(tmp_path, _record("mem_ls", text), _record("mem_two", "second"))
    with (root / "memory" / "L2.playbooks.jsonl").open("a", encoding="utf-8") as f:
        f.write("[1]\n")
    store = SQLiteStore(str(tmp_path / "s.db"))
    with pytest.raises(ValueError, match=r"L2\.playbooks\.jsonl: line 3: each line must be"):
        import_pi(store, root)  # the line numbers are the file's
    (root / "memory" / "L2.playbooks.jsonl").write_text(
        json.dumps(_record("mem_ls", text), ensure_ascii=False) + "\r\n", encoding="utf-8"
    )
    import_pi(store, root)
    got = store.get("mem_ls")
    assert got is not None and got.content == text


@pytest.mark.parametrize("odd", ["\u2028", "\x85", "\x0b", "\x0c", "\x1c", "\x1e"])
def test_a_scratchpad_item_holding_a_line_separator_is_one_item(odd: str, tmp_path: Path) -> None:
    root = tmp_path / "pi-memory"
    root.mkdir()
    (root / "scratchpad.md").write_text(f"- [ ] one{odd}still one\n- [x] two\r\n", "utf-8")
    store = SQLiteStore(str(tmp_path / "s.db"))
    result = import_pi(store, root)
    assert (result.scratchpad, result.scratchpad_open) == (2, 1)
    assert sorted(r.content for r in store.list(category="scratchpad")) == [
        f"one{odd}still one",
        "two",
    ]


# -- 3. the PI field is named ------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "extra"),
    [("created_at", {}), ("valid_to", {}), ("updated_at", {"created_at": None})],
)
def test_a_bad_date_is_named_by_its_pi_field(
    field: str, extra: dict[str, Any], tmp_path: Path
) -> None:
    root = _root(tmp_path, _record("mem_x", "s", **{**extra, field: "not-a-date"}))
    with pytest.raises(ValueError, match=f"{field}|timestamp|expires_at") as caught:
        import_pi(SQLiteStore(str(tmp_path / "s.db")), root)
    message = str(caught.value)
    assert f"'{field}' must be" in message
    assert "'timestamp'" not in message and "'expires_at'" not in message
    assert "L2.playbooks.jsonl: line 1" in message


# -- 4. one scratchpad item open in two roots --------------------------------------------


def _pad(base: Path, name: str, text: str) -> Path:
    root = base / name / "pi-memory"
    root.mkdir(parents=True, exist_ok=True)
    (root / "scratchpad.md").write_text(text)
    return root


def _open_items(store: Any) -> list[tuple[str, str]]:
    return sorted(
        (r.content, r.metadata["pi_root"])
        for r in store.list(category="scratchpad")
        if r.status == "active"
    )


def test_a_root_clearing_an_item_leaves_another_roots_open_one(store: Any, tmp_path: Path) -> None:
    alpha = _pad(tmp_path, "alpha", "- [ ] Write the release notes\n- [ ] alpha only\n")
    beta = _pad(tmp_path, "beta", "- [ ] Write the release notes\n")
    import_pi(store, beta)
    import_pi(store, alpha)
    assert len(_open_items(store)) == 3
    _pad(tmp_path, "alpha", "- [ ] alpha only\n")
    assert import_pi(store, alpha).scratchpad_removed == 1
    assert _open_items(store) == [
        ("Write the release notes", str(beta.resolve())),
        ("alpha only", str(alpha.resolve())),
    ]
    assert import_pi(store, beta).scratchpad_removed == 0


@pytest.mark.parametrize("old_root", ["alpha", "beta", None])
def test_a_store_of_the_old_key_scheme_converges(
    old_root: str | None, store: Any, tmp_path: Path
) -> None:
    """A row written when the item's key had no root (taken over by one root, or from before
    rows said their root) is kept by one root; the other root gets its own row, and imports
    after that change nothing."""
    alpha = _pad(tmp_path, "alpha", "- [ ] Write the release notes\n")
    beta = _pad(tmp_path, "beta", "- [ ] Write the release notes\n")
    roots = {"alpha": str(alpha.resolve()), "beta": str(beta.resolve())}
    import_pi(store, alpha)  # the key the item had before (no root in it)
    (key,) = [r.key for r in store.list(category="scratchpad")]
    assert key.startswith(SCRATCHPAD_PREFIX)
    meta = {"pi_file": "scratchpad.md"}
    if old_root is not None:
        meta["pi_root"] = roots[old_root]
    old = store.get(key)
    store.forget(key)
    store.upsert(
        MemoryRecord(
            key=key,
            content=old.content,
            category="scratchpad",
            timestamp=old.timestamp,
            status="active",
            memory_kind="task",
            layer="L3",
            metadata=meta,
        )
    )
    for _ in range(2):
        for root in (alpha, beta):
            assert import_pi(store, root).scratchpad_removed == 0
    rows = _export(store)
    assert _open_items(store) == sorted(("Write the release notes", r) for r in roots.values())
    again = [import_pi(store, root).scratchpad_removed for root in (alpha, beta)]
    assert again == [0, 0]

    def state(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((r["key"], r["content"], r["status"], r.get("deleted_at")) for r in rows)

    assert state(_export(store)) == state(rows)
    live = [r for r in _export(store) if r["key"].startswith(SCRATCHPAD_PREFIX)]
    assert len([r for r in live if r.get("deleted_at") is None]) == 2


# -- 5. the same record id twice ---------------------------------------------------------


def test_the_same_record_id_in_two_files_is_warned_about(tmp_path: Path) -> None:
    root = _root(tmp_path, _record("mem_dup", "from L2"))
    (root / "memory" / "projects").mkdir()
    (root / "memory" / "projects" / "p.jsonl").write_text(
        json.dumps(_record("mem_dup", "from the project")) + "\n"
    )
    store = SQLiteStore(str(tmp_path / "s.db"))
    result = import_pi(store, root)
    (warning,) = [w for w in result.warnings if "mem_dup" in w]
    assert "L2.playbooks.jsonl: line 1" in warning
    assert "p.jsonl: line 1" in warning
    got = store.get("mem_dup")
    assert got is not None and got.content == "from the project"


class _Erasing(SQLiteStore):
    """A SQLite store that notes the keys it is asked to erase."""

    erased: list[str]

    def erase(self, key: str, **scope: Any) -> bool:
        self.erased = [*getattr(self, "erased", []), key]
        return super().erase(key, **scope)


def test_a_purge_erases_the_row_on_a_store_that_can(tmp_path: Path) -> None:
    """The row is erased (not written over) before its marker is written: a store keeping
    history or an index of a row's text keeps none of it."""
    store = _Erasing(str(tmp_path / "s.db"))
    root = _root(tmp_path, _record("mem_priv", PURGED_TEXT), _record("mem_kept", "kept"))
    import_pi(store, root)
    _purge(root, "mem_priv")
    import_pi(store, root)
    assert store.erased == ["mem_priv"]
    assert _row(store, "mem_priv")["content"] == "[deleted]"
    import_pi(store, root)  # done already: nothing erased again
    assert store.erased == ["mem_priv"]
    store.close()


def _project(base: Path, name: str, *records: dict[str, Any]) -> Path:
    """A project whose ``.pi/settings.json`` names its memory root and its identity."""
    project = base / name
    _root(project / ".pi", *records)
    settings = {"localPath": ".pi/pi-memory", "projectIdentity": {"project_id": name}}
    (project / ".pi" / "settings.json").write_text(
        json.dumps({"pi-persistent-intelligence": settings})
    )
    return project


def test_a_projects_records_are_its_profiles_in_a_shared_store(store: Any, tmp_path: Path) -> None:
    """Two projects in one store: PI kept them apart by their roots; the import stamps the
    root's declared profile on the records that name none (governance.md's row 23)."""
    from memory_inject import render_memory_context
    from memory_inject.config import parse_agent_config

    alpha = _project(tmp_path, "alpha", _record("mem_a", "ALPHA-ONLY: deploy alpha with kv."))
    beta = _project(tmp_path, "beta", _record("mem_b", "BETA-ONLY: deploy beta with make."))
    own = _project(tmp_path, "gamma", _record("mem_g", "GAMMA: deploy", profile_id="project:x"))
    assert import_pi(store, alpha).profile_id == "project:alpha"
    import_pi(store, beta)
    import_pi(store, own)
    assert [store.get(k).profile_id for k in ("mem_a", "mem_b", "mem_g")] == [
        "project:alpha",
        "project:beta",
        "project:x",  # a record's own profile is kept
    ]
    memory = {"preset": "pi", "governance": {"profile_id": "project:beta"}}
    cfg = parse_agent_config({"agent": "pi", "memory": memory}).memory
    text = render_memory_context(
        store, "how do we deploy?", config=cfg, origin="interactive", profile="project:beta"
    ).text
    assert "BETA-ONLY" in text and "ALPHA-ONLY" not in text


def test_the_global_roots_records_stay_unbound(store: Any, tmp_path: Path) -> None:
    """PI's global root is every project's: no identity, nothing stamped."""
    root = _root(tmp_path / "home" / ".pi" / "agent", _record("mem_all", "shared playbook"))
    assert import_pi(store, root).profile_id is None
    assert store.get("mem_all").profile_id is None
