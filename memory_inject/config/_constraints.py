"""The constraint mini-language of the config classes, and the checker that reports on it.

Every setting carries its constraints in attrs ``metadata`` (``kind`` plus
``ge``/``gt``/``le``, ``choices``, ``nonempty``, ``nullable``...), so that the
attrs validator (programmatic construction) and the file checker (which
reports *all* problems with their paths) word a problem exactly the same way:
``'{key}' must be {expected} (got {value!r}) @ {path}``.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from attrs import field

__all__ = [
    "MAX_BLOCK_CHARS",
    "MAX_CANDIDATE_POOL",
    "MAX_DEADLINE_MS",
    "MAX_RENDERED_ENTRIES",
    "check_class",
    "check_file",
    "described",
    "did_you_mean",
    "group",
    "loaded_values",
    "problem",
    "setting",
    "to_tuple",
]


#: Absolute ceiling on the rerank candidate pool (spec: ``MAX_CANDIDATE_POOL``), and so on
#: every count a store is asked for.
MAX_CANDIDATE_POOL = 1024
#: Upper bounds of the other numeric keys: a value past them is a typo or an attack, and
#: would load and then break (or stall) every render.
MAX_RENDERED_ENTRIES = 10_000
MAX_BLOCK_CHARS = 1_000_000
MAX_DEADLINE_MS = 600_000


def problem(name: str, value: Any, meta: Mapping[str, Any]) -> str | None:
    """What is wrong with ``value`` for the setting ``name`` described by ``meta``, or None."""
    kind = meta.get("kind")
    nullable = meta.get("nullable", False)
    if kind == "name":  # a required text (agent name, job id, prompt): null is not one either
        if isinstance(value, str) and value.strip():
            return None
        return f"'{name}' must be a non-empty string (got {value!r:.80})"
    if value is None:
        return None if nullable else f"'{name}' must not be null (got None)"
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"'{name}' must be an integer (got {value!r})"
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"'{name}' must be a number (got {value!r})"
        if isinstance(value, int) and not _fits_float(value):
            return f"'{name}' must be a finite number (got {value!r:.40})"
        if not math.isfinite(value):
            return f"'{name}' must be a finite number (got {value!r})"
    elif kind == "bool":
        if not isinstance(value, bool):
            return f"'{name}' must be true or false (got {value!r})"
    elif kind == "strlist":
        if (
            isinstance(value, str)
            or not isinstance(value, list | tuple)
            or not all(isinstance(v, str) for v in value)
        ):
            return f"'{name}' must be a list of strings (got {value!r:.80})"
        allowed_items: tuple[str, ...] = meta.get("choices_list") or ()
        bad = [v for v in value if allowed_items and v not in allowed_items]
        if bad:
            return f"'{name}' must name items from {list(allowed_items)} (got {bad!r})"
        return None
    elif kind == "str":
        if not isinstance(value, str):
            return f"'{name}' must be a string (got {value!r})"
        choices = meta.get("choices")
        chosen = value.strip().lower() or meta.get("blank", "")
        if choices is not None and chosen not in choices:
            allowed = ", ".join(repr(c) for c in choices)
            return f"'{name}' must be one of {allowed} (got {value!r})"
        if meta.get("nonempty") and not value.strip():
            return f"'{name}' must be a non-empty string (got {value!r})"
        if not value.isascii() and any("\ud800" <= c <= "\udfff" for c in value):
            return f"'{name}' holds a lone surrogate, which is not text (got {value!r:.60})"
    if "ge" in meta and value < meta["ge"]:
        return f"'{name}' must be >= {meta['ge']} (got {value!r})"
    if "gt" in meta and value <= meta["gt"]:
        return f"'{name}' must be > {meta['gt']} (got {value!r})"
    if "le" in meta and value > meta["le"]:
        return f"'{name}' must be <= {meta['le']} (got {value!r:.40})"
    return None


def _fits_float(value: int) -> bool:
    """Whether an integer converts to a float (a 400-digit one overflows)."""
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _validator(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    msg = problem(attribute.name, value, attribute.metadata)
    if msg is not None:
        raise ValueError(msg)


def setting(default: Any, kind: str, doc: str, **meta: Any) -> Any:
    """An attrs field whose constraints live in its metadata and are enforced by a validator."""
    meta.update(kind=kind, doc=doc)
    conv: Callable[[Any], Any] | None = None
    if kind == "str" and "choices" in meta:
        conv = _blank_is(meta["blank"]) if "blank" in meta else _norm_choice
    elif kind == "float":
        conv = _to_float
    elif kind == "strlist":
        conv = to_tuple
    return field(default=default, validator=_validator, converter=conv, metadata=meta)


def described(kind: str, doc: str, default: Any = attrs.NOTHING) -> Any:
    """An attrs field the file checker knows (kind, doc) but no validator enforces.

    For values that are only ever checked when they come from a file (the agent
    name, a cron job's keys); with no ``default`` the key is required.
    """
    return field(default=default, metadata={"kind": kind, "doc": doc})


def checked(kind: str, doc: str, default: Any = attrs.NOTHING) -> Any:
    """:func:`described`, and checked when built in code too (a ``CronJob`` built with
    ``uses_memory="false"`` ran with memory: the string is true): a ``ValueError`` with
    the file checker's words."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        found = problem(attribute.name, value, attribute.metadata)
        if found is not None:
            raise ValueError(f"{type(instance).__name__}: {found}")

    return field(default=default, validator=check, metadata={"kind": kind, "doc": doc})


def group(cls: type, **meta: Any) -> Any:
    """An attrs field holding a nested config group, built with its defaults."""
    return field(factory=cls, validator=attrs.validators.instance_of(cls), metadata=meta)


def to_tuple(value: Any) -> Any:
    """Lists become tuples, so that frozen configs stay hashable."""
    return tuple(value) if isinstance(value, list) else value


def _norm_choice(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _blank_is(blank: str) -> Callable[[Any], Any]:
    """A choice whose blank spelling means ``blank`` (the spec reads ``""`` as ``"none"``)."""

    def norm(value: Any) -> Any:
        value = _norm_choice(value)
        return blank if value == "" else value

    return norm


def _to_float(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and _fits_float(value):
        return float(value)
    return value  # the validator words what is wrong with it


# -- the checker ---------------------------------------------------------------


def did_you_mean(word: Any, candidates: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or nothing. Case and spaces
    around the word do not count (``CRON`` had no hint, `` cron`` had one)."""
    folded = {c.lower(): c for c in candidates}
    plain = str(word).strip().lower()
    close = [folded[plain]] if plain in folded else difflib.get_close_matches(plain, folded, n=1)
    return f" (did you mean '{folded.get(close[0], close[0])}'?)" if close else ""


def _type_args(tp: Any) -> tuple[Any, ...]:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return typing.get_args(tp)
    return (tp,)


def check_file(cls: type, data: Any, *, allowed: tuple[str, ...] | None = None) -> list[str]:
    """Every problem of a whole file's parsed YAML against ``cls``; an empty file is one problem."""
    if data is None:
        keys = allowed or tuple(a.name for a in attrs.fields(cls) if a.init)
        wanted = " and ".join(f"'{k}'" for k in keys)
        return [f"the file is empty; expected a mapping with {wanted} @ $"]
    if not isinstance(data, Mapping):
        kind = type(data).__name__
        article = "an" if kind[0] in "aeiou" else "a"
        return [f"the top level must be a mapping (got {article} {kind}) @ $"]
    return check_class(cls, data, "$", allowed=allowed)


def check_class(
    cls: type, raw: Any, path: str, *, allowed: tuple[str, ...] | None = None
) -> list[str]:
    """Every problem of the parsed mapping ``raw`` against the attrs class ``cls``, with paths.

    ``allowed`` narrows the keys accepted (per-origin overrides accept only some).
    A field whose metadata has a ``check`` callable is checked by it instead.
    """
    if not isinstance(raw, Mapping):
        return [f"'{path.rsplit('.', 1)[-1]}' must be a mapping (got {raw!r:.80}) @ {path}"]
    hints = typing.get_type_hints(cls)
    fields = {a.name: a for a in attrs.fields(cls) if a.init}
    names = allowed if allowed is not None else tuple(fields)
    problems = [
        f"'{name}' is required (got nothing) @ {path}"
        for name in names
        if fields[name].default is attrs.NOTHING and name not in raw
    ]
    for key, value in raw.items():
        if key not in names:
            hint = did_you_mean(key, names)
            problems.append(f"'{key}' is not a known key{hint} (got {value!r:.80}) @ {path}")
            continue
        attr = fields[key]
        nested = [t for t in _type_args(hints[key]) if attrs.has(t)]
        if "check" in attr.metadata:
            problems += attr.metadata["check"](value, f"{path}.{key}")
        elif nested:
            problems += check_class(nested[0], value, f"{path}.{key}")
        elif attr.metadata.get("kind") == "list_of":
            problems += _check_list(key, value, attr.metadata, path)
        else:
            msg = problem(key, value, attr.metadata)
            if msg is not None:
                problems.append(f"{msg} @ {path}")
    return problems


def loaded_values(cls: type, raw: Mapping[str, Any]) -> dict[str, Any]:
    """What a check comparing two keys of ``raw`` may read: each setting of ``cls`` as it
    would load (its default when absent, converted: ``' Hashing'`` is ``'hashing'``).

    A key with a problem of its own is left out, so a check that needs it is skipped
    (already reported once) rather than run on a value that never loads.
    """
    values: dict[str, Any] = {}
    for a in attrs.fields(cls):
        meta = a.metadata
        if not a.init or "kind" not in meta or "check" in meta or meta["kind"] == "list_of":
            continue
        if a.name not in raw:
            if a.default is not attrs.NOTHING and not hasattr(a.default, "factory"):
                values[a.name] = a.default
        elif problem(a.name, raw[a.name], meta) is None:
            convert = a.converter
            values[a.name] = convert(raw[a.name]) if callable(convert) else raw[a.name]
    return values


def _check_list(key: str, value: Any, meta: Mapping[str, Any], path: str) -> list[str]:
    """A ``list_of`` field: each item against its class; ``unique`` names a key no two share."""
    if not isinstance(value, list | tuple):
        return [f"'{key}' must be a list (got {value!r:.80}) @ {path}"]
    problems: list[str] = []
    unique = meta.get("unique")
    seen: dict[str, str] = {}  # folded (case, spaces around) -> as first written
    for n, item in enumerate(value):
        item_path = f"{path}.{key}[{n}]"
        problems += check_class(meta["item"], item, item_path)
        ident = item.get(unique) if unique and isinstance(item, Mapping) else None
        if isinstance(ident, str):
            folded = ident.strip().lower()  # not casefold: "straße" is not "strasse"
            if folded in seen:
                first = seen[folded]
                problems.append(
                    f"'{unique}' must be unique (got {ident!r} twice) @ {item_path}"
                    if first == ident
                    else f"'{unique}' must be unique: {ident!r} differs from {first!r} only "
                    f"by case or spaces @ {item_path}"
                )
            seen.setdefault(folded, ident)
    return problems
