"""`protect:` patterns mean what they mean in a .gitignore; `file#table` ones protect the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.repos import git, make_repo
from helpers.running import ralph

from ralph.git import changes
from ralph.verdict.guard import check_lap, matches


@pytest.mark.parametrize(
    "patterns, path, protected",
    [
        (["tests/"], "tests/test_calc.py", True),
        (["tests"], "tests/test_calc.py", True),
        (["/conftest.py"], "conftest.py", True),
        (["/conftest.py"], "sub/conftest.py", False),
        (["test_[ab].py"], "pkg/test_a.py", True),
        (["test_[ab].py"], "pkg/test_c.py", False),
        (["tests/**", "!tests/data/**"], "tests/data/sample.csv", False),
        (["tests/**", "!tests/data/**"], "tests/test_x.py", True),
        (["*_test.py"], "a/b/calc_test.py", True),
    ],
)
def test_patterns_follow_gitignore_rules(patterns: list[str], path: str, protected: bool):
    assert matches(patterns, path) is protected


def test_a_pattern_that_matches_no_file_is_named_at_the_start(tmp_path: Path):
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && touch x"},
        "checks": ["true"],
        "protect": ["features/**", "spec/", "/conftest.py"],
    }
    repo = make_repo(
        tmp_path / "repo",
        {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n", "spec/a_spec.rb": "", "conftest.py": ""},
    )
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "protect: 'features/**' matches no file at the run's start" in result.stderr
    assert "'spec/'" not in result.stderr and "'/conftest.py'" not in result.stderr


def test_a_table_pattern_other_than_rusts_tests_protects_its_whole_file(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] x\n", "app.toml": "[db]\nurl = 'a'\n\n[ui]\ntheme = 'x'\n"})
    green = git(repo, "rev-parse", "HEAD")
    (repo / "app.toml").write_text("[db]\nurl = 'a'\n\n[ui]\ntheme = 'y'\n")
    git(repo, "commit", "-qam", "lap")
    commit = git(repo, "rev-parse", "HEAD")
    report = check_lap(
        repo, green, commit, changes(repo, green, commit), ["app.toml#db"], "TODO.md", "PROGRESS.md", green
    )
    assert report.protected_touched == ["app.toml"]


@pytest.mark.parametrize("first", ["calc_x.pyi", "calc_x.py"])
def test_a_stub_beside_its_module_is_named_whichever_lap_added_it_first(tmp_path: Path, first: str):
    """mypy reads calc_x.pyi in calc_x.py's place: a stub one lap adds before another adds its
    module hides that module from the type checker as much as the two added together."""
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] x\n", "calc.py": "x = 1\n"})
    base = git(repo, "rev-parse", "HEAD")
    (repo / first).write_text("def f() -> int: ...\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lap 1")
    green = git(repo, "rev-parse", "HEAD")
    second = "calc_x.py" if first.endswith("i") else "calc_x.pyi"
    (repo / second).write_text("def f() -> int: ...\n")
    (repo / "other.py").write_text("y = 2\n")  # a module with no stub: nothing to name
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lap 2")
    commit = git(repo, "rev-parse", "HEAD")
    for old in (green, base):  # the second lap alone, and both in one
        report = check_lap(repo, old, commit, changes(repo, old, commit), [], "TODO.md", "PROGRESS.md", base)
        assert report.problems == ["stubs that hide their module from type checkers: calc_x.pyi"], report.problems
    first_lap = check_lap(repo, base, green, changes(repo, base, green), [], "TODO.md", "PROGRESS.md", base)
    assert first_lap.problems == []  # alone, it hides nothing
