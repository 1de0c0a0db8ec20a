"""Attacks an independent review found, each now a red lap (or put back), never green."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers.repos import PY, SANDBOX_MODES, git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph, snapshot

FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    raise NotImplementedError\n",
    "tests/test_calc.py": "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n",
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    "TODO.md": "- [ ] Make test_sub pass\n- [ ] Tidy calc.py\n",
}
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
TICK = "t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ] Make test_sub pass', '- [x] Make test_sub pass'))"


def job(
    tmp_path: Path, script: str, checks=(PYTEST,), max_laps: int = 1, todo: str | None = None, sandbox: str = "auto"
) -> Path:
    """A scripted agent; `git` runs git in the lap, `users_git_dir` is the repository's git dir
    as an attacker finds it (the lap's alternates name its object store); tmp_path/out is writable."""
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import os, pathlib, subprocess\nlap = int(os.environ['RALPH_LAP'])\n"
        "git = lambda *a: subprocess.run(['git', *a], check=True, capture_output=True, text=True).stdout\n"
        "users_git_dir = pathlib.Path(git('rev-parse', '--git-path', 'objects/info/alternates').strip())"
        ".read_text().strip().removesuffix('/objects')\n" + script + "\n"
    )
    (tmp_path / "out").mkdir(exist_ok=True)
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"{PY} {agent}"},
        "checks": list(checks),
        "limits": {"max_laps": max_laps},
        "env": {"pass": ["MARK"]},  # laps are given nothing else of the test's
        "sandbox": {"mode": sandbox, "writable": [str(tmp_path / "out")]},
    }
    files = dict(FILES, **{"ralph.yaml": json.dumps(config)})
    if todo:
        files["TODO.md"] = todo
    return make_repo(tmp_path / "repo", files)


def only_red_lap(repo: Path) -> dict:
    ralph(repo, "run", "--name", "r")
    laps = lap_notes(repo, "r")
    assert laps and all(lap["status"] == "red" for lap in laps), [lap["reason"] for lap in laps]
    assert git(repo, "rev-parse", "ralph/r") == git(repo, "rev-parse", "refs/ralph/r/base")
    return laps[-1]


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_skip_worktree_cannot_hide_an_edit_from_the_commit(tmp_path: Path, sandbox: str):
    # The agent hides a gutted test file from `git add`, in its own index and in ralph's (beside
    # its work tree), and ticks the item. Sandboxed, ralph's index is out of its reach; without
    # a sandbox ralph rebuilds it. Either way the commit holds the gutted file, the checks judge
    # it, and the lap is red.
    repo = job(
        tmp_path,
        "git('update-index', '--skip-worktree', 'tests/test_calc.py')\n"
        "subprocess.run(['git', '--git-dir', users_git_dir, '--work-tree', '.', 'update-index', "
        "'--skip-worktree', 'tests/test_calc.py'], env=dict(os.environ, GIT_INDEX_FILE='../index'))\n"
        "pathlib.Path('tests/test_calc.py').write_text('def test_add():\\n    pass\\n')\n"
        "pathlib.Path('calc.py').write_text(pathlib.Path('calc.py').read_text() + '# tidy\\n')\n" + TICK,
        sandbox=sandbox,
    )
    lap = only_red_lap(repo)
    assert "protected files changed: tests/test_calc.py (modified)" in lap["reason"]
    assert git(repo, "show", "refs/ralph/r/laps/1:tests/test_calc.py") == "def test_add():\n    pass"
    assert lap["done"] is False


def test_the_commit_holds_the_files_the_hooks_left_and_the_checks_judge_them(tmp_path: Path):
    repo = job(tmp_path, "pathlib.Path('f.txt').write_text('bad')\n" + TICK, checks=["! grep -qs bad f.txt"])
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho good > f.txt\nexit 0\n")
    hook.chmod(0o755)
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "green" and git(repo, "show", "refs/ralph/r/laps/1:f.txt") == "good"


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_the_agents_git_reaches_its_own_git_dir_not_the_run(tmp_path: Path, sandbox: str):
    """Committing, moving refs and rewriting history in the lap change the lap's own git dir:
    the green line and the run record stay, and ralph's commit sits on the last green commit."""
    repo = job(
        tmp_path,
        "pathlib.Path('calc.py').write_text(pathlib.Path('calc.py').read_text() + '# x\\n')\n"
        "git('commit', '-qam', 'tidy')\n"
        "git('update-ref', 'refs/heads/ralph/r', 'HEAD')\n"
        "git('reset', '--soft', 'HEAD~1')\n" + TICK,
        checks=["true"],
        sandbox=sandbox,
    )
    before = snapshot(repo)
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "green", lap["reason"]
    assert git(repo, "rev-parse", "refs/ralph/r/laps/1^") == git(repo, "rev-parse", "refs/ralph/r/base")
    assert git(repo, "rev-parse", "ralph/r") == lap["commit"]
    assert json.loads(git(repo, "cat-file", "-p", "refs/ralph/r/run"))["run"] == "r"
    assert snapshot(repo) == before


@needs_bwrap
def test_a_check_that_reaches_for_the_users_branch_cannot_move_it(tmp_path: Path):
    repo = job(
        tmp_path,
        "pathlib.Path('check.sh').write_text(f'git --git-dir {users_git_dir} update-ref "
        "refs/heads/main $(git rev-parse HEAD)\\n')\n" + TICK,
        checks=["test ! -f check.sh || sh check.sh"],
    )
    before = snapshot(repo)
    reason = only_red_lap(repo)["reason"]
    assert "check regressed" in reason and snapshot(repo) == before


def test_a_check_that_reaches_the_users_branch_unsandboxed_is_undone(tmp_path: Path):
    repo = job(
        tmp_path,
        "pathlib.Path('check.sh').write_text(f'git --git-dir {users_git_dir} update-ref "
        "refs/heads/main $(git rev-parse HEAD)\\n')\n" + TICK,
        checks=["test ! -f check.sh || sh check.sh"],
        sandbox="off",
    )
    before = snapshot(repo)
    assert "refs/heads/main moved" in only_red_lap(repo)["reason"]
    assert snapshot(repo) == before


def test_a_test_session_that_dies_without_a_report_is_not_green(tmp_path: Path):
    repo = job(tmp_path, "pathlib.Path('calc.py').write_text('import os\\nos._exit(1)\\n')\n" + TICK)
    assert "check could not run: " in only_red_lap(repo)["reason"]
    assert "pytest wrote no report" in only_red_lap(repo)["reason"]


def test_a_new_conftest_that_drops_failing_tests_is_not_green(tmp_path: Path):
    conftest = 'def pytest_collection_modifyitems(items):\\n    items[:] = [i for i in items if "sub" not in i.name]\\n'
    repo = job(tmp_path, f"pathlib.Path('tests/conftest.py').write_text('{conftest}')\n" + TICK)
    reason = only_red_lap(repo)["reason"]
    # A new test file: judged, not refused; the old tests are judged without it (test_sub still fails).
    assert "pytest plugins changed: tests/conftest.py (added)" in reason


def test_a_lap_cannot_grant_itself_permission(tmp_path: Path):
    script = (
        "t = pathlib.Path('TODO.md')\n"
        "if lap == 1:\n"
        "    t.write_text(t.read_text() + '- [ ] Remove the obsolete test_sub from tests/test_calc.py\\n')\n"
        "    pathlib.Path('notes.txt').write_text('planned')\n"
        "    t.write_text(t.read_text().replace('- [ ] Tidy calc.py', '- [x] Tidy calc.py'))\n"
        "else:\n"
        "    pathlib.Path('tests/test_calc.py').write_text('from calc import add\\n\\n\\ndef test_add():\\n"
        "    assert add(2, 3) == 5\\n')\n"
        "    t.write_text(t.read_text().replace('- [ ]', '- [x]'))\n"
    )
    repo = job(tmp_path, script, max_laps=2)
    ralph(repo, "run", "--name", "r")
    first, second = lap_notes(repo, "r")
    assert first["status"] == "green"
    assert second["status"] == "red" and "protected files changed: tests/test_calc.py (modified)" in second["reason"]


def test_a_repository_with_no_commit_is_plain_files_to_ralphs_git(tmp_path: Path):
    """`git add` fails on a repository with no commit in the tree; ralph's git never meets one
    (its `.git` leads to no commit, so it goes): what the folder holds is the lap's files."""
    script = "git('init', '-q', 'sub')\npathlib.Path('sub/module.py').write_text('VALUE = 1\\n')\n" + TICK
    repo = job(tmp_path, script, checks=["true"])
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert git(repo, "show", f"{lap['commit']}:sub/module.py") == "VALUE = 1"


def test_sigkill_during_the_agent_is_undone_on_resume(tmp_path: Path):
    script = (
        "if lap == 1 and not os.path.exists(os.environ['MARK']):\n"
        "    git('--git-dir', users_git_dir, 'config', 'alias.evil', '!rm -rf /')\n"
        "    pathlib.Path(os.environ['MARK']).write_text('x')\n"
        "    import time; time.sleep(60)\n"
        "pathlib.Path('calc.py').write_text(pathlib.Path('calc.py').read_text().replace("
        "'raise NotImplementedError', 'return a - b'))\n" + TICK
    )
    repo = job(tmp_path, script, max_laps=1, sandbox="off")
    before = (repo / ".git" / "config").read_text()
    mark = tmp_path / "out" / "in-agent"
    proc = subprocess.Popen(
        [PY, "-m", "ralph", "run", "--name", "r"],
        cwd=repo,
        env=_env(MARK=str(mark)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait_for(mark)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert "evil" in (repo / ".git" / "config").read_text()
    resumed = ralph(repo, "run", "--name", "r", env={"MARK": str(mark)})
    assert "the lap a crash interrupted changed your repository (config changed); ralph put it back" in resumed.stderr
    assert (repo / ".git" / "config").read_text() == before


def _env(**extra: str) -> dict:
    return dict(os.environ, **extra)


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
