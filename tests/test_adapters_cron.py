"""The cron adapter and the jobs file (adapters/cron.py) against a real SQLite store."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig, ConfigError, TurnOrigin

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import CronAdapter, CronJob, load_cron_jobs
else:
    from memory_inject.adapters import CronAdapter, CronJob, load_cron_jobs
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._twins import call, twin  # noqa: F401


def problems_of(tmp_path: Path, text: str) -> tuple[str, ...]:
    """The problems a jobs file gives, each checked to name the file, which is then stripped."""
    path = tmp_path / "jobs.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_cron_jobs(path)
    assert all(p.startswith(f"{path}: ") for p in err.value.problems)
    return tuple(p[len(f"{path}: ") :] for p in err.value.problems)


NIGHTLY = CronJob(id="nightly", name="Nightly report", prompt="summarise the prod-3 incidents")


class CountingStore:
    """Wraps a store and counts every attribute used on it (a recall, the name, anything)."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.used: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        self.used[name] += 1
        return getattr(self.inner, name)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    s.store("incident_2231", "Incident 2231: the prod-3 backup failed, disk full.", "daily")
    s.store(
        "chat",
        "Alice said the prod-3 incidents are her fault.",
        "conversation",
        session_id="telegram_alice",
    )
    s.store("cli_chat", "I said at the CLI that the prod-3 incidents worry me.", "conversation")
    yield s
    s.close()


class TestRun:
    def test_the_query_is_the_prefixed_prompt_and_chat_memory_is_excluded(
        self, store: SQLiteStore
    ) -> None:
        """Cron recalls with [cron:<id> <name>] <prompt>, sessionless, without conversation:
        a sessionless chat row is excluded as conversation, and a chat bound to a session
        is not the job's at all (withheld by the recall step, as another session's)."""
        with recording() as rec:
            turn = call(
                CronAdapter(store, AgentConfig(agent="sched")), "run", NIGHTLY, turn_id="c1"
            )
        assert "[cron:nightly Nightly report] summarise the prod-3 incidents" == turn.query
        assert turn.block.startswith("[Memory context]\n- incident_2231: ")
        assert turn.block + turn.query == turn.prompt
        ev = rec.events[0]
        assert ("cron", (None,), "conversation_excluded", "foreign_session") == (
            ev.origin,
            ev.sessions,
            ev.dropped.get("cli_chat"),
            ev.dropped.get("chat"),
        )
        assert turn.store is store

    def test_a_job_without_memory_never_touches_the_store(self, store: SQLiteStore) -> None:
        """uses_memory false: no recall, no event, no memory bound to the run."""
        counting = CountingStore(store)
        job = CronJob(
            id="ping", name="Uptime", prompt="curl the prod-3 health check", uses_memory=False
        )
        adapter = CronAdapter(counting, AgentConfig(agent="sched"))
        counting.used.clear()  # building the adapter checks the store's shape; runs must not
        with recording() as rec:
            turn = call(adapter, "run", job)
            aturn = asyncio.run(adapter.arun(job))
        assert Counter() == counting.used
        assert [] == rec.events
        assert (None, None) == (turn.store, aturn.store)
        assert ("suppressed", "") == (turn.policy.reason, turn.block)
        assert "[cron:ping Uptime] curl the prod-3 health check" == turn.prompt

    def test_cron_runs_never_autosave(self, store: SQLiteStore) -> None:
        """A cron run writes nothing to the store."""
        before = [(r.key, r.updated_at) for r in store.list()]
        call(CronAdapter(store, AgentConfig(agent="sched")), "run", NIGHTLY)
        assert before == [(r.key, r.updated_at) for r in store.list()]

    def test_the_async_twin_and_a_failing_store(self, store: SQLiteStore) -> None:
        """arun matches run; with the store closed both return no block and a failed event."""
        adapter = CronAdapter(store, AgentConfig(agent="sched"))
        assert adapter.run(NIGHTLY).block == asyncio.run(adapter.arun(NIGHTLY)).block
        store.close()
        with recording() as rec:
            turn = call(adapter, "run", NIGHTLY)
        assert ("", [False], TurnOrigin.CRON) == (
            turn.block,
            [e.success for e in rec.events],
            turn.origin,
        )


class TestLoadCronJobs:
    def test_a_jobs_file_loads_with_uses_memory(self, tmp_path: Path) -> None:
        """Each job's keys load; uses_memory defaults to true."""
        path = tmp_path / "jobs.yaml"
        path.write_text(
            "jobs:\n"
            "  - {id: nightly, name: Nightly report, prompt: summarise}\n"
            "  - {id: ping, name: Uptime, prompt: ping, uses_memory: false}\n"
        )
        assert (
            CronJob(id="nightly", name="Nightly report", prompt="summarise"),
            CronJob(id="ping", name="Uptime", prompt="ping", uses_memory=False),
        ) == load_cron_jobs(path)

    def test_every_problem_names_the_file_and_the_path(self, tmp_path: Path) -> None:
        """Bad values, unknown keys, missing keys and duplicate ids are all reported."""
        path = tmp_path / "jobs.yaml"
        path.write_text(
            "jobs:\n"
            "  - {id: a, name: A, prompt: p, uses_memory: 'no'}\n"
            "  - {id: a, name: B, prompt: p, schedule: daily}\n"
            "  - {name: C, prompt: ''}\n"
        )
        with pytest.raises(ConfigError) as err:
            load_cron_jobs(path)
        assert [
            f"{path}: 'uses_memory' must be true or false (got 'no') @ $.jobs[0]",
            f"{path}: 'schedule' is not a known key (got 'daily') @ $.jobs[1]",
            f"{path}: 'id' must be unique (got 'a' twice) @ $.jobs[1]",
            f"{path}: 'id' is required (got nothing) @ $.jobs[2]",
            f"{path}: 'prompt' must be a non-empty string (got '') @ $.jobs[2]",
        ] == list(err.value.problems)

    def test_ids_of_other_letters_are_two_ids(self, tmp_path: Path) -> None:
        """Case is compared as lower(): casefold made "straße" and "strasse" one id."""
        path = tmp_path / "jobs.yaml"
        path.write_text(
            "jobs:\n"
            + "".join(f"  - {{id: {i}, name: n, prompt: p}}\n" for i in ("straße", "strasse"))
        )
        assert ["straße", "strasse"] == [job.id for job in load_cron_jobs(path)]

    def test_ids_that_differ_only_by_case_or_spaces_are_one_id(self, tmp_path: Path) -> None:
        """``a``, ``A`` and ``a `` were three jobs (round 35)."""
        path = tmp_path / "jobs.yaml"
        path.write_text(
            "jobs:\n" + "".join(f"  - {{id: '{i}', name: n, prompt: p}}\n" for i in "aA")
        )
        path.write_text(path.read_text() + "  - {id: 'a ', name: n, prompt: p}\n")
        with pytest.raises(ConfigError) as err:
            load_cron_jobs(path)
        assert [
            f"{path}: 'id' must be unique: {bad!r} differs from 'a' only by case or spaces"
            f" @ $.jobs[{n}]"
            for n, bad in ((1, "A"), (2, "a "))
        ] == list(err.value.problems)

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("", "the file is empty; expected a mapping with 'jobs' @ $"),
            ("- a\n", "the top level must be a mapping (got a list) @ $"),
            ("jobs: 3\n", "'jobs' must be a list (got 3) @ $"),
            ("jobs: [\n", "is not valid YAML at line 2, column 1"),
        ],
    )
    def test_unreadable_shapes_give_one_clear_problem(
        self, tmp_path: Path, text: str, problem: str
    ) -> None:
        """Empty, non-mapping and broken YAML files fail with a readable message."""
        assert problems_of(tmp_path, text)[0].startswith(problem)

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("jobs: []\nschedule: daily\n", "'schedule' is not a known key (got 'daily') @ $"),
            ("{}\n", "'jobs' is required (got nothing) @ $"),
            ("jobs:\n", "'jobs' must be a list (got None) @ $"),
            ("jobs: [nightly]\n", "'jobs[0]' must be a mapping (got 'nightly') @ $.jobs[0]"),
            (
                "jobs: [{id: a, nme: A, prompt: p}]\n",
                "'name' is required (got nothing) @ $.jobs[0]",
            ),
            (
                "jobs: [{id: a, name: 3, prompt: p}]\n",
                "'name' must be a non-empty string (got 3) @ $.jobs[0]",
            ),
            (
                "jobs: [{id: null, name: A, prompt: p}]\n",
                "'id' must be a non-empty string (got None) @ $.jobs[0]",
            ),
            (
                "jobs: [{id: a, name: A, prompt: '  '}]\n",
                "'prompt' must be a non-empty string (got '  ') @ $.jobs[0]",
            ),
            (
                "jobs: [{id: a, name: A, prompt: p, uses_memory: null}]\n",
                "'uses_memory' must not be null (got None) @ $.jobs[0]",
            ),
        ],
    )
    def test_each_kind_of_problem_names_the_key_and_the_path(
        self, tmp_path: Path, text: str, problem: str
    ) -> None:
        """Every shape the jobs file refuses is reported with the file, the key and the path."""
        assert problem == problems_of(tmp_path, text)[0]

    def test_a_misspelled_key_gets_a_hint(self, tmp_path: Path) -> None:
        """An unknown job key close to a known one says which key was meant."""
        text = "jobs: [{id: a, name: A, prompt: p, uses_memroy: false}]\n"
        expected = (
            "'uses_memroy' is not a known key (did you mean 'uses_memory'?)"
            " (got False) @ $.jobs[0]",
        )
        assert expected == problems_of(tmp_path, text)

    def test_no_jobs_is_an_empty_tuple(self, tmp_path: Path) -> None:
        """An empty jobs list is valid and loads no job."""
        path = tmp_path / "jobs.yaml"
        path.write_text("jobs: []\n")
        assert () == load_cron_jobs(path)

    def test_a_missing_file_is_a_config_error(self, tmp_path: Path) -> None:
        """A path that does not exist is reported as a ConfigError naming it."""
        with pytest.raises(ConfigError, match="cannot be read"):
            load_cron_jobs(tmp_path / "nope.yaml")
