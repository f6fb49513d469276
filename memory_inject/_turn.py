"""The turn's preparation: everything one render knows before it recalls.

Owns :class:`TurnInput` (the turn's inputs as one value: origin, query,
sessions, suppress, turn metadata, source, clock; checked and normalised once,
when it is built), :class:`Turn` (built once per render, read by every step)
and :func:`prepare`, which resolves the policy, the profile and the deadline
and builds the store calls (``memory_inject._calls``).
``memory_inject.pipeline`` runs what it prepared.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial

from attrs import define, field, frozen

from memory_inject._calls import STANDING, Call, build_calls
from memory_inject._recalled import describe
from memory_inject.config import MemoryInjectConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.plan import RecallPlan, plan_for, recall_limit_for
from memory_inject.policy import (
    InjectPolicy,
    direct_policy,
    has_session,
    resolve_inject_policy,
    skips_as_trivial,
)
from memory_inject.profile import ProfileIdentity, TurnProfile, turn_profile
from memory_inject.stages import governed, recall_restriction
from memory_inject.standing import standing_fetch
from memory_inject.trivial import asks_about_user, has_query_terms

__all__ = ["Turn", "TurnInput", "describe_fault", "prepare", "session_scopes"]

_NO_QUERY_TERMS = "no_query_terms"


def _policy(
    policy: InjectPolicy | None, config: MemoryInjectConfig | None, inp: TurnInput
) -> InjectPolicy:
    """The turn's policy: the one given (it decided for the input's origin), else resolved
    from ``config`` and the input's origin. Either of the wrong type is a ``TypeError``
    naming it (a dict of settings failed deep inside as "cannot create weak reference")."""
    if policy is not None and not isinstance(policy, InjectPolicy):
        raise TypeError(
            f"'policy' must be an InjectPolicy (got {type(policy).__name__}); "
            "resolve_inject_policy(...) makes one"
        )
    if config is not None and not isinstance(config, MemoryInjectConfig):
        raise TypeError(
            f"'config' must be a MemoryInjectConfig (got {type(config).__name__}); build one "
            "with MemoryInjectConfig(...), or load_agent_config(path).memory from YAML"
        )
    if policy is not None:
        if config is not None:
            raise TypeError("pass either 'policy' or 'config'/'origin', not both")
        return policy
    if inp.origin is None:
        direct = direct_policy(config)
        reason = "suppressed" if inp.suppress else None
        if reason is None and config is not None:  # the file's switches hold without one too
            reason = "origin_disabled" if not config.enabled else None
            if reason is None and inp.query is not None and skips_as_trivial(config, inp.query):
                reason = "trivial_prompt"
        return (
            direct if reason is None else InjectPolicy(False, reason=reason, config=direct.config)
        )
    return resolve_inject_policy(
        inp.origin,
        has_session=has_session(inp.sessions),
        suppress=inp.suppress,
        config=config,
        query=inp.query,
    )


def session_scopes(sessions: Iterable[str | None] | None) -> tuple[str | None, ...]:
    """Session ids as a tuple; a wrong shape is the caller's bug, a ``TypeError`` here.

    ``None`` is no session. A bare string is refused: iterating it would
    recall one scope per letter.
    """
    if sessions is None:
        return ()
    if isinstance(sessions, str | bytes):
        raise TypeError(
            f"'sessions' must be a list of session ids, not a {type(sessions).__name__} "
            f"(got {sessions!r:.80}); pass [{sessions!r:.80}]"
        )
    try:
        scopes = tuple(sessions)
    except TypeError:
        raise TypeError(
            "'sessions' must be an iterable of session ids (str or None) "
            f"(got {type(sessions).__name__})"
        ) from None
    for i, scope in enumerate(scopes):
        if scope is not None and not isinstance(scope, str):
            raise TypeError(
                f"'sessions' items must be str or None (got {type(scope).__name__} at index {i})"
            )
    return scopes


def _query(_: object, __: object, value: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"'query' must be a str (got {type(value).__name__})")


def _origin(value: TurnOrigin | str | None) -> TurnOrigin | None:
    return None if value is None else TurnOrigin(value)


def _now(value: datetime | None) -> datetime | None:
    """A naive ``now`` is UTC, as a naive timestamp is everywhere else (subtracted from an
    aware one, it failed the decay stage and lost the whole block); not a datetime is a
    ``TypeError`` naming it."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"'now' must be a datetime or None (got {type(value).__name__})")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _turn_meta(_inst: object, _attr: object, value: TurnMeta) -> None:
    if not isinstance(value, TurnMeta):
        raise TypeError(
            f"'turn' must be a TurnMeta (got {type(value).__name__}); "
            "TurnMeta(channel, agent_alias, turn_id) names a turn"
        )


def _source(_inst: object, _attr: object, value: str | None) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"'source' must be a str or None (got {type(value).__name__})")


@frozen(kw_only=True)
class TurnInput:
    """One turn's inputs as one value: what every entry point hands the pipeline.

    ``query`` is the user's text; ``origin`` who started the turn (None: a
    direct call, injected with the config as given); ``sessions`` the session
    ids whose memories the turn may see (none: one unscoped recall);
    ``suppress`` the spawn-site opt-out; ``turn`` the correlation metadata put
    on the event; ``source`` the calling plugin or agent (a recall plan's
    ``plugin`` query); ``now`` pins the clock (decay, recency). Checked and
    normalised once, here: a wrong type is a ``TypeError`` naming the field, an
    unknown origin a ``ValueError``.
    """

    query: str = field(validator=_query)
    origin: TurnOrigin | None = field(default=None, converter=_origin)
    sessions: tuple[str | None, ...] = field(default=(), converter=session_scopes)
    suppress: bool = False
    turn: TurnMeta = field(factory=TurnMeta, validator=_turn_meta)
    source: str | None = field(default=None, validator=_source)
    now: datetime | None = field(default=None, converter=_now)

    @property
    def scopes(self) -> tuple[str | None, ...]:
        """The recall's scopes: the sessions, or one unscoped recall when there are none."""
        return self.sessions or (None,)


def describe_fault(exc: BaseException) -> str:
    """:func:`describe`, even for an exception whose ``__str__`` or ``reason`` raises."""
    try:
        return describe(exc)
    except Exception:  # noqa: BLE001 - the fault must still be named on the event
        try:
            name = type(exc).__name__
        except Exception:  # noqa: BLE001
            name = "exception"
        return f"{name} (its message raised when read)"


@define(slots=True)
class Turn:
    """Everything one render knows before it recalls; built once, read by every step.

    Not frozen only because a frozen attrs class pays a per-field ``__setattr__``
    on the hot path; nothing assigns to it after ``_prepare``.
    """

    store: Memory
    query: str
    scopes: tuple[str | None, ...]
    policy: InjectPolicy
    meta: TurnMeta
    now: datetime | None
    cwd: str | os.PathLike[str] | None
    profile: ProfileIdentity | str | None
    plan: RecallPlan | None
    calls: list[Call]
    abstained: str | None = None
    #: Why the store calls could not even be built (a store attribute that raises).
    failed: str | None = None
    #: The turn's profile when it was resolved before recall (the standing context's).
    who: TurnProfile | None = None
    #: The deadline as a ``perf_counter`` value (None: no deadline).
    until: float | None = None
    #: ``rebuild(limit, scopes, plan, exclude=None)``: the turn's store calls asking other
    #: limits, or past the rows an exclusion names (the refill); None when the turn makes
    #: no store call.
    rebuild: Callable[..., list[Call]] | None = None

    @property
    def config(self) -> MemoryInjectConfig:
        """The config the turn's policy carries."""
        return self.policy.config

    @property
    def deadline(self) -> float | None:
        """The per-turn deadline in seconds (None: none)."""
        ms = self.policy.config.deadline_ms
        return None if ms is None else ms / 1000.0


def prepare(
    store: Memory,
    inp: TurnInput,
    policy: InjectPolicy | None,
    config: MemoryInjectConfig | None,
    cwd: str | os.PathLike[str] | None,
    profile: ProfileIdentity | str | None,
    *,
    asynchronous: bool = False,
) -> Turn:
    """The turn's :class:`Turn`: the policy resolved and the store calls built (a store
    that breaks while they are built is ``failed``, never raised)."""
    query, scopes, source, now = inp.query, inp.scopes, inp.source, inp.now
    pol = _policy(policy, config, inp)
    cfg = pol.config
    plan = plan_for(cfg) if pol.inject else None
    # "What do you know about me?" names no topic but asks for the memory: the newest.
    about_user = pol.inject and asks_about_user(query)
    contentless = (
        pol.inject and cfg.require_query_terms and not about_user and not has_query_terms(query)
    )
    calls: list[Call] = []
    failed = None
    ms = cfg.deadline_ms
    until = None if ms is None or not pol.inject else time.perf_counter() + ms / 1000.0
    who = None
    if pol.inject and governed(cfg):
        with contextlib.suppress(Exception):  # the stages resolve it again, and report why
            who = turn_profile(cfg.governance.profile_id, cwd, profile)
    rebuild = None
    if pol.inject and not contentless:
        # A governed turn filters first (status, profile), then ranks, as PI does.
        statuses, profiles = recall_restriction(cfg, who.profile_id) if who else (None, None)
        rebuild = partial(
            build_calls,
            store,
            "" if about_user else query,
            source=source,
            asynchronous=asynchronous,
            deadline=until,
            statuses=statuses,
            profiles=profiles,
            now=now,
        )
        try:
            calls = rebuild(recall_limit_for(cfg), scopes, plan)
        except Exception as exc:  # noqa: BLE001 - e.g. a store whose `recall` raises on access
            failed = f"recall_failed: {describe_fault(exc)}"
    meta = inp.turn
    abstained = _NO_QUERY_TERMS if contentless else None
    if pol.inject and cfg.standing.enabled and failed is None:
        # PI's standing context comes whatever the prompt says (contentless too).
        who = who or turn_profile(cfg.governance.profile_id, cwd, profile)
        fetch = standing_fetch(
            store, cfg, who.profile_id, now, scopes=scopes, shared_only=pol.shared_only
        )
        calls.append(Call(None, STANDING, fetch))
        abstained = None
    return Turn(
        store,
        query,
        scopes,
        pol,
        meta,
        now,
        cwd,
        profile,
        plan,
        calls,
        abstained,
        failed,
        who,
        until,
        rebuild,
    )
