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
