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


class TestLongRunsInThePrompt:
    @pytest.mark.parametrize("run", ["日" * 10_923, "ก" * 40_000, "x" * 40_000])
    def test_a_word_longer_than_any_stored_one_costs_the_turn_nothing(
        self, tmp_path: Path, run: str
    ) -> None:
        """One run of 10,923 CJK characters (over 32 KiB of UTF-8) in a prompt failed every
        SQLite recall ("Could not decode to UTF-8 column 'term'"), and the turn lost the
        memory its other words name. Such a word is searched for nothing now."""
        for s in (SQLiteStore(tmp_path / "m.db"), SQLiteStore(":memory:")):
            s.store("deploy_target", "Production deploys go to prod-3.")
            out = render_memory_context(s, "where do production deploys go? " + run)
            assert out.success, out.event
            assert ["deploy_target"] == [e.key for e in out.entries]
            s.close()


class TestTextThatIsNotText:
    def test_a_namespace_with_a_lone_surrogate_is_a_config_error(self, tmp_path: Path) -> None:
        """It loaded, and every write then failed with a bare UnicodeEncodeError."""
        from memory_inject import load_agent_config
        from memory_inject.exceptions import ConfigError

        path = tmp_path / "agent.yaml"
        path.write_text('agent: a\nmemory:\n  backend:\n    namespace: "\\ud800"\n')
        with pytest.raises(ConfigError, match="'namespace' holds a lone surrogate") as caught:
            load_agent_config(path)
        assert str(path) in str(caught.value)
        with pytest.raises(ValueError, match="'namespace' holds a lone surrogate"):
            SQLiteStore(":memory:", namespace="\ud800")

    def test_the_cli_says_an_argument_is_not_text(self, tmp_path: Path) -> None:
        """``memory-inject forget`` with a byte of no encoding printed a traceback. No row
        can hold such a key (twenty-eighth round: a lookup by one finds nothing), so it is
        a key with no memory, and ``add`` with one names the key."""
        import os
        import subprocess
        import sys

        env = {**os.environ, "PYTHONUTF8": "1"}
        run = [sys.executable, "-m", "memory_inject.cli"]
        subprocess.run([*run, "add", "k", "deploy prod"], cwd=tmp_path, env=env, check=True)

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*run, *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
            )

        out = cli("forget", os.fsdecode(b"k\xff"))
        assert 1 == out.returncode
        assert "Traceback" not in out.stderr
        assert out.stderr.startswith("Error: no live memory under 'k\\udcff'")
        added = cli("add", os.fsdecode(b"k\xff"), "deploy prod")
        assert 1 == added.returncode
        assert "Traceback" not in added.stderr
        assert "'key' holds a lone surrogate" in added.stderr
