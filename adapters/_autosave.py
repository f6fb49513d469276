"""After the render: the autosave of the user's message and the turn's session row.

This module owns the writes an adapter makes for a turn once its block is
rendered: :func:`autosave` stores the user's message (for the origins the
core allows, stamped with the turn's governance profile), and
:func:`record_turn` upserts the session row (``memory.sessions.record``).
Both report a failing store on their result and never raise; sync and async
are twins. :mod:`._core` re-exports them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import attrs
from attrs import frozen

from memory_inject._bounded_writes import Late, awrite_in_time, write_in_time, write_wait
from memory_inject.config import MemoryInjectConfig
from memory_inject.contract import Memory, SupportsAsyncWrite, SupportsWrite
from memory_inject.models import MemoryCategory
from memory_inject.policy import AUTOSAVE_ORIGINS, InjectPolicy, should_autosave
from memory_inject.profile import turn_profile
from memory_inject.sessions import arecord_session, decision_lines, project_name, record_session

from ._request import Injection, describe

__all__ = ["Save", "aautosave", "arecord_turn", "autosave", "profile_fields", "record_turn"]

_log = logging.getLogger("memory_inject.adapters")
_NO_WRITE = "autosave_failed: the store has no store() method"


def profile_fields(
    cfg: MemoryInjectConfig, cwd: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """``{"profile_id": ...}`` when governance is enabled, else ``{}``.

    The id is the one the governance stages will compare against: the
    configured ``governance.profile_id``, else the profile of ``cwd``.
    """
    gov = cfg.governance
    if not gov.enabled:
        return {}
    return {"profile_id": turn_profile(gov.profile_id, cwd).profile_id}


#: Skips after which a turn writes nothing: its origin's memory is off, or its spawn site
#: opted out (a suppressed turn is memory-free end to end, as a suppressed cron run is).
_MEMORY_FREE = frozenset({"origin_disabled", "suppressed"})


def _autosave_args(
    policy: InjectPolicy, text: str, cwd: str | os.PathLike[str] | None
) -> dict[str, Any] | None:
    if policy.origin is None or not should_autosave(policy.origin, text):
        return None
    if policy.reason in _MEMORY_FREE:  # memory off for this origin or this turn: no writes
        return None
    return profile_fields(policy.config, cwd)


@frozen
class Save:
    """An autosave asked for by an adapter: the key, the text and the session to store under."""

    key: str
    text: str
    session_id: str | None


def autosave(
    store: Memory,
    policy: InjectPolicy,
    save: Save,
    *,
    cwd: str | os.PathLike[str] | None = None,
    started: float | None = None,
) -> tuple[str | None, str | None]:
    """Store ``save.text`` as a conversation memory if :func:`should_autosave` allows.

    ``policy`` is the turn's: its origin decides whether the message may be
    saved and its (origin-resolved) config which profile it is stamped with,
    the same profile the render used. Returns ``(key or None, error or None)``;
    a failing store is logged, never raised. Call it after the render, so the
    message cannot be recalled into its own block. A store without ``store``
    (:class:`~memory_inject.contract.SupportsWrite`) is an error.

    The write is waited for within the turn's deadline (``started``: the turn's
    ``time.perf_counter()``; :func:`memory_inject._bounded_writes.write_wait`); one
    still running then (a locked store) lands when the store frees, and the error
    says ``autosave_deferred: ...`` with no key.
    """
    try:
        fields = _autosave_args(policy, save.text, cwd)
        if fields is None:
            return None, None
        if not isinstance(store, SupportsWrite):
            return None, _NO_WRITE
        wait = write_wait(policy.config.deadline_ms, _now(started))

        def write() -> None:
            store.store(
                save.key,
                save.text,
                MemoryCategory.CONVERSATION,
                session_id=save.session_id,
                **fields,
            )

        what = f"the autosave of {save.key!r}"
        write_in_time(store, write, wait, what, ("session", save.session_id))
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _autosave_failed(save, exc)
    return save.key, None


async def aautosave(
    store: Memory,
    policy: InjectPolicy,
    save: Save,
    *,
    cwd: str | os.PathLike[str] | None = None,
    started: float | None = None,
) -> tuple[str | None, str | None]:
    """The async twin of :func:`autosave`: ``store`` runs on the store's writers
    (``memory_inject._bounded_writes``); a store that only has ``astore`` is awaited."""
    try:
        fields = _autosave_args(policy, save.text, cwd)
        if fields is None:
            return None, None
        wait = write_wait(policy.config.deadline_ms, _now(started))
        what = f"the autosave of {save.key!r}"
        args = (save.key, save.text, MemoryCategory.CONVERSATION)
        order = ("session", save.session_id)
        if isinstance(store, SupportsWrite):  # on the store's writers: in order, and a
            sync = store  # cancelled turn's write goes on (an astore of in_worker did too)
            await awrite_in_time(
                store,
                lambda: sync.store(*args, session_id=save.session_id, **fields),
                wait,
                what,
                order,
            )
        elif isinstance(store, SupportsAsyncWrite):
            write = store.astore(*args, session_id=save.session_id, **fields)
            await awrite_in_time(store, write, wait, what)
        else:
            return None, _NO_WRITE
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _autosave_failed(save, exc)
    return save.key, None


def _now(started: float | None) -> float:
    return time.perf_counter() if started is None else started


def _autosave_failed(save: Save, exc: Exception) -> tuple[None, str]:
    if isinstance(exc, Late):
        _log.warning("memory_inject: autosave of %r deferred: %s", save.key, exc)
        return None, (
            f"autosave_deferred: the write of {save.key!r} was {exc}; it lands when the "
            "store frees, or a warning on the memory_inject logger says it was lost"
        )
    _log.warning("memory_inject: autosave of %r failed", save.key, exc_info=exc)
    return None, f"autosave_failed: {describe(exc)}"


# -- session records -------------------------------------------------------------

#: Skips after which the turn still belongs to its session (its row is still updated).
_SESSION_SKIPS = frozenset({None, "trivial_prompt"})


def _session_args(
    injection: Injection,
    tools: Iterable[str],
    cwd: str | os.PathLike[str] | None,
    scope: str | None = None,
) -> dict[str, Any] | None:
    """The writer's arguments for this turn, or None when it records nothing.

    Recorded: turns of a person (the autosave origins) that belong to a session
    scope and carry text, with ``sessions.record`` on in the turn's config.
    Sub-turns, suppressed turns and disabled origins are not.
    """
    policy = injection.policy
    cfg = policy.config.sessions
    session = scope or next((s for s in injection.sessions if s is not None), None)
    if (
        not cfg.record
        or policy.origin not in AUTOSAVE_ORIGINS
        or policy.reason not in _SESSION_SKIPS
        or session is None
        or not injection.query.strip()
    ):
        return None
    return {
        "session_id": session,
        "project": cfg.project or project_name(cwd),
        "name": injection.query,
        "tools": tuple(tools),
        "decisions": decision_lines(injection.query),
        "profile_id": profile_fields(policy.config, cwd).get("profile_id"),
        "now": datetime.now(UTC),  # the turn's time, not when a deferred write lands
    }


def record_turn(
    store: Memory,
    injection: Injection,
    *,
    tools: Iterable[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    session: str | None = None,
    started: float | None = None,
) -> Injection:
    """Upsert the turn's session row (:func:`memory_inject.sessions.record_session`) when
    the turn's config asks for it; ``tools`` are the tools the adapter saw called;
    ``session`` the scope the row belongs to (None: the first of the turn's sessions).

    Returns ``injection`` with ``session_key`` set, or with ``error``
    (``session_failed: ...``) when the write failed: logged, never raised. Like the
    autosave, the write is made by the store's writers (``memory_inject._bounded_writes``),
    a session's rows one at a time in turn order, and waited for within the turn's
    deadline (``started``: the turn's ``time.perf_counter()``); one still running then (a
    locked store) lands when the store frees, and the error says ``session_deferred: ...``.
    """
    try:
        args = _session_args(injection, tools, cwd, session)
        if args is None:
            return injection
        wait = _row_wait(injection, started)
        key = write_in_time(
            store, lambda: record_session(store, **args), wait, _row(args), _order(args)
        )
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _session_failed(injection, exc)
    return attrs.evolve(injection, session_key=key)


async def arecord_turn(
    store: Memory,
    injection: Injection,
    *,
    tools: Iterable[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    session: str | None = None,
    started: float | None = None,
) -> Injection:
    """The async twin of :func:`record_turn`: a store with ``store()`` is written by its
    writers, in one line with the sync turns; one that only has ``astore`` is awaited."""
    try:
        args = _session_args(injection, tools, cwd, session)
        if args is None:
            return injection
        wait = _row_wait(injection, started)
        if isinstance(store, SupportsWrite):
            write: Any = lambda: record_session(store, **args)  # noqa: E731
            key = await awrite_in_time(store, write, wait, _row(args), _order(args))
        else:
            key = await awrite_in_time(store, arecord_session(store, **args), wait, _row(args))
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _session_failed(injection, exc)
    return attrs.evolve(injection, session_key=key)


def _row_wait(injection: Injection, started: float | None) -> float:
    """How long the turn waits for its session row: within its deadline (at least
    ``WRITE_WAIT_FLOOR_S``), but after a deferred autosave only what is left of the
    deadline: the store is locked, and the floor was the autosave's to take (round 36:
    the two floors made a 1 s turn take 1.27 s)."""
    deadline_ms = injection.policy.config.deadline_ms
    wait = write_wait(deadline_ms, _now(started))
    if "autosave_deferred" not in (injection.error or ""):
        return wait
    if deadline_ms is None:
        return 0.0
    return max(0.0, _now(started) + deadline_ms / 1000.0 - time.perf_counter())


def _row(args: dict[str, Any]) -> str:
    return f"the session row of {args['session_id']!r}"


def _order(args: dict[str, Any]) -> tuple[str, str]:
    """The order key of a session's row: its turns' merges are made one at a time, in order."""
    return ("session-row", args["session_id"])


def _session_failed(injection: Injection, exc: Exception) -> Injection:
    if isinstance(exc, Late):
        _log.warning(
            "memory_inject: session record of turn %s deferred: %s", injection.turn.turn_id, exc
        )
        failed = (
            f"session_deferred: the session row's write was {exc}; it lands when the store "
            "frees, or a warning on the memory_inject logger says it was lost"
        )
    else:
        _log.warning(
            "memory_inject: session record of turn %s failed",
            injection.turn.turn_id,
            exc_info=exc,
        )
        failed = f"session_failed: {describe(exc)}"
    return attrs.evolve(  # after an earlier failure, both are named
        injection, error=f"{injection.error}; {failed}" if injection.error else failed
    )
