"""hooks/pre-commit: the TODO integrity rule for commits made outside ralph."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.repos import make_repo

HOOK = Path(__file__).parent.parent / "hooks" / "pre-commit"


def commit(repo: Path, todo: str) -> subprocess.CompletedProcess:
    (repo / "TODO.md").write_text(todo)
    subprocess.run(["git", "add", "TODO.md"], cwd=repo, check=True)
    # `ralph` is found on PATH, as where it was installed with pip.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["git", "commit", "-qm", "edit todo"], cwd=repo, capture_output=True, text=True, env=dict(os.environ, PATH=path)
    )


def test_the_shipped_hook_refuses_deleting_or_rewording_open_items(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] one\n- [ ] two\n"})
    shutil.copy(HOOK, repo / ".git" / "hooks" / "pre-commit")
    deleted = commit(repo, "- [ ] one\n")
    assert deleted.returncode == 1
    assert "TODO items deleted or reworded: 'two'" in deleted.stderr
    assert commit(repo, "- [ ] one\n- [ ] 2\n").returncode == 1
    ticked_and_added = commit(repo, "- [x] one\n- [ ] two\n- [ ] three\n")
    assert ticked_and_added.returncode == 0, ticked_and_added.stderr
    assert commit(repo, "- [ ] two\n- [ ] three\n").returncode == 0  # done items may go


def test_commit_all_and_commit_path_are_checked_too(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] one\n- [ ] two\n"})
    shutil.copy(HOOK, repo / ".git" / "hooks" / "pre-commit")
    (repo / "TODO.md").write_text("- [ ] one\n")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = dict(os.environ, PATH=path)
    for how in (["-a"], ["TODO.md"]):
        result = subprocess.run(
            ["git", "commit", "-qm", "drop two", *how], cwd=repo, capture_output=True, text=True, env=env
        )
        assert result.returncode == 1 and "'two'" in result.stderr, how
