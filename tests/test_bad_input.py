"""Bad input gets one clear line and exit 1, and nothing of the user's changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.repos import git, make_repo, write
from helpers.running import ralph, snapshot

GOOD = 'goal: "g"\nagent:\n  kind: command\n  command: "true"\nchecks:\n  - "true"\n'


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "the file is empty"),
        ("- just\n- a list\n", "expected a mapping"),
        ("goal: [unclosed\n", "not valid YAML"),
        (GOOD + "colour: blue\n", "colour: unknown key"),
        (GOOD + "limits:\n  max_laps: -2\n", "(line 8): limits.max_laps: Input should be greater than 0"),
        (GOOD + "limits:\n  max_laps: many\n", "limits.max_laps: Input should be a valid integer"),
        (GOOD + "limits:\n  maxlaps: 3\n", "limits.maxlaps: unknown key; expected one of: max_laps"),
        (GOOD + "limits:\n  check_timeout: 0\n", "limits.check_timeout"),
        ('agent:\n  kind: command\n  command: "true"\n', "goal: required key is missing"),
        ('goal: "g"\nagent:\n  kind: command\n', "agent.command (or agent.preset) is required"),
        ('goal: "g"\nagent:\n  preset: claud\n', "agent.preset: no preset 'claud' — ralph knows claude, codex"),
        (
            'goal: "g"\nagent:\n  kind: openai\n  model: m\n  preset: claude\n',
            "agent.preset, args and limit_patterns are",
        ),
        ('goal: "g"\nagent:\n  command: x\n  limit_patterns: ["("]\n', "agent.limit_patterns: '(' is no regular"),
        ('goal: "g"\nagent:\n  kind: robot\n', "agent.kind: Input should be 'command', 'openai' or 'python'"),
        ('goal: "g"\nagent:\n  kind: openai\n', "agent.model is required"),
        (GOOD.replace('checks:\n  - "true"\n', "checks: pytest\n"), "checks: Input should be a valid list"),
        (GOOD + "commit:\n  verify: sometimes\n", "commit.verify"),
        # A NUL in a file's name was an internal error; a line break split the name on its way to git.
        (GOOD + 'files:\n  progress: "PRO\\0GRESS.md"\n', "files.progress: 'PRO\\x00GRESS.md' holds a control"),
        (GOOD + 'files:\n  todo: "TO\\nDO.md"\n', "files.todo: 'TO\\nDO.md' holds a control character"),
        # Odd input (the red team's, issue 38): nested 20,000 deep was an internal error.
        (GOOD + "roles: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested too deep to be a configuration"),
        (GOOD + "mcp: " + "{a: " * 3_000 + "1" + "}" * 3_000 + "\n", "nested too deep to be a configuration"),
        (GOOD + "# " + "x" * (1 << 20) + "\n", "a configuration is at most 1,048,576"),
        (
            GOOD.replace("checks:", "checks:\n  - {run: x, junit: r.xml, jest: r.json}"),
            "from one place: junit and jest",
        ),
    ],
)
def test_malformed_config_is_one_line_naming_the_key(tmp_path: Path, text: str, expected: str):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": text, "TODO.md": "- [ ] a\n"})
    before = snapshot(repo)
    line = one_line_error(ralph(repo, "run"))
    assert "ralph.yaml" in line and expected in line
    assert snapshot(repo) == before
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""


def test_missing_config_points_at_init(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"README": "x"})
    assert "ralph init" in one_line_error(ralph(repo, "run"))


def test_not_a_git_repository(tmp_path: Path):
    assert "not a git repository" in one_line_error(ralph(tmp_path, "run"))


def test_repository_without_commits(tmp_path: Path):
    git(tmp_path, "init", "-q")
    assert "no commits" in one_line_error(ralph(tmp_path, "run"))


def test_bare_repository(tmp_path: Path):
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    assert "bare repository" in one_line_error(ralph(tmp_path / "bare.git", "run"))


def test_detached_head(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": GOOD})
    git(repo, "checkout", "-q", "--detach")
    assert "detached" in one_line_error(ralph(repo, "run"))


def test_dirty_work_tree_refused_unless_allowed(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": GOOD, "TODO.md": "- [ ] a\n"})
    write(repo, {"scratch.txt": "uncommitted"})
    before = snapshot(repo)
    line = one_line_error(ralph(repo, "run"))
    assert "uncommitted changes" in line and "--allow-dirty" in line
    assert snapshot(repo) == before
    allowed = ralph(repo, "run", "--allow-dirty", "--max-laps", "1")
    assert allowed.returncode == 3, allowed.stderr  # the agent `true` changes nothing: one red lap
    assert snapshot(repo) == before


def test_run_branch_checked_out_elsewhere(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": GOOD, "TODO.md": "- [ ] a\n"})
    git(repo, "worktree", "add", "-q", "-b", "ralph/mine", str(tmp_path / "other"))
    assert "checked out in" in one_line_error(ralph(repo, "run", "--name", "mine"))


def test_bad_run_name(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": GOOD})
    assert "bad run name" in one_line_error(ralph(repo, "run", "--name", "../escape"))


def test_review_commands_without_a_run(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": GOOD})
    for command in (["log"], ["status"], ["show", "1"], ["land"], ["clean"]):
        assert "no ralph run" in one_line_error(ralph(repo, *command))
    assert "no run named 'nope'" in one_line_error(ralph(repo, "log", "--run", "nope"))


def test_init_writes_files_and_never_overwrites(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] mine\n"})
    result = ralph(repo, "init")
    assert result.returncode == 0
    assert (repo / "TODO.md").read_text() == "- [ ] mine\n"
    assert "kept     TODO.md" in result.stdout
    assert (repo / "PROGRESS.md").exists()
    config = (repo / "ralph.yaml").read_text()
    assert "# " in config and "max_laps" in config
    assert ralph(repo, "init").stdout.count("kept") == 3
    # The scaffold is a valid config: a run gets past loading it, and says the preset's tool
    # (Claude Code, by default) is not installed here.
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ralph: job")
    run = ralph(repo, "run", "--max-laps", "1", env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 1, run.stderr
    assert run.stderr == (
        "ralph: agent.preset claude: `claude` is not on PATH — install it, or say where it is with agent.command\n"
    )


@pytest.mark.parametrize(
    "todo, expected",
    [
        (None, "TODO.md is not in HEAD"),
        ("# TODO\nJust prose, no boxes.\n", "TODO.md has no checkbox items"),
    ],
)
def test_todo_missing_or_without_checkboxes(tmp_path: Path, todo, expected):
    files = {"ralph.yaml": GOOD} | ({"TODO.md": todo} if todo else {})
    repo = make_repo(tmp_path / "repo", files)
    assert expected in one_line_error(ralph(repo, "run"))
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""


def test_a_check_that_does_not_exist_is_refused_after_the_baseline(tmp_path: Path):
    config = GOOD.replace('  - "true"', '  - "no-such-checker --all"')
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": config, "TODO.md": "- [ ] a\n"})
    before = snapshot(repo)
    line = one_line_error(ralph(repo, "run"))
    assert "the check `no-such-checker --all` could not run on the base commit: not found (exit 127)" in line
    assert "no-such-checker: not found" in line and "fix the command in ralph.yaml" in line
    assert snapshot(repo) == before
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""
    assert git(repo, "worktree", "list").count("\n") == 0


def test_a_check_that_sets_pythonpath_over_ralphs_plugin_is_refused_with_the_fix(tmp_path: Path):
    config = GOOD.replace('  - "true"', f'  - "PYTHONPATH=. {sys.executable} -m pytest -q -p no:cacheprovider"')
    repo = make_repo(
        tmp_path / "repo", {"ralph.yaml": config, "TODO.md": "- [ ] a\n", "test_a.py": "def test_a():\n    pass\n"}
    )
    line = one_line_error(ralph(repo, "run"))
    assert "could not run on the base commit: pytest could not import ralph's plugin" in line
    assert "PYTHONPATH=src:$PYTHONPATH" in line
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""


def test_unknown_run_for_show_and_land(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": GOOD, "TODO.md": "- [ ] a\n"})
    assert ralph(repo, "run", "--name", "real", "--max-laps", "1").returncode == 3
    for command in (["show", "1", "--run", "nope"], ["land", "--run", "nope"], ["status", "--run", "nope"]):
        assert "no run named 'nope' — known runs: real" in one_line_error(ralph(repo, *command))
    assert "has no lap 7" in one_line_error(ralph(repo, "show", "7"))
