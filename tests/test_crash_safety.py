"""Kill `ralph run` at every phase of a lap (SIGKILL, and separately SIGINT), resume, and check
the invariants: the user's state is byte-identical, the green line only fast-forwarded to
commits whose checks passed, nothing of ralph's is left behind, and the end is the same."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.repos import IDENTITY, PY, SANDBOX_MODES, git, make_repo
from helpers.running import lap_notes, ralph, ralph_workspaces, snapshot

from ralph.isolation.sandbox import why_unavailable

PHASES = ["workspace", "agent", "add", "commit", "checks", "note", "lap-ref", "advance"]
AGENT = (
    f"{PY} -c \"import pathlib; t = pathlib.Path('TODO.md'); text = t.read_text(); "
    "item = text.split('- [ ] ')[1].splitlines()[0]; t.write_text(text.replace('- [ ] ' + item, '- [x] ' + item)); "
    "pathlib.Path(item + '.txt').write_text(item)\""
)
CHECK = "test -f TODO.md && ! grep -rq FORBIDDEN --include=*.txt ."


def job(path: Path) -> Path:
    # The harness proves crash safety with laps sandboxed (required: never the fallback
    # instead); on a machine without bubblewrap it tests the fallback, explicitly.
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": AGENT},
        "checks": [CHECK],
        "sandbox": "off" if why_unavailable() else "required",
    }
    return make_repo(path, config=config, todo=["first", "second"])


def guarded(repo: Path) -> dict[str, str]:
    """The user's state plus what a linked worktree could reach: config, hooks, info."""
    state = snapshot(repo)
    for name in ("config", "hooks", "info"):
        for path in (
            sorted((repo / ".git" / name).rglob("*")) if (repo / ".git" / name).is_dir() else [repo / ".git" / name]
        ):
            if path.is_file():
                state[f".git/{path.relative_to(repo / '.git')}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def _work(repo: Path) -> str:
    """The run's end, but for ralph.yaml (tests vary its settings) and what a test's hook writes."""
    listing = git(repo, "ls-tree", "-r", "ralph/r").splitlines()
    return "\n".join(line for line in listing if not line.endswith(("\tralph.yaml", "\thook-ran.txt")))


@pytest.fixture(scope="module")
def uninterrupted_tree(tmp_path_factory) -> str:
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    old = dict(os.environ)
    os.environ.update(IDENTITY, HOME=str(home))  # the autouse fixture is function-scoped: pin the same here
    try:
        repo = job(tmp_path_factory.mktemp("clean") / "repo")
        assert ralph(repo, "run", "--name", "r").returncode == 0
        return _work(repo)
    finally:
        os.environ.clear()
        os.environ.update(old)


@pytest.mark.parametrize("how", ["KILL", "INT"])
@pytest.mark.parametrize("phase", PHASES)
def test_killed_at_any_phase_then_resumed(tmp_path: Path, phase: str, how: str, uninterrupted_tree: str):
    repo = job(tmp_path / "repo")
    before = guarded(repo)
    stop = phase if how == "KILL" else f"{phase}:INT"
    first = ralph(repo, "run", "--name", "r", env={"RALPH_DEBUG_STOP_AT": stop})
    assert first.returncode == (-9 if how == "KILL" else 130), first.stdout + first.stderr
    if how == "INT":
        assert ralph_workspaces(repo) == []  # Ctrl-C cleans up at once
    green_before_resume = git(repo, "rev-parse", "ralph/r")

    resumed = ralph(repo, "run", "--name", "r")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    assert guarded(repo) == before
    assert ralph_workspaces(repo) == []
    # The green line only fast-forwarded, and only to laps judged green with their checks run.
    assert git(repo, "merge-base", "--is-ancestor", green_before_resume, "ralph/r") == ""
    for commit in git(repo, "rev-list", "refs/ralph/r/base..ralph/r").split():
        note = json.loads(git(repo, "notes", "--ref", "ralph", "show", commit))
        assert note["status"] == "green" and note["checks"] and all(c["exit_code"] == 0 for c in note["checks"])
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and "error" not in fsck.stdout + fsck.stderr
    assert not _processes_of(repo)
    assert _work(repo) == uninterrupted_tree
    # The run lock was released with the process: a new command on the run is not refused.
    assert ralph(repo, "run", "--name", "r").returncode == 0


def _processes_of(repo: Path) -> list[int]:
    """Live processes started for this repository's runs (they carry the run mark)."""
    mark = f"RALPH_RUN_MARK={(repo / '.git').resolve()}:r".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_a_kill_inside_the_commit_hook(tmp_path: Path, uninterrupted_tree: str, sandbox: str):
    """Unsandboxed, a hook can kill ralph (and the resume repairs it); sandboxed, it cannot see
    ralph's process nor write outside the lap, and the run goes on undisturbed."""
    config = {"goal": "g", "agent": {"kind": "command", "command": AGENT}, "checks": [CHECK], "sandbox": sandbox}
    repo = make_repo(tmp_path / "repo", config=config, todo=["first", "second"])
    pid_file = tmp_path / "ralph.pid"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(
        f"#!/bin/sh\necho ran > hook-ran.txt\n"
        f"[ -f {pid_file} ] && kill -9 $(cat {pid_file}) && rm {pid_file} && sleep 5\nexit 0\n"
    )
    hook.chmod(0o755)
    before = guarded(repo)
    proc = subprocess.Popen(
        [PY, "-m", "ralph", "run", "--name", "r"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    pid_file.write_text(str(proc.pid))
    proc.communicate(timeout=60)
    if sandbox == "off":
        assert proc.returncode == -9
        resumed = ralph(repo, "run", "--name", "r")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    else:  # the hook ran (its file is in the lap), and could neither kill ralph nor remove the pid file
        assert proc.returncode == 0 and pid_file.exists()
        assert git(repo, "show", "refs/ralph/r/laps/1:hook-ran.txt") == "ran"
    assert guarded(repo) == before and ralph_workspaces(repo) == []
    assert _work(repo) == uninterrupted_tree


# An agent that knows where the repository is (its lap's alternates file names the object
# store) and goes for its refs, config and hooks with git.
TAMPER = f"""{PY} -c "
import os, pathlib, subprocess
lap = int(os.environ['RALPH_LAP'])
alternates = subprocess.run(['git', 'rev-parse', '--git-path', 'objects/info/alternates'], capture_output=True, text=True)
common = pathlib.Path(alternates.stdout.strip()).read_text().strip().removesuffix('/objects')
log = open('tamper.log', 'a')  # committed with the lap: what git said to each attempt
run = lambda *a: subprocess.run(['git', '--git-dir', common, *a], stdout=log, stderr=log)
if lap == 1:
    run('branch', '-D', 'feature')
    run('update-ref', 'refs/heads/main', 'HEAD~1')
    run('tag', 'agent-was-here')
    run('config', 'user.name', 'Agent Smith')
    try:
        pathlib.Path(common, 'hooks', 'post-commit').write_text('#!/bin/sh\\necho owned')
    except OSError as exc:
        log.write(str(exc))
t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', '- [x]', 1))
pathlib.Path('work-%d.txt' % lap).write_text('w')
" """


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_an_agent_that_reaches_the_users_refs_config_and_hooks_is_undone(tmp_path: Path, sandbox: str):
    config = {"goal": "g", "agent": {"kind": "command", "command": TAMPER}, "checks": ["true"], "sandbox": sandbox}
    repo = make_repo(tmp_path / "repo", config=config, todo=["one"])
    git(repo, "branch", "feature")
    write_extra = repo / "extra.txt"
    write_extra.write_text("second commit")
    git(repo, "add", "extra.txt")
    git(repo, "commit", "-qm", "second")
    before = guarded(repo)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    if sandbox == "auto":  # impossible: the repository is read-only inside the sandbox
        assert guarded(repo) == before
        (lap,) = lap_notes(repo, "r")
        assert lap["status"] == "green" and "changed your repository" not in result.stderr
        assert git(repo, "show", "ralph/r:tamper.log").count("Read-only file system") >= 4
        return
    assert "lap 1 changed your repository" in result.stderr
    first, second = lap_notes(repo, "r")
    assert first["status"] == "red"
    for what in (
        "refs/heads/feature deleted",
        "refs/heads/main moved",
        "config changed",
        "hooks/post-commit added",
        "refs/tags/agent-was-here created during the lap (left in place: it may be yours)",
    ):
        assert what in first["reason"]
    assert second["status"] == "green"
    # A new ref could be the user's own (a stash made meanwhile): named, never deleted.
    git(repo, "tag", "-d", "agent-was-here")
    assert guarded(repo) == before


# "Another writer" advances the green line right after ralph writes lap 1's note and before the
# swap that records the lap and moves the line: a reference-transaction hook reacting to the
# notes' update once lap 1's note is among them.
OTHER_WRITER = """#!/bin/sh
[ "$1" = committed ] || exit 0
grep -q ' refs/notes/ralph$' || exit 0
[ -f {marker} ] && exit 0
git notes --ref refs/notes/ralph list | while read -r note commit; do git cat-file blob "$note"; done |
    grep -q '"lap": 1,' || exit 0
touch {marker}
tip=$(git rev-parse refs/heads/ralph/r)
blob=$(echo 'from elsewhere' | git hash-object -w --stdin)
tree=$( (git ls-tree "$tip"; printf '100644 blob %s\\tother.txt\\n' "$blob") | git mktree)
git update-ref refs/heads/ralph/r "$(git commit-tree "$tree" -p "$tip" -m 'someone else')" "$tip"
"""
WORKER = (
    f"{PY} -c \"import pathlib; t = pathlib.Path('TODO.md'); "
    "t.write_text(t.read_text().replace('- [ ]', '- [x]', 1)); pathlib.Path('work.txt').write_text('w')\""
)


@pytest.mark.parametrize("check, status", [("true", "green"), ("! test -f other.txt || ! test -f work.txt", "red")])
def test_a_green_line_that_moved_during_the_lap_is_rebased_onto_and_judged_again(tmp_path: Path, check, status):
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": WORKER},
        "checks": [check],
        "limits": {"max_laps": 1},
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["one", "two"])
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(OTHER_WRITER.format(marker=tmp_path / "moved"))
    hook.chmod(0o755)
    ralph(repo, "run", "--name", "r")
    assert (tmp_path / "moved").exists()
    (lap,) = lap_notes(repo, "r")
    moved_to = git(repo, "log", "-1", "--format=%s", lap["parent"])
    assert lap["status"] == status, lap["reason"]
    assert "rebased onto" in lap["reason"] and moved_to == "someone else"
    assert git(repo, "rev-parse", "refs/ralph/r/laps/1") == lap["commit"]
    raw = [subprocess.run(["git", "cat-file", "commit", ref], cwd=repo, capture_output=True, check=True).stdout
           for ref in (lap["commit"], "refs/ralph/r/rebased/1")]  # fmt: skip
    rebased, original = (commit.partition(b"\n\n")[2] for commit in raw)
    assert rebased == original and rebased.endswith(b"Ralph-Lap: 1\nRalph-Agent: command\n")  # byte for byte
    if status == "green":
        assert git(repo, "rev-parse", "ralph/r") == lap["commit"]
        assert (
            git(repo, "show", "ralph/r:other.txt") == "from elsewhere" and git(repo, "show", "ralph/r:work.txt") == "w"
        )
    else:
        assert "check regressed" in lap["reason"]
        assert git(repo, "rev-parse", "ralph/r") == lap["parent"]  # the other writer's commit, not ours
