"""A run's workspace outlives it: released at the run's end (not deleted on the user's time), the
next run of the same repository takes it over and checks out only what differs. What changed
in it meanwhile is never trusted: the next run's checks see the commit's files, nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import idle_workspaces, lap_notes, ralph, ralph_workspaces

TICK = r"""
import pathlib
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
pathlib.Path("work.txt").write_text(todo.read_text())
"""
# Fails on anything but the commit's files: keep.txt as committed, nothing planted beside it.
CHECK = (
    f"{PY} -c \"import pathlib; assert pathlib.Path('keep.txt').read_text() == 'as committed\\n'; "
    "assert not pathlib.Path('planted.txt').exists(); assert not pathlib.Path('seen.txt').exists()\""
)


def _repo(tmp_path: Path, *, strict: bool = True) -> Path:
    agent = python_agent(tmp_path / "agent.py", TICK)
    files = {"keep.txt": "as committed\n", ".gitignore": "planted.txt\n"}
    config = {"goal": "Tick the items", "agent": agent, "checks": [CHECK], "sandbox": "off", "strict": strict}
    return make_repo(tmp_path / "repo", files, config=config, todo=["One", "Two", "Three"])


def _run(repo: Path, name: str) -> None:
    done = ralph(repo, "run", "--name", name, "--max-laps", "1")
    assert done.returncode == 3, done.stdout + done.stderr  # 3: max laps reached
    assert [lap["status"] for lap in lap_notes(repo, name)] == ["green"]
    assert ralph_workspaces(repo) == []  # the run's own folder: gone at its end


def _released() -> Path:
    (released,) = idle_workspaces()
    return released


def test_the_next_run_takes_over_the_workspace_and_rewrites_only_what_changed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _run(repo, "first")
    tree = _released() / "tree"
    kept, folder = os.stat(tree / "keep.txt").st_ino, os.stat(tree).st_ino

    _run(repo, "second")

    tree = _released() / "tree"
    assert os.stat(tree).st_ino == folder  # the same workspace, released again
    assert os.stat(tree / "keep.txt").st_ino == kept  # never written anew: it did not change
    assert git(repo, "show", "ralph/second:TODO.md").count("- [x]") == 1


@pytest.mark.parametrize("strict", [True, False])  # (without strict, ignored files stay from lap to lap)
def test_what_changed_in_a_released_workspace_is_put_back_before_the_next_run_checks(
    tmp_path: Path, *, strict: bool
) -> None:
    repo = _repo(tmp_path, strict=strict)
    _run(repo, "first")
    released = _released()
    tree = released / "tree"
    folder = os.stat(tree).st_ino
    (tree / "keep.txt").write_text("changed after the run\n")  # a tracked file, its stat kept as close as may be
    (tree / "planted.txt").write_text("ignored, untracked\n")
    (tree / "seen.txt").write_text("untracked\n")

    _run(repo, "second")

    notes = lap_notes(repo, "second")
    assert [check["exit_code"] for check in notes[0]["checks"]] == [0]
    tree = _released() / "tree"
    assert os.stat(tree).st_ino == folder  # it was taken over, and made the commit's again
    assert (tree / "keep.txt").read_text() == "as committed\n"
    assert not (tree / "planted.txt").exists() and not (tree / "seen.txt").exists()


def test_a_released_workspace_whose_index_changed_is_not_trusted(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _run(repo, "first")
    released = _released()
    tree = released / "tree"
    # The index made to say keep.txt need not be looked at: git would leave the file as it is.
    (tree / "keep.txt").write_text("changed after the run\n")
    env = dict(os.environ, GIT_INDEX_FILE=str(released / "index"), GIT_WORK_TREE=str(tree))
    env["GIT_DIR"] = str(repo / ".git")
    for flag in ("--assume-unchanged", "--skip-worktree"):
        subprocess.run(["git", "update-index", flag, "--", "keep.txt"], cwd=tree, env=env, check=True)

    _run(repo, "second")

    assert (_released() / "tree" / "keep.txt").read_text() == "as committed\n"


def test_a_released_workspace_turned_into_a_link_is_not_followed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _run(repo, "first")
    released = _released()
    precious = tmp_path / "precious"
    shutil.copytree(released / "tree", precious, symlinks=True)
    shutil.rmtree(released / "tree")
    (released / "tree").symlink_to(precious)
    (precious / "mine.txt").write_text("the user's\n")

    _run(repo, "second")

    assert (precious / "mine.txt").read_text() == "the user's\n"  # nothing deleted through the link
    assert not (_released() / "tree").is_symlink()


def test_ralph_clean_removes_the_released_workspaces(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _run(repo, "first")
    assert len(idle_workspaces()) == 1

    cleaned = ralph(repo, "clean", "--run", "first")

    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert "1 workspace(s) removed" in cleaned.stdout
    assert idle_workspaces() == []
