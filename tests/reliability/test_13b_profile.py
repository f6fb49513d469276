"""Profile ids of git worktrees and submodules (issue 13, item 15).

A worktree's ``.git`` is a file (``gitdir: ...``); the reader now follows it,
and the worktree's ``commondir`` to the main repository, so a worktree gets
its main checkout's id (by remote, or by the main checkout's root without
one). A submodule reads its own config. Malformed or dangling ``.git`` files
fall back to the directory's root, never raise. The layouts are built by
hand, as ``git worktree add`` and ``git submodule add`` write them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_inject.profile import resolve_profile


def _repo(root: Path, url: str | None) -> Path:
    git = root / ".git"
    git.mkdir(parents=True)
    config = "[core]\n\tbare = false\n"
    if url is not None:
        config += (
            f'[remote "origin"]\n\turl = {url}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        )
    (git / "config").write_text(config, encoding="utf-8")
    return git


def _worktree(main: Path, where: Path, name: str, *, relative: bool) -> Path:
    admin = main / ".git" / "worktrees" / name
    admin.mkdir(parents=True)
    (admin / "commondir").write_text("../..\n", encoding="utf-8")
    (admin / "gitdir").write_text(f"{where / '.git'}\n", encoding="utf-8")
    where.mkdir(parents=True)
    target = Path("..") / main.name / ".git" / "worktrees" / name if relative else admin
    (where / ".git").write_text(f"gitdir: {target}\n", encoding="utf-8")
    return where


class TestWorktrees:
    @settings(
        max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        url=st.one_of(st.none(), st.sampled_from(["git@example.org:a/b.git", "https://x.test/r"])),
        name=st.sampled_from(["feature", "wt-1", "hotfix.2"]),
        relative=st.booleans(),
    )
    def test_a_worktree_has_its_main_checkouts_id(
        self, tmp_path_factory: pytest.TempPathFactory, url: str | None, name: str, relative: bool
    ) -> None:
        """With or without a remote, from the worktree's root or a subdirectory."""
        base = tmp_path_factory.mktemp("repo")
        _repo(base / "main", url)
        wt = _worktree(base / "main", base / name, name, relative=relative)
        (wt / "src" / "pkg").mkdir(parents=True)
        main_id = resolve_profile(base / "main")
        for where in (wt, wt / "src" / "pkg"):
            identity = resolve_profile(where)
            assert main_id.profile_id == identity.profile_id
            assert ("git_remote" if url else "git_root") == identity.source
            assert wt == identity.git_root

    def test_a_submodule_reads_its_own_config(self, tmp_path: Path) -> None:
        """``gitdir: ../.git/modules/lib`` with its own remote gives the submodule's id."""
        _repo(tmp_path / "super", "https://x.test/super")
        modules = tmp_path / "super" / ".git" / "modules" / "lib"
        modules.mkdir(parents=True)
        (modules / "config").write_text('[remote "origin"]\n\turl = https://x.test/lib\n')
        lib = tmp_path / "super" / "lib"
        lib.mkdir()
        (lib / ".git").write_text("gitdir: ../.git/modules/lib\n")
        _repo(tmp_path / "other", "https://x.test/lib")
        assert resolve_profile(tmp_path / "other").profile_id == resolve_profile(lib).profile_id
        assert resolve_profile(tmp_path / "super").profile_id != resolve_profile(lib).profile_id

    def test_bad_git_files_fall_back_to_the_root(self, tmp_path: Path) -> None:
        """Malformed or dangling ``.git`` files, and a worktree whose main repository moved,
        give a root-based id (never an error), while a sound worktree follows its main one."""
        _repo(tmp_path / "main", "https://x.test/r")
        wt = _worktree(tmp_path / "main", tmp_path / "wt", "wt", relative=False)
        assert resolve_profile(tmp_path / "main").profile_id == resolve_profile(wt).profile_id
        for n, text in enumerate(
            ["", "not a gitdir line\n", "gitdir: /no/such/place\n", "gitdir:\n", "\x00" * 9999]
        ):
            (tmp_path / f"w{n}").mkdir()
            (tmp_path / f"w{n}" / ".git").write_text(text)
            identity = resolve_profile(tmp_path / f"w{n}")
            assert ("git_root", tmp_path / f"w{n}") == (identity.source, identity.git_root)
        (tmp_path / "main" / ".git" / "worktrees" / "wt" / "commondir").write_text("../../../gone")
        identity = resolve_profile(wt)
        assert "git_root" == identity.source
        assert resolve_profile(tmp_path / "main").profile_id != identity.profile_id
