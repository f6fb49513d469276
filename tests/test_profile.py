"""Profile identity from real directories: explicit id, git remote, git root, manifests, cwd."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from memory_inject.profile import (
    ProfileIdentity,
    _git_config_value,
    project_keys_for,
    resolve_profile,
    stamp_profile,
    turn_profile,
)

URL = "git@github.com:acme/widgets.git"


def h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def make_repo(root: Path, config: str | None = None) -> Path:
    (root / ".git").mkdir(parents=True)
    if config is not None:
        (root / ".git" / "config").write_text(config, encoding="utf-8")
    return root


ORIGIN_CONFIG = f"""[core]
\trepositoryformatversion = 0
\tbare = false
[remote "origin"]
\turl = {URL}
\tfetch = +refs/heads/*:refs/remotes/origin/*
[branch "main"]
\tremote = origin
"""


class TestExplicit:
    def test_explicit_setting_wins(self, tmp_path: Path) -> None:
        """PI 'uses explicit project identity': project:explicit-pi from explicit_config."""
        make_repo(tmp_path / "repo", ORIGIN_CONFIG)
        identity = resolve_profile(tmp_path / "repo", explicit="Explicit PI")
        assert ("project:explicit-pi", "explicit_config") == (identity.profile_id, identity.source)
        assert tmp_path / "repo" == identity.git_root

    def test_blank_explicit_setting_is_ignored(self, tmp_path: Path) -> None:
        """A whitespace-only explicit id falls through to the next step."""
        assert "cwd_fallback" == resolve_profile(tmp_path, explicit="  ").source


class TestGitRemote:
    def test_origin_url_is_hashed(self, tmp_path: Path) -> None:
        """The origin url gives git-<sha256[:16]> and the repo root, from a subdirectory too."""
        repo = make_repo(tmp_path / "widgets", ORIGIN_CONFIG)
        (repo / "src" / "pkg").mkdir(parents=True)
        identity = resolve_profile(repo / "src" / "pkg")
        assert (
            ProfileIdentity(
                profile_id="project:git-" + h(URL),
                project_id="git-" + h(URL),
                source="git_remote",
                git_root=repo,
                package_name=None,
                project_keys=frozenset({"git-" + h(URL), "widgets", "pkg"}),
            )
            == identity
        )

    def test_url_of_a_later_section_is_not_taken(self, tmp_path: Path) -> None:
        """An origin section without url does not borrow the next section's (PI's lazy regex)."""
        config = '[remote "origin"]\n\tfetch = x\n[remote "upstream"]\n\turl = https://u/x\n'
        repo = make_repo(tmp_path / "r", config)
        assert "git_root" == resolve_profile(repo).source

    def test_worktree_git_file_falls_through_to_git_root(self, tmp_path: Path) -> None:
        """A .git file (worktree) has no config here: the id is the git root hash."""
        wt = tmp_path / "wt"
        wt.mkdir()
        (wt / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n", encoding="utf-8")
        identity = resolve_profile(wt)
        assert ("git_root", "gitroot-" + h(str(wt)), wt) == (
            identity.source,
            identity.project_id,
            identity.git_root,
        )

    def test_repo_without_config_uses_git_root(self, tmp_path: Path) -> None:
        """A .git directory without a readable config gives gitroot-<sha256(path)[:16]>."""
        repo = make_repo(tmp_path / "bare")
        assert "project:gitroot-" + h(str(repo)) == resolve_profile(repo).profile_id


class TestGitConfigParsing:
    @pytest.mark.parametrize(
        ("config", "expected"),
        [
            ('[remote "origin"]\n url = "https://h/a b.git" ; comment\n', "https://h/a b.git"),
            ('[Remote "origin"]\n URL=https://h/x.git # note\n', "https://h/x.git"),
            ('[remote "Origin"]\n url = wrong\n[remote "origin"] url = right\n', "right"),
            ("[remote.origin]\n url = legacy\n", "legacy"),
            ('[remote "origin"]\n url = https://h/\\\nsplit.git\n', "https://h/split.git"),
            ('# [remote "origin"]\n; url = commented\n', None),
            ('[remote "origin"\n url = broken-header\n', None),
            ('[remote "origin"]\n url\n', "true"),
            ('[remote "origin"]\n url = dangling\\', "dangling"),
        ],
    )
    def test_git_config_forms(self, config: str, expected: str | None) -> None:
        """Quotes, comments, case rules, legacy headers and continuations are parsed like git."""
        assert expected == _git_config_value(config, "remote", "origin", "url")


class TestManifests:
    def test_package_json_name(self, tmp_path: Path) -> None:
        """PI 'infers project from nearest package.json': example-app, profile project:..."""
        (tmp_path / "package.json").write_text(json.dumps({"name": "example-app"}), "utf-8")
        (tmp_path / "src").mkdir()
        identity = resolve_profile(tmp_path / "src")
        assert ("project:example-app", "package_name", "example-app") == (
            identity.profile_id,
            identity.source,
            identity.package_name,
        )

    def test_nameless_package_json_uses_its_directory(self, tmp_path: Path) -> None:
        """A package.json with an empty name gives the slug of its directory."""
        app = tmp_path / "My App"
        (app / "lib").mkdir(parents=True)
        (app / "package.json").write_text('{"name": ""}', "utf-8")
        identity = resolve_profile(app / "lib")
        assert ("my-app", None) == (identity.project_id, identity.package_name)

    def test_pyproject_name_comes_before_package_json(self, tmp_path: Path) -> None:
        """In one directory, pyproject.toml's [project].name wins over package.json."""
        (tmp_path / "pyproject.toml").write_text('[project]\nname = "Memory_Inject"\n', "utf-8")
        (tmp_path / "package.json").write_text('{"name": "web"}', "utf-8")
        assert "project:memory-inject" == resolve_profile(tmp_path).profile_id

    def test_tool_only_pyproject_is_not_a_manifest(self, tmp_path: Path) -> None:
        """A pyproject.toml without a name, or unparsable, is skipped while walking up."""
        (tmp_path / "package.json").write_text('{"name": "outer"}', "utf-8")
        (tmp_path / "a" / "b").mkdir(parents=True)
        (tmp_path / "a" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 1\n", "utf-8")
        (tmp_path / "a" / "b" / "pyproject.toml").write_text("not = [toml", "utf-8")
        assert "project:outer" == resolve_profile(tmp_path / "a" / "b").profile_id

    def test_broken_package_json_is_skipped(self, tmp_path: Path) -> None:
        """An unparsable or non-object package.json is not a manifest."""
        (tmp_path / "package.json").write_text('{"name": "outer"}', "utf-8")
        (tmp_path / "a" / "b").mkdir(parents=True)
        (tmp_path / "a" / "package.json").write_text("{oops", "utf-8")
        (tmp_path / "a" / "b" / "package.json").write_text("[1, 2]", "utf-8")
        assert "outer" == resolve_profile(tmp_path / "a" / "b").package_name

    def test_poetry_name_is_read(self, tmp_path: Path) -> None:
        """[tool.poetry].name counts as the project name."""
        (tmp_path / "pyproject.toml").write_text('[tool.poetry]\nname = "poet"\n', "utf-8")
        assert "poet" == resolve_profile(tmp_path).package_name

    def test_package_name_is_kept_in_a_git_repo(self, tmp_path: Path) -> None:
        """In a repo named foo with package @org/foo-pkg, both names are project keys."""
        repo = make_repo(tmp_path / "foo", ORIGIN_CONFIG)
        (repo / "package.json").write_text('{"name": "@org/foo-pkg"}', "utf-8")
        identity = resolve_profile(repo)
        assert ("git_remote", "@org/foo-pkg") == (identity.source, identity.package_name)
        assert {"org-foo-pkg", "foo"} <= identity.project_keys

    def test_manifest_search_stops_at_the_repo_root(self, tmp_path: Path) -> None:
        """A package.json above the repository belongs to another project."""
        (tmp_path / "package.json").write_text('{"name": "outer"}', "utf-8")
        repo = make_repo(tmp_path / "inner")
        assert resolve_profile(repo).package_name is None


class TestFallback:
    def test_directory_name_slug(self, tmp_path: Path) -> None:
        """PI 'falls back to directory basename': the slug of the cwd's name."""
        cwd = tmp_path / "Some Dir_2"
        cwd.mkdir()
        identity = resolve_profile(cwd)
        assert ("project:some-dir-2", "cwd_fallback", None) == (
            identity.profile_id,
            identity.source,
            identity.git_root,
        )
        assert frozenset({"some-dir-2"}) == identity.project_keys


class TestProjectKeys:
    def test_keys_are_normalised_names(self, tmp_path: Path) -> None:
        """Package name, project id, repository name and cwd name, normalised, no blanks."""
        identity = ProfileIdentity("project:x", "x", "git_root", tmp_path / "Repo", "@a/B")
        assert frozenset({"a-b", "x", "repo", "sub-dir"}) == project_keys_for(
            identity, tmp_path / "Repo" / "Sub Dir"
        )


class TestStamp:
    def test_missing_profile_is_stamped(self) -> None:
        """A record without profile_id gets the resolved one; the input is not changed."""
        identity = ProfileIdentity("project:x", "x", "cwd_fallback")
        fields = {"key": "k", "profile_id": None}
        assert {"key": "k", "profile_id": "project:x"} == stamp_profile(fields, identity)
        assert {"key": "k", "profile_id": None} == fields

    def test_existing_profile_is_kept(self) -> None:
        """A record that names its profile keeps it."""
        identity = ProfileIdentity("project:x", "x", "cwd_fallback")
        assert {"profile_id": "project:y"} == stamp_profile({"profile_id": "project:y"}, identity)


class TestProjectProfile:
    def test_a_project_profile_names_its_project_whatever_the_checkout_is_called(
        self, tmp_path: Path
    ) -> None:
        """``import_pi`` says to set ``governance.profile_id: project:<id>``; the records it
        scoped to that project were dropped (``project_scope_mismatch``) unless the working
        directory happened to carry the project's name (a helper's find)."""
        checkout = tmp_path / "checkout"
        checkout.mkdir()
        configured = turn_profile("project:my-project", checkout)
        passed = turn_profile(None, checkout, "project:My_Project")
        assert ("project:my-project", True) == (
            configured.profile_id,
            "my-project" in configured.project_keys,
        )
        assert "my-project" in passed.project_keys
        assert "checkout" in configured.project_keys  # the directory's name still counts
        assert "my-project" not in turn_profile("team:my-project", checkout).project_keys
