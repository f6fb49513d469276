"""resolve_inject_policy: the spec's decision table, config gating and totality."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_inject import InjectPolicy, MemoryInjectConfig, TurnOrigin, resolve_inject_policy
from memory_inject.policy import SKIP_REASONS, has_session

USER_FACING = [TurnOrigin.INTERACTIVE, TurnOrigin.CHANNEL, TurnOrigin.AGENT_DIRECT]


class TestDecisionTable:
    @pytest.mark.parametrize("session", [True, False])
    def test_sub_turn_never_injects(self, session: bool) -> None:
        """SubTurn skips with or without a session."""
        assert InjectPolicy(False, False, "sub_turn") == resolve_inject_policy(
            TurnOrigin.SUB_TURN, has_session=session
        )

    @pytest.mark.parametrize("origin", [TurnOrigin.CRON, TurnOrigin.DAEMON])
    @pytest.mark.parametrize("session", [True, False])
    def test_scheduled_origins_always_exclude_conversation(
        self, origin: TurnOrigin, session: bool
    ) -> None:
        """Cron and daemon inject with conversation excluded, whatever the session."""
        assert InjectPolicy(True, True) == resolve_inject_policy(origin, has_session=session)

    @pytest.mark.parametrize("origin", USER_FACING)
    def test_user_facing_origins_key_exclusion_on_session(self, origin: TurnOrigin) -> None:
        """With a session conversation is kept; without, it is excluded."""
        assert InjectPolicy(True, False) == resolve_inject_policy(origin, has_session=True)
        assert InjectPolicy(True, True) == resolve_inject_policy(origin, has_session=False)

    @pytest.mark.parametrize("origin", list(TurnOrigin))
    def test_suppress_overrides_every_origin(self, origin: TurnOrigin) -> None:
        """Suppress skips every origin with reason 'suppressed'."""
        for session in (True, False):
            assert InjectPolicy(False, False, "suppressed") == resolve_inject_policy(
                origin, has_session=session, suppress=True
            )

    def test_origin_values_are_snake_case_and_strings_are_accepted(self) -> None:
        """Origins serialise as snake_case names and resolve from their wire strings."""
        assert ["interactive", "channel", "cron", "daemon", "agent_direct", "sub_turn"] == [
            o.value for o in TurnOrigin
        ]
        assert InjectPolicy(True, True) == resolve_inject_policy("cron", has_session=True)

    def test_unknown_origin_is_a_clear_error(self) -> None:
        """An unknown origin string raises ValueError naming it."""
        with pytest.raises(ValueError, match="webhook"):
            resolve_inject_policy("webhook", has_session=True)


class TestConfigGating:
    def test_disabled_origin_skips_with_reason(self) -> None:
        """origins.<o>.enabled false gives origin_disabled; other origins are unaffected."""
        cfg = MemoryInjectConfig(origins={"channel": {"enabled": False}})
        assert InjectPolicy(False, False, "origin_disabled") == resolve_inject_policy(
            TurnOrigin.CHANNEL, has_session=True, config=cfg
        )
        assert resolve_inject_policy(TurnOrigin.INTERACTIVE, has_session=True, config=cfg).inject

    def test_globally_disabled_with_origin_reenabled(self) -> None:
        """enabled false at the top can be re-enabled for one origin."""
        cfg = MemoryInjectConfig(enabled=False, origins={"cron": {"enabled": True}})
        assert resolve_inject_policy(TurnOrigin.CRON, has_session=False, config=cfg).inject
        assert (
            "origin_disabled"
            == resolve_inject_policy(TurnOrigin.CHANNEL, has_session=True, config=cfg).reason
        )

    def test_suppress_still_wins_over_config(self) -> None:
        """Spawn-site suppression beats an enabled origin."""
        cfg = MemoryInjectConfig(origins={"cron": {"enabled": True}})
        assert (
            "suppressed"
            == resolve_inject_policy(
                TurnOrigin.CRON, has_session=True, suppress=True, config=cfg
            ).reason
        )

    def test_has_session_counts_only_non_none_scopes(self) -> None:
        """An empty list or [None] is sessionless."""
        assert (False, False, True) == (
            has_session([]),
            has_session([None]),
            has_session([None, "s"]),
        )


class TestProperties:
    @given(
        origin=st.sampled_from(list(TurnOrigin)),
        session=st.booleans(),
        suppress=st.booleans(),
        enabled=st.booleans(),
        override=st.sampled_from([None, True, False]),
    )
    def test_policy_is_total_and_deterministic(
        self,
        origin: TurnOrigin,
        session: bool,
        suppress: bool,
        enabled: bool,
        override: bool | None,
    ) -> None:
        """Every combination resolves, twice identically, reason set exactly on skips."""
        origins = {} if override is None else {origin.value: {"enabled": override}}
        cfg = MemoryInjectConfig(enabled=enabled, origins=origins)
        a = resolve_inject_policy(origin, has_session=session, suppress=suppress, config=cfg)
        b = resolve_inject_policy(origin, has_session=session, suppress=suppress, config=cfg)
        assert a == b
        assert (a.reason is None) == a.inject
        assert a.reason is None or a.reason in SKIP_REASONS
        if a.inject and origin in (TurnOrigin.CRON, TurnOrigin.DAEMON):
            assert a.exclude_conversation
