"""``memory-inject erase``: a key, or every forgotten row, removed for good (storage.md,
"Forget and erase"), next to ``forget``'s soft delete."""

from __future__ import annotations

from pathlib import Path

from tests.test_cli import run, seed, workdir

__all__ = ["workdir"]  # the fixture, used by name


def test_erase_removes_a_key_and_the_forgotten_rows_for_good(workdir: Path) -> None:
    """erase KEY takes a live row out of the file (an export no longer has it), fails
    the second time; erase --forgotten takes the rows forget kept; one of the two."""
    seed()
    assert 0 == run("add", "door", "the door code is zebraquokka77").exit_code
    assert 0 == run("forget", "door").exit_code
    assert "zebraquokka77" in run("export", "-").stdout  # forget keeps it for export
    erased = run("erase", "--forgotten")
    assert (0, "erased 1 forgotten memories\n") == (erased.exit_code, erased.stdout)
    assert "zebraquokka77" not in run("export", "-").stdout
    gone = run("erase", "prod_chat")
    assert (0, "erased prod_chat\n") == (gone.exit_code, gone.stdout)
    again = run("erase", "prod_chat")
    assert (1, True) == (again.exit_code, "no memory under 'prod_chat'" in again.stderr)
    assert "prod_chat" not in run("export", "-").stdout
    for bad in ((), ("deploy_target", "--forgotten")):
        assert 2 == run("erase", *bad).exit_code
    files = (workdir / ".memory").glob("memory.db*")
    assert 0 == sum(p.read_bytes().count(b"zebraquokka77") for p in files)
