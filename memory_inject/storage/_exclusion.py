"""A :class:`~memory_inject.contract.RecallExclusion` as SQL, for the SQLite and PostgreSQL stores.

The key rules come from ``memory_inject._skip_keys`` (the skip set's own data),
never spelled here: an autosave key equal to a name or starting with it and
``_``, a history key ending in the suffix, on the key trimmed of ASCII white
space and ASCII-lowered. Each engine says how its SQL trims and lowers a key
and how it marks a parameter; every value is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Callable

from memory_inject._skip_keys import AUTOSAVE_KEYS, HISTORY_SUFFIX
from memory_inject.contract import RecallExclusion

__all__ = ["kept_sql", "key_rules_sql"]


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching itself (escape character ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def key_rules_sql(key: Callable[[], str], mark: Callable[[object], str]) -> str:
    """SQL true when the key (``key()``: an expression of the key, one call per use) is
    one a skip rule of the key names (``user_msg``, ``user_msg_*``, ``assistant_resp``,
    ``assistant_resp_*``, ``*_history``), each compared by ``LIKE``: ASCII
    case-insensitive on SQLite; on PostgreSQL ``key()`` lowers the key itself.
    ``mark(value)`` binds a value, giving its placeholder."""
    rules = [
        f"{key()} LIKE {mark(pattern)} ESCAPE '\\'"
        for name, _ in AUTOSAVE_KEYS
        for pattern in (_like(name), _like(name + "_") + "%")
    ]
    rules.append(f"{key()} LIKE {mark('%' + _like(HISTORY_SUFFIX))} ESCAPE '\\'")
    return " OR ".join(rules)


def kept_sql(
    exclude: RecallExclusion, mark: Callable[[object], str], key_rules: Callable[[], str]
) -> list[str]:
    """The clauses a row ``exclude`` does not name passes (none when it names nothing):
    bound to no session (``sessionless``), of no excluded category, and, with
    ``skip_keys``, ``NOT key_rules()`` (the engine's test of the key)."""
    parts: list[str] = []
    if exclude.sessionless:
        parts.append("session_id IS NULL")
    if exclude.categories:
        parts.append(f"category NOT IN ({', '.join(mark(c) for c in exclude.categories)})")
    if exclude.skip_keys:
        parts.append(f"NOT ({key_rules()})")
    return parts
