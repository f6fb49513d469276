"""Governance stages: PI's processor pipeline, its acceptance cases and our fixes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.stages import Stage, StageContext, StageResult
from memory_inject.stages.governance import (
    GOVERNANCE_ORDER,
    GOVERNANCE_STAGES,
    NegativeScope,
    PositiveApplicability,
    ProfileScope,
    ProjectScope,
    StatusFilter,
    apply_scope_to_routed,
    build_governance,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def entry(key: str, **extra: Any) -> MemoryEntry:
    return MemoryEntry(key, f"content of {key}", "core", NOW, extra=extra)


def ctx(**kw: Any) -> StageContext:
    return StageContext(config=MemoryInjectConfig(), now=NOW, **kw)


def keys(result: StageResult) -> list[str]:
    return [e.key for e in result.survivors]


def run(
    stages: Sequence[tuple[str, Stage]], c: StageContext, entries: Sequence[MemoryEntry]
) -> tuple[list[MemoryEntry], dict[str, dict[str, str]]]:
    current = list(entries)
    traces: dict[str, dict[str, str]] = {}
    for name, stage in stages:
        result = stage(c, current)
        current = result.survivors
        traces[name] = result.dropped
    return current, traces


class TestStatusFilter:
    def test_inactive_records_are_dropped_with_their_status(self) -> None:
        """PI 'filters inactive records': [active, deprecated] keeps only the active one."""
        result = StatusFilter()(
            ctx(),
            [entry("mem_active", status="active"), entry("mem_deprecated", status="deprecated")],
        )
        assert ["mem_active"] == keys(result)
        assert {"mem_deprecated": "status:deprecated"} == result.dropped

    def test_entries_without_status_are_active(self) -> None:
        """A plain store's entry (no status in extra) passes."""
        assert ["plain"] == keys(StatusFilter()(ctx(), [entry("plain")]))

    def test_contested_entries_are_routed_not_lost(self) -> None:
        """A contested entry leaves the main flow as status:contested and is routed."""
        contested = entry("c", status="contested")
        result = StatusFilter()(ctx(), [contested, entry("s", status="superseded")])
        assert [] == result.survivors
        assert {"c": "status:contested", "s": "status:superseded"} == result.dropped
        assert {"contested": [contested]} == result.routed


class TestProfileScope:
    def test_legacy_records_without_profile_pass(self) -> None:
        """PI 'keeps legacy records without profile_id' with no reasons."""
        result = ProfileScope()(ctx(profile_id="project:current"), [entry("legacy")])
        assert (["legacy"], {}) == (keys(result), result.dropped)

    def test_other_profiles_are_dropped(self) -> None:
        """PI 'filters records from a different explicit profile'."""
        c = ctx(profile_id="project:current")
        result = ProfileScope()(
            c,
            [
                entry("mine", profile_id="project:current"),
                entry("theirs", profile_id="project:other"),
            ],
        )
        assert ["mine"] == keys(result)
        assert {"theirs": "profile_mismatch:project:other"} == result.dropped

    def test_no_turn_profile_drops_every_bound_record(self) -> None:
        """Without a resolved profile, only unbound records pass (no cross-profile leak)."""
        result = ProfileScope()(ctx(), [entry("bound", profile_id="project:a"), entry("free")])
        assert ["free"] == keys(result)
        assert {"bound": "profile_mismatch:project:a"} == result.dropped

    def test_strict_mode_drops_unbound_records(self) -> None:
        """allow_unbound=False drops records with no profile as profile_unbound."""
        result = ProfileScope(allow_unbound=False)(ctx(profile_id="p"), [entry("free")])
        assert {"free": "profile_unbound"} == result.dropped


class TestProjectScope:
    def test_other_projects_are_dropped_with_the_raw_name(self) -> None:
        """PI 'filters project-scoped records for other projects'."""
        c = ctx(project_keys=frozenset({"current"}))
        result = ProjectScope()(
            c,
            [
                entry("here", scope={"type": "project", "project": "current"}),
                entry("there", scope={"type": "project", "project": "other"}),
            ],
        )
        assert ["here"] == keys(result)
        assert {"there": "project_scope_mismatch:other"} == result.dropped

    def test_project_names_are_compared_normalised(self) -> None:
        """'My App' in a record matches the turn key 'my-app'; the reason keeps the raw name."""
        c = ctx(project_keys=frozenset({"my-app"}))
        result = ProjectScope()(
            c,
            [
                entry("a", scope={"type": "project", "project": "My App"}),
                entry("b", scope={"type": "project", "project": "Your App"}),
            ],
        )
        assert ["a"] == keys(result)
        assert {"b": "project_scope_mismatch:Your App"} == result.dropped

    def test_unconfined_entries_pass(self) -> None:
        """L1, global, domain, unknown types, unnamed projects and no scope all pass."""
        entries = [
            entry("l1", layer="L1", scope={"type": "project", "project": "other"}),
            entry("global", scope={"type": "global"}),
            entry("domain", scope={"type": "domain", "domains": ["x"]}),
            entry("odd", scope={"type": "team", "project": "other"}),
            entry("unnamed", scope={"type": "project"}),
            entry("none"),
        ]
        result = ProjectScope()(ctx(project_keys=frozenset({"current"})), entries)
        assert ["l1", "global", "domain", "odd", "unnamed", "none"] == keys(result)


class TestPositiveApplicability:
    def test_conditions_must_match_the_context(self) -> None:
        """An entry with applies_when passes only if a condition matches the prompt."""
        c = ctx(context_text="please publish the package")
        result = PositiveApplicability()(
            c,
            [
                entry("yes", applies_when=("writing docs", "publishing")),
                entry("no", applies_when=("database migration",)),
                entry("always"),
            ],
        )
        assert ["yes", "always"] == keys(result)
        assert {"no": "applies_when_unmatched"} == result.dropped

    def test_conditions_may_be_one_string_and_blanks_are_ignored(self) -> None:
        """A single string is one condition; blank conditions count as none."""
        c = ctx(context_text="write the docs")
        result = PositiveApplicability()(
            c,
            [
                entry("one", applies_when="writing docs"),
                entry("blank", applies_when=["", "  ", None]),
            ],
        )
        assert ["one", "blank"] == keys(result)

    def test_bad_min_token_length_is_rejected(self) -> None:
        """min_token_length must be an integer >= 1."""
        with pytest.raises(ValueError, match="'min_token_length' must be an integer >= 1"):
            PositiveApplicability(min_token_length=0)


class TestNegativeScope:
    def test_does_not_apply_when_drops(self) -> None:
        """PI: 'publishing' vs 'publish to npm registry' drops, the other record stays."""
        c = ctx(context_text="publish to npm registry")
        result = NegativeScope()(
            c, [entry("mem_bun", does_not_apply_when=["publishing"]), entry("mem_other")]
        )
        assert ["mem_other"] == keys(result)
        assert {"mem_bun": "does_not_apply_when:publishing"} == result.dropped

    def test_known_exceptions_keep_the_phrase_case(self) -> None:
        """PI: the reason is known_exceptions:GitHub Packages, as written."""
        c = ctx(context_text="GitHub Packages publish workflow")
        result = NegativeScope()(c, [entry("m", known_exceptions=("GitHub Packages",))])
        assert {"m": "known_exceptions:GitHub Packages"} == result.dropped

    def test_does_not_apply_when_is_checked_before_known_exceptions(self) -> None:
        """When both lists match, the first matching does_not_apply_when phrase is the reason."""
        c = ctx(context_text="deploy the app to production")
        result = NegativeScope()(
            c,
            [
                entry(
                    "m",
                    does_not_apply_when=("testing", "deployment"),
                    known_exceptions=("production",),
                )
            ],
        )
        assert {"m": "does_not_apply_when:deployment"} == result.dropped

    def test_legacy_records_without_exception_fields_remain(self) -> None:
        """PI: records with no exception fields pass."""
        assert ["m"] == keys(NegativeScope()(ctx(context_text="anything"), [entry("m")]))

    def test_lms_only_memory_is_excluded_for_pi_package_query(self) -> None:
        """PI eval replay_negative_scope_exclusion: 'pi package' vs 'pi package test command'."""
        result = NegativeScope()(
            ctx(context_text="pi package test command"),
            [entry("lms", does_not_apply_when=["pi package"])],
        )
        assert {"lms": "does_not_apply_when:pi package"} == result.dropped

    @pytest.mark.parametrize(
        ("phrase", "prompt"),
        [
            ("tokens", "explain how to run tests"),
            ("Windows", "run it in a window"),
            ("api", "a rapid prototype"),
            ("LMS frontend", "build frontend"),
        ],
    )
    def test_pi_false_positives_keep_the_record(self, phrase: str, prompt: str) -> None:
        """The spec's false positives no longer drop a record."""
        result = NegativeScope()(
            ctx(context_text=prompt), [entry("m", does_not_apply_when=[phrase])]
        )
        assert ["m"] == keys(result)


class TestBuildGovernance:
    def test_default_is_pi_order_with_trace_names(self) -> None:
        """All five stages in PI's order, named as the traces show them."""
        assert [
            "status_filter",
            "profile_scope",
            "project_scope",
            "positive_applicability",
            "negative_scope",
        ] == [name for name, _ in build_governance()]
        assert tuple(GOVERNANCE_STAGES) == GOVERNANCE_ORDER

    def test_min_token_length_reaches_the_matching_stages(self) -> None:
        """The matcher length is passed to applicability and negative scope."""
        built = dict(
            build_governance(["applicability", "negative_scope", "status"], min_token_length=6)
        )
        assert PositiveApplicability(min_token_length=6) == built["positive_applicability"]
        assert NegativeScope(min_token_length=6) == built["negative_scope"]
        assert StatusFilter() == built["status_filter"]

    @pytest.mark.parametrize(
        ("names", "message"),
        [
            (["status", "bogus"], "'governance' stages must be among"),
            (["status", "Status"], "must not repeat"),
        ],
    )
    def test_bad_names_are_rejected(self, names: list[str], message: str) -> None:
        """Unknown or repeated stage names raise ValueError."""
        with pytest.raises(ValueError, match=message):
            build_governance(names)

    def test_pipeline_drops_each_entry_once_with_pi_reasons(self) -> None:
        """A full run: each stage reports only what it dropped, PI's reason strings."""
        c = ctx(
            profile_id="project:current",
            project_keys=frozenset({"current"}),
            context_text="publish to npm registry",
        )
        entries = [
            entry("keep", status="active", profile_id="project:current"),
            entry("old", status="deprecated"),
            entry("theirs", profile_id="project:other"),
            entry("elsewhere", scope={"type": "project", "project": "other-project"}),
            entry("docs_only", applies_when=["writing documentation"]),
            entry("no_publish", does_not_apply_when=["publishing"]),
        ]
        survivors, traces = run(build_governance(), c, entries)
        assert ["keep"] == [e.key for e in survivors]
        assert {
            "status_filter": {"old": "status:deprecated"},
            "profile_scope": {"theirs": "profile_mismatch:project:other"},
            "project_scope": {"elsewhere": "project_scope_mismatch:other-project"},
            "positive_applicability": {"docs_only": "applies_when_unmatched"},
            "negative_scope": {"no_publish": "does_not_apply_when:publishing"},
        } == traces


class TestRoutedScope:
    def test_contested_entries_pass_the_scope_stages(self) -> None:
        """Routed contested entries from another profile or project, or excluded, are dropped."""
        c = ctx(
            profile_id="project:current",
            project_keys=frozenset({"current"}),
            context_text="publish to npm registry",
        )
        routed = {
            "contested": [
                entry("ok", status="contested"),
                entry("leak", status="contested", profile_id="project:beta"),
                entry("far", status="contested", scope={"type": "project", "project": "x"}),
                entry("neg", status="contested", does_not_apply_when=["publishing"]),
            ]
        }
        after, dropped = apply_scope_to_routed(c, routed, build_governance())
        assert {"contested": [routed["contested"][0]]} == after
        assert {
            "leak": "profile_mismatch:project:beta",
            "far": "project_scope_mismatch:x",
            "neg": "does_not_apply_when:publishing",
        } == dropped

    def test_status_stage_is_skipped(self) -> None:
        """The routed entries are not re-dropped for being contested."""
        routed = {"contested": [entry("c", status="contested")]}
        after, dropped = apply_scope_to_routed(ctx(), routed, build_governance(["status"]))
        assert (routed, {}) == (after, dropped)
