"""PI's own JSONL records (seed 002's record schema) as :class:`MemoryRecord` values.

A line of PI's ``L1.identity.jsonl``, ``L2.playbooks.jsonl`` or
``projects/*.jsonl`` has a ``statement`` and no ``content``; a line of its
``inquiries.jsonl`` has a ``question``. Both import through the ordinary
JSONL path (``import_jsonl``, the CLI's ``import``): the fields we have a
column for are mapped, every other field (``evidence``, ``stability``,
``review``, ``normalized_key``, ``valid_from``, ``vault_ref``, an unknown
field of a later PI version...) is kept as is in ``metadata``, so nothing the
user wrote is lost and an export carries it back out.

==========================  ==========================================
PI field                    record field
==========================  ==========================================
``id``                      ``key`` and ``id``
``statement`` / ``question`` ``content``
``created_at``              ``timestamp`` (``updated_at`` when missing)
``updated_at``              ``updated_at``
``ruleType``                ``rule_type``
``valid_to``                ``expires_at`` (the record stops applying)
``superseded_by`` (a list)  ``superseded_by``: its first id (all of
                            them stay in ``metadata`` when there are more)
``layer`` L1 / L2 / L3      ``layer``; category ``core`` (L3: ``daily``)
an inquiry                  category ``inquiry``, ``memory_kind: inquiry``
==========================  ==========================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from memory_inject.records import MemoryRecord

__all__ = ["is_pi_record", "pi_record"]

# PI field -> record field, for the fields that keep their meaning.
_SAME = ("profile_id", "status", "memory_kind", "layer")
_LISTS = ("tags", "applies_when", "does_not_apply_when", "known_exceptions", "supersedes")
_RENAMED = {"created_at": "timestamp", "updated_at": "updated_at", "ruleType": "rule_type"}
_MAPPED = frozenset(
    {
        "id",
        "statement",
        "question",
        "confidence",
        "scope",
        "superseded_by",
        "valid_to",
        *_SAME,
        *_LISTS,
        *_RENAMED,
    }
)
_LAYERS = ("L1", "L2", "L3")


def is_pi_record(obj: Mapping[str, Any]) -> bool:
    """True for a PI record or inquiry: a ``statement`` or ``question`` and no ``content``."""
    return "content" not in obj and ("statement" in obj or "question" in obj)


def _text(obj: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = obj.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        need = "a non-empty string" if required else "a string or null"
        raise ValueError(f"PI record: '{name}' must be {need} (got {value!r:.80})")
    return value


def _strings(obj: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = obj.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"PI record: '{name}' must be a list of strings (got {value!r:.80})")
    return tuple(value)


def _confidence(obj: Mapping[str, Any]) -> float | None:
    value = obj.get("confidence")
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ValueError(f"PI record: 'confidence' must be a number in [0, 1] (got {value!r:.80})")
    return float(value)


def pi_record(obj: Mapping[str, Any]) -> MemoryRecord:
    """The record for one PI line; ``ValueError`` names the field that is wrong."""
    key = str(_text(obj, "id", required=True))
    inquiry = "statement" not in obj
    content = str(_text(obj, "question" if inquiry else "statement", required=True))
    layer = _text(obj, "layer")
    if layer is not None and layer not in _LAYERS:
        raise ValueError(f"PI record: 'layer' must be one of {list(_LAYERS)} (got {layer!r:.80})")
    scope = obj.get("scope")
    if scope is not None and not isinstance(scope, dict):
        raise ValueError(f"PI record: 'scope' must be an object or null (got {scope!r:.80})")
    fields: dict[str, Any] = {name: _text(obj, name) for name in _SAME}
    fields.update((name, _strings(obj, name)) for name in _LISTS)
    for pi_name, ours in _RENAMED.items():
        fields[ours] = _text(obj, pi_name)
    if fields["timestamp"] is None:
        fields["timestamp"] = fields["updated_at"]
    metadata = {k: v for k, v in obj.items() if k not in _MAPPED}
    successors = obj.get("superseded_by")
    if isinstance(successors, list):
        successors = _strings(obj, "superseded_by")
        if len(successors) > 1:
            metadata["superseded_by"] = list(successors)
        successors = successors[0] if successors else None
    elif successors is not None and not isinstance(successors, str):
        raise ValueError(
            f"PI record: 'superseded_by' must be a list of ids (got {successors!r:.80})"
        )
    fields = {k: v for k, v in fields.items() if v is not None and v != ()}
    if inquiry:
        # An inquiry's own status (open / answered / dismissed) is not a record
        # status: an open one is active, any other is shown by no section.
        fields.setdefault("memory_kind", "inquiry")
        state = fields.get("status")
        if state is not None:
            metadata["inquiry_status"] = state
        fields["status"] = "active" if state in (None, "open") else state
    category = "inquiry" if inquiry else "daily" if layer == "L3" else "core"
    try:
        return MemoryRecord(
            key=key,
            content=content,
            category=category,
            id=key,
            confidence=_confidence(obj),
            scope=scope,
            superseded_by=successors,
            expires_at=_text(obj, "valid_to"),
            metadata=metadata or None,
            **fields,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"PI record {key!r}: {exc}") from exc
