"""Bad input gets an error that names what was wrong and where (twenty-seventh round).

Found by a helper injecting faults as a user's environment does; each of these failed
with an error that named nothing, or the wrong field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_inject import TurnMeta, render_memory_context
from memory_inject.storage import InMemoryStore, SQLiteStore


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return SQLiteStore(tmp_path / "m.db") if request.param == "sqlite" else InMemoryStore()


class TestStoreArguments:
    @pytest.mark.parametrize("bad", ["high", b"0.5", [0.5], True])
    def test_importance_not_a_number_is_named(self, store: Any, bad: object) -> None:
        """It was "'<=' not supported between instances of 'float' and 'str'"."""
        with pytest.raises(TypeError, match="'importance' must be a number between 0 and 1"):
            store.store("k", "c", importance=bad)
        assert store.get("k") is None

    def test_a_number_importance_is_kept(self, store: Any) -> None:
        assert 0.25 == store.store("k", "c", importance=0.25).importance

    @pytest.mark.parametrize("name", ["expires_at", "last_used_at"])
    def test_a_bad_date_names_its_own_field(self, store: Any, name: str) -> None:
        """``expires_at='tomorrow'`` was reported as a bad 'timestamp'."""
        with pytest.raises(ValueError, match=f"'{name}' must be an RFC 3339 date-time"):
            store.store("k", "c", **{name: "tomorrow"})

    @pytest.mark.parametrize("field", ["key", "content", "session_id"])
    def test_a_lone_surrogate_is_refused_by_name(self, store: Any, field: str) -> None:
        """SQLite failed with a bare UnicodeEncodeError (no field); the in-memory store kept
        text no UTF-8 store can hold. Both refuse it now, naming the field, nothing written."""
        args: dict[str, Any] = {"key": "k", "content": "c", "session_id": None}
        args[field] = "a\udc00b"
        with pytest.raises(ValueError, match=f"'{field}' holds a lone surrogate"):
            store.store(args["key"], args["content"], session_id=args["session_id"])
        assert 0 == store.count()


class TestRenderArguments:
    def test_a_dict_config_is_named(self) -> None:
        """It was "cannot create weak reference to 'dict' object"."""
        with pytest.raises(TypeError, match="'config' must be a MemoryInjectConfig \\(got dict\\)"):
            render_memory_context(InMemoryStore(), "deploy", config={"recall_limit": 3})  # type: ignore[arg-type]

    def test_a_string_turn_is_named(self) -> None:
        """It was "'str' object has no attribute 'channel'"."""
        with pytest.raises(TypeError, match="'turn' must be a TurnMeta \\(got str\\)"):
            render_memory_context(InMemoryStore(), "deploy", turn="t-1")  # type: ignore[arg-type]

    def test_a_policy_of_the_wrong_type_is_named(self) -> None:
        with pytest.raises(TypeError, match="'policy' must be an InjectPolicy \\(got str\\)"):
            render_memory_context(InMemoryStore(), "deploy", policy="inject")  # type: ignore[arg-type]

    def test_a_source_of_the_wrong_type_is_named(self) -> None:
        with pytest.raises(TypeError, match="'source' must be a str or None \\(got int\\)"):
            render_memory_context(InMemoryStore(), "deploy", source=7)  # type: ignore[arg-type]

    def test_the_right_types_render(self) -> None:
        s = InMemoryStore()
        s.store("deploy_target", "Production deploys go to prod-3.")
        out = render_memory_context(s, "where do deploys go?", turn=TurnMeta("cli", "a", "t1"))
        assert ["deploy_target"] == [e.key for e in out.entries]
