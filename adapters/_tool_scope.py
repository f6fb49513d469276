"""What the memory tools may see and change: the turn they act for, and its limits.

This module owns the binding of the tools to one turn (:class:`ToolScope`: the
store, the agent, the session scopes, the origin and the host's permissions),
the policy that origin gets, and the checks a write or a forget goes through:
memory off for the origin (``origins: {channel: {enabled: false}}``, a
``sub_turn``) refuses both, as it refuses a recall; a row of another scope
answers like a missing one; shared and curated rows stay the host's.
:class:`.tools.MemoryTools` adds the tools' definitions and runs the calls.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable
from typing import Any

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin
from memory_inject.policy import InjectPolicy, has_session

from . import _core
from ._remember import policy_for
from ._tool_schema import CURATED_REFUSED, DERIVED, DERIVED_REFUSED, SHARED_REFUSED, TOOL_SOURCES

__all__ = ["ToolScope"]


class ToolScope:
    """The turn a set of memory tools acts for, and what it lets them see and change."""

    def __init__(
        self,
        store: Memory,
        agent: AgentConfig | None,
        *,
        sessions: Iterable[str | None] | None,
        origin: TurnOrigin | str,
        cwd: str | os.PathLike[str] | None,
        shared_writes: bool,
        curated_writes: bool,
    ) -> None:
        """Bind ``store`` and ``agent`` to the turn's scopes, origin and permissions."""
        self.store = store
        self.agent = agent
        self.sessions = _core.scopes(sessions or ())  # None: none, as a render
        self.origin = TurnOrigin(origin)
        self.cwd = cwd
        self.shared_writes = bool(shared_writes)
        self.curated_writes = bool(curated_writes)

    def policy(self) -> InjectPolicy:
        """The policy a turn of the tools' origin and scopes gets from the agent's config."""
        return policy_for(self.agent, self.origin, has_session(self.sessions))

    def refuse_when_off(self, done: str) -> None:
        """``ValueError`` (the model's answer) when the policy gives the tools' origin no
        memory (``origin_disabled``, ``sub_turn``): a write or forget would change memory
        that is off for this turn, as a recall would read it. ``done``: what was not done."""
        policy = self.policy()
        if not policy.inject:
            raise ValueError(
                f"memory is off for {self.origin.value} turns ({policy.reason}); nothing was {done}"
            )

    def _may_replace(self, key: str, session: str | None, given: bool = False) -> None:
        """A shared write must not replace a curated shared row (without ``curated_writes``),
        and a derived key the model gives must name a row of its own (``DERIVED_REFUSED``
        alike for a missing one and another scope's: no oracle of another user's facts)."""
        get = getattr(self.store, "get", None)
        if given and DERIVED.fullmatch(key):
            mine = callable(get) and (found := get(key)) is not None and self._visible(found)
            if not mine:
                raise ValueError(DERIVED_REFUSED)
        if session is not None or self.curated_writes or not callable(get):
            return
        found = get(key)
        shared = found is not None and getattr(found, "session_id", None) is None
        if shared and getattr(found, "source", None) not in TOOL_SOURCES:
            raise ValueError(CURATED_REFUSED)

    def _forget(self, key: object) -> str:
        if not isinstance(key, str) or not key:
            raise ValueError("'key' must be a non-empty string")
        get, forget = getattr(self.store, "get", None), getattr(self.store, "forget", None)
        if not callable(get) or not callable(forget):
            return "This memory cannot forget."
        record = get(key)
        if record is None or not self._visible(record):
            return f"No memory under {key!r}."
        shared = getattr(record, "session_id", None) is None
        if shared and not self.shared_writes:
            raise ValueError(SHARED_REFUSED)  # "Error: ...", as the same write's refusal
        if shared and not self.curated_writes and record.source not in TOOL_SOURCES:
            raise ValueError(CURATED_REFUSED)
        if not _scoped(forget):
            return "This memory cannot forget within a scope; nothing was forgotten."
        # One statement, limited to the tools' scopes: a row another scope wrote under
        # the key since the look above is never the one forgotten.
        named: list[str | None] = [s for s in self.sessions if s is not None]
        if self.shared_writes:
            named.append(None)
        sources = None if self.curated_writes else TOOL_SOURCES
        if not forget(key, sessions=named, shared_sources=sources):
            return f"No memory under {key!r}."
        return f"Forgot {key!r}."

    def _visible(self, record: Any) -> bool:
        """Active, of the tools' sessions or shared, and of their profile (governance on)."""
        if getattr(record, "status", "active") != "active":
            return False
        session = getattr(record, "session_id", None)
        if session is not None and session not in self.sessions:
            return False
        mine = _core.profile_fields(self.policy().config, self.cwd).get("profile_id")
        theirs = getattr(record, "profile_id", None)
        return mine is None or theirs is None or mine == theirs


def _scoped(forget: Any) -> bool:
    """True when the store's ``forget`` takes ``sessions`` (limits itself to scopes)."""
    try:
        return "sessions" in inspect.signature(forget).parameters
    except (TypeError, ValueError):
        return False
