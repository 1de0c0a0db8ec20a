"""ralph never reaches past its own namespace: not into a repository named by GIT_* variables,
not to secrets in the environment, not to the user's own worktrees."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from helpers.repos import PY, git, make_repo
from helpers.running import ralph, snapshot

from ralph.isolation.files import regular_text

TICK = (
    f"{PY} -c \"import pathlib; t = pathlib.Path('TODO.md'); "
    "t.write_text(t.read_text().replace('- [ ]', '- [x]', 1)); pathlib.Path('work.txt').write_text('w')\""
)


def job(tmp_path: Path, name: str = "repo", agent: str = TICK, checks=("true",), **extra) -> Path:
    """A one-item job; agents and checks may write what they saw to tmp_path/out."""
    (tmp_path / "out").mkdir(exist_ok=True)
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": list(checks),
        "sandbox": {"writable": [str(tmp_path / "out")]},
        **extra,
    }
    return make_repo(tmp_path / name, config=config, todo=["one"])


def test_git_variables_from_a_calling_hook_do_not_redirect_ralph(tmp_path: Path):
    decoy = make_repo(tmp_path / "decoy", {"decoy.txt": "untouched\n"})
    repo = job(tmp_path)
    before_decoy, before_repo = snapshot(decoy), snapshot(repo)
    env = {
        "GIT_DIR": str(decoy / ".git"),
        "GIT_WORK_TREE": str(decoy),
        "GIT_INDEX_FILE": str(decoy / ".git/index"),
        "GIT_OBJECT_DIRECTORY": str(decoy / ".git/objects"),
    }
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert snapshot(decoy) == before_decoy
    assert git(decoy, "for-each-ref", "refs/ralph/", "refs/heads/ralph/", "refs/notes/") == ""
    assert snapshot(repo) == before_repo
    assert git(repo, "show", "ralph/r:work.txt") == "w"


def test_secrets_reach_no_agent_and_no_check_unless_passed(tmp_path: Path):
    dump = f"env > {tmp_path}/out/agent-env.txt && {TICK}"
    canaries = ("sk-canary-openai", "ghp-canary", "pw-canary", "secret-canary", "canary.sock", "plain-value")
    # The checks may not write where the agent may: they pass only if they were given what they should.
    given = ["! env | grep " + " ".join(f"-e {canary}" for canary in canaries), "env | grep -q allowed-canary"]
    repo = job(tmp_path, agent=dump, checks=given, env={"pass": ["DEPLOY_TOKEN_FOR_TESTS"]})
    secrets = {
        "OPENAI_API_KEY": "sk-canary-openai",
        "GITHUB_TOKEN": "ghp-canary",
        "DB_PASSWORD": "pw-canary",
        "MY_SECRET": "secret-canary",
        "SSH_AUTH_SOCK": "/tmp/canary.sock",
        "DEPLOY_TOKEN_FOR_TESTS": "allowed-canary",
        "PLAIN_SETTING": "plain-value",
    }
    result = ralph(repo, "run", "--name", "r", env=secrets)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (tmp_path / "out" / "agent-env.txt").read_text()
    assert [canary for canary in canaries if canary in text] == []
    assert "allowed-canary" in text
    assert "RALPH_LAP=1" in (tmp_path / "out" / "agent-env.txt").read_text()


def test_the_users_own_worktrees_are_never_pruned(tmp_path: Path):
    repo = job(tmp_path)
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "mine-locked"))
    git(repo, "worktree", "lock", "--reason", "mine", str(tmp_path / "mine-locked"))
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "mine-missing"))
    shutil.rmtree(tmp_path / "mine-missing")  # gone from disk: `git worktree prune` would drop it
    before = git(repo, "worktree", "list", "--porcelain")
    assert ralph(repo, "run", "--name", "r").returncode == 0
    assert ralph(repo, "clean", "--refs").returncode == 0
    assert git(repo, "worktree", "list", "--porcelain") == before


def test_a_lap_works_outside_the_repository_with_a_git_dir_of_its_own(tmp_path: Path):
    """Its git commands reach its own git dir (objects borrowed from the repository), never the
    repository's; no parent folder of the workspace is the repository's."""
    agent = (
        f"pwd > {tmp_path}/out/pwd.txt && git rev-parse --absolute-git-dir > {tmp_path}/out/git-dir.txt && "
        f"git log --format=%s -1 > {tmp_path}/out/head.txt && {TICK}"
    )
    repo = job(tmp_path, agent=agent)
    assert ralph(repo, "run", "--name", "r").returncode == 0
    workspace = Path((tmp_path / "out/pwd.txt").read_text().strip())
    git_dir = Path((tmp_path / "out/git-dir.txt").read_text().strip())
    assert repo not in workspace.parents and repo.resolve() not in workspace.parents
    assert git_dir.parent == workspace.parent and git_dir != repo / ".git"
    assert (tmp_path / "out/head.txt").read_text().strip() == "initial"
    assert git(repo, "worktree", "list").count("\n") == 0  # no worktree registered in the repository


def test_regular_text_reads_only_a_regular_file_of_its_size(tmp_path: Path):
    (tmp_path / "todo.md").write_text("- [x] done\n")
    (tmp_path / "big.md").write_bytes(b"x" * 101)
    (tmp_path / "link.md").symlink_to(tmp_path / "todo.md")
    (tmp_path / "zero.md").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.md")  # opening it for reading would wait for a writer forever
    assert regular_text(tmp_path / "todo.md", 100) == "- [x] done\n"
    for name in ("big.md", "link.md", "zero.md", "fifo.md", "missing.md"):
        assert regular_text(tmp_path / name, 100) is None, name
