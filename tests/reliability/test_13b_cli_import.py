"""``memory-inject import`` and ``export`` under hostile files (issue 13, item 14).

Every bad line is refused with its own line number before anything reaches
the store, so no value the JSON types allow but no store can keep (a
timestamp that overflows in UTC, a counter past 2**63, a float32 overflow,
``1e400``, nesting past the recursion limit, a lone surrogate) becomes a
traceback or a batch error naming another line. Devices and FIFOs are
refused without reading them, and ``export`` into a missing directory is an
error message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_inject.cli import cli
from memory_inject.storage.sqlite import SQLiteStore


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _good(n: int) -> str:
    return json.dumps({"key": f"k{n}", "content": f"memory number {n}"})


def _import(tmp_path: Path, bad: str, *, at: int = 2, lines: int = 4) -> Result:
    """Import a file of ``lines`` good lines with ``bad`` at line ``at``; the store stays empty."""
    body = [_good(n) for n in range(1, lines + 1)]
    body[at - 1] = bad
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(body) + "\n", encoding="utf-8")
    db = tmp_path / "m.db"
    result = _run("import", str(src), "--db", str(db), "--batch-size", "1000")
    with SQLiteStore(db) as store:
        assert 0 == store.count()  # the bad line was found before the batch was written
    return result


def _refused(result: Result, line: int, words: str) -> None:
    assert 1 == result.exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert f"line {line}: " in result.output, result.output
    assert words in result.output, result.output
    assert "Traceback" not in result.output


class TestBadValues:
    @pytest.mark.parametrize(
        "stamp",
        ["9999-12-31T23:30:00-05:00", "0001-01-01T00:10:00+05:00", "9999-12-31T23:59:59-00:01"],
    )
    def test_timestamps_that_overflow_in_utc(self, tmp_path: Path, stamp: str) -> None:
        """A time valid in its zone but outside datetime's range in UTC names its line."""
        bad = json.dumps({"key": "t", "content": "c", "timestamp": stamp})
        _refused(_import(tmp_path, bad, at=3), 3, "'timestamp' is out of range in UTC")

    @settings(
        max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(count=st.one_of(st.integers(2**63, 2**80), st.integers(-(2**70), -1)))
    def test_times_used_outside_bigint(self, tmp_path: Path, count: int) -> None:
        """``times_used`` past 2**63 - 1 (or negative) is refused on its own line."""
        bad = json.dumps({"key": "t", "content": "c", "times_used": count})
        _refused(_import(tmp_path, bad, at=2), 2, "'times_used' must be between 0 and 2**63 - 1")

    @pytest.mark.parametrize("number", ["1e400", "-1e400", "1e39", "3.5e38"])
    def test_embeddings_that_are_not_float32(self, tmp_path: Path, number: str) -> None:
        """``[1e400]`` (inf once parsed) and float32 overflows are refused with the line."""
        bad = '{"key": "t", "content": "c", "embedding": [0.5, ' + number + "]}"
        _refused(_import(tmp_path, bad, at=4), 4, "'embedding' must hold finite float32 numbers")

    @pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
    def test_json_constants_are_not_numbers(self, tmp_path: Path, constant: str) -> None:
        """Python's json extensions NaN and Infinity are refused, wherever they appear."""
        bad = '{"key": "t", "content": "c", "importance": ' + constant + "}"
        _refused(_import(tmp_path, bad, at=1), 1, f"{constant} is not a JSON number")

    def test_deeply_nested_json(self, tmp_path: Path) -> None:
        """A scope nested 100,000 levels deep is one refused line, not a RecursionError."""
        bad = '{"key": "t", "content": "c", "scope": ' + "[" * 100_000 + "]" * 100_000 + "}"
        _refused(_import(tmp_path, bad, at=2), 2, "nested too deeply")

    def test_a_scope_nested_past_what_a_store_can_encode(self, tmp_path: Path) -> None:
        """A scope nested 500 levels (under the parser's limit) is refused too."""
        bad = '{"key": "t", "content": "c", "scope": {"a": ' + "[" * 500 + "]" * 500 + "}}"
        _refused(_import(tmp_path, bad, at=2), 2, "'scope' is nested deeper than 32 levels")

    @pytest.mark.parametrize("field", ["content", "key", "session_id", "tags"])
    def test_lone_surrogates(self, tmp_path: Path, field: str) -> None:
        """``"\\ud800"`` decodes to a str no store can encode: refused with its field."""
        value = '["x\\ud800"]' if field == "tags" else '"x\\udfff"'
        obj = {"key": "t", "content": "c"}
        text = json.dumps(obj)[:-1] + f', "{field}": {value}' + "}"
        if field in ("key", "content"):
            text = json.dumps({k: v for k, v in obj.items() if k != field})[:-1]
            text += f', "{field}": {value}' + "}"
        _refused(_import(tmp_path, text, at=2), 2, f"'{field}' holds a lone surrogate")


class TestWhichLine:
    def test_the_bad_line_is_named_not_the_end_of_its_batch(self, tmp_path: Path) -> None:
        """In a batch of 1000, a bad line 2 is reported as line 2."""
        body = [_good(n) for n in range(1, 51)]
        body[1] = json.dumps({"key": "bad", "content": "c", "times_used": 2**64})
        src = tmp_path / "in.jsonl"
        src.write_text("\n".join(body) + "\n", encoding="utf-8")
        result = _run("import", str(src), "--db", str(tmp_path / "m.db"))
        _refused(result, 2, "times_used")
        assert "line 50" not in result.output


class TestSpecialFiles:
    def test_dev_zero_and_a_fifo_are_refused_without_reading(self, tmp_path: Path) -> None:
        """Neither is read (a child process with a memory cap, so a regression cannot hog RAM)."""
        fifo = tmp_path / "in.fifo"
        os.mkfifo(fifo)
        script = (
            "import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n"
            "from click.testing import CliRunner\n"
            "from memory_inject.cli import cli\n"
            "for src in ('/dev/zero', sys.argv[1]):\n"
            "    r = CliRunner().invoke(cli, ['import', src, '--db', sys.argv[2]])\n"
            "    print(r.exit_code, r.output.strip())\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(fifo), str(tmp_path / "m.db")],
            capture_output=True,
            text=True,
            timeout=120,  # a hang guard, not a timing
            check=False,
        )
        assert 0 == done.returncode, done.stderr
        assert [
            "1 Error: /dev/zero: is a FIFO, socket or device, not a regular file",
            f"1 Error: {fifo}: is a FIFO, socket or device, not a regular file",
        ] == done.stdout.splitlines()


class TestExport:
    def test_export_into_a_missing_directory(self, tmp_path: Path) -> None:
        """A clear error naming the file, exit 1, no FileNotFoundError traceback."""
        db = tmp_path / "m.db"
        with SQLiteStore(db) as store:
            store.store("k", "v")
        target = tmp_path / "no" / "such" / "dir" / "out.jsonl"
        result = _run("export", str(target), "--db", str(db))
        assert 1 == result.exit_code
        assert isinstance(result.exception, SystemExit), result.exception
        assert f"Error: cannot write {target}: No such file or directory" in result.output
