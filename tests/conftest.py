"""Fixtures: real git repositories in temp dirs, an isolated HOME, ralph run as a real process."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ralph.isolation.proc import is_secret
from ralph.isolation.sandbox import why_unavailable

# Tests of the sandbox itself need bubblewrap (.ci/run installs it); elsewhere they are skipped
# and the rest of the suite runs laps with `sandbox: auto`, which then means unsandboxed.
needs_bwrap = pytest.mark.skipif(why_unavailable() is not None, reason=f"no sandbox here: {why_unavailable()}")
SANDBOX_MODES = ["off", pytest.param("auto", marks=needs_bwrap)]

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Never read or write the developer's HOME or global git config."""
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[user]\n\tname = Test\n\temail = t@example.com\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return home


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> Path:
    """A repository with one commit holding `files` (dedented)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    write(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))


# Called in-process through the CLI's entry point (a process start each is much of their cost):
# every command but `demo`, when the test sets no environment or stdin of its own. Tests of
# signals, crashes and secrets set the environment, so `ralph run` is then a real process.
IN_PROCESS = frozenset({"run", "plan", "tell", "log", "show", "status", "clean", "init", "doctor", "land", "report"})


def ralph(
    cwd: Path, *args: str, timeout: float = 120, env: dict | None = None, input: str | None = None
) -> subprocess.CompletedProcess:
    """`ralph ARGS` as the user would run it: its exit code and output; a real process for
    `run` and `demo` (and whenever the test sets the environment or stdin)."""
    # `run` would re-execute itself without them
    secrets = any(is_secret(name, value) for name, value in os.environ.items())
    if args and args[0] in IN_PROCESS and env is None and input is None and not secrets:
        return _ralph_in_process(cwd, list(args))
    return subprocess.run(
        [sys.executable, "-m", "ralph", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
        input=input,
    )


def _ralph_in_process(cwd: Path, args: list[str]) -> subprocess.CompletedProcess:
    from click.testing import CliRunner

    from ralph.cli import main

    before, handler = Path.cwd(), signal.getsignal(signal.SIGTERM)
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(before)
        signal.signal(signal.SIGTERM, handler)
        _unharden()
    return subprocess.CompletedProcess(["ralph", *args], result.exit_code, result.stdout, result.stderr)


def _unharden() -> None:
    """What `ralph run` does to its own process (ralph/isolation/hardening.py), undone for the test worker
    it ran in: the worker is no child subreaper, and its memory is readable again."""
    import ctypes

    from ralph.isolation import orphans

    if orphans.adopting():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
        orphans._adopting = False


def snapshot(repo: Path) -> dict[str, str]:
    """What `ralph run` must never change: HEAD, the user's refs, the index, the work tree."""
    state = {"HEAD": (repo / ".git" / "HEAD").read_text()}
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    state["refs"] = "\n".join(
        line
        for line in refs.splitlines()
        if not line.startswith(("refs/ralph/", "refs/heads/ralph/", "refs/notes/ralph"))
    )
    index = repo / ".git" / "index"
    state["index"] = hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else ""
    for path in sorted(repo.rglob("*")):
        if ".git" not in path.relative_to(repo).parts and path.is_file():
            state[str(path.relative_to(repo))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def ralph_workspaces(repo: Path) -> list[str]:
    """What ralph left on disk for laps: workspaces (under the isolated HOME) and worktrees."""
    root = Path(os.environ["HOME"]) / ".cache" / "ralph" / "workspaces"
    listing = git(repo, "worktree", "list", "--porcelain")
    return [line for line in listing.splitlines() if line.startswith("worktree ") and "/ralph/" in line] + sorted(
        path.name for path in (root.iterdir() if root.is_dir() else ()) if path.is_dir()
    )


def lap_notes(repo: Path, run: str) -> list[dict]:
    """Every lap's JSON note, in lap order, read with plain git as a reviewer would
    (`ralph log --json` shows the same records; tests that only need the records use git)."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", f"refs/ralph/{run}/laps/")
    ordered = sorted((int(ref.rsplit("/", 1)[1]), sha) for ref, sha in (line.split() for line in refs.splitlines()))
    if not ordered:
        return []
    listing = git(repo, "log", "--no-walk=unsorted", "--notes=ralph", "--format=%N%x1e", *(sha for _, sha in ordered))
    return [json.loads(note) for note in listing.split("\x1e") if note.strip()]


# The longest tests (`--durations`), started first: one started last would alone set the
# suite's wall time on two cores.
LONGEST = (
    "test_long_run",
    "test_the_real_mini_swe_agent_does_a_lap",
    "test_what_an_agent_prints_cannot_crash_the_run",
    "test_a_lap_that_changes_how_pytest_judges_is_red",
    "test_a_check_that_imports_the_users_checkout",
    "test_remote.py",
    "test_ralphs_hooks_install_the_way_pre_commit_users_install_hooks",
    "test_demo.py",
    "test_the_files_that_define_how_a_check_runs_are_protected",
    "test_a_ralph_killed_mid_run_is_resumed",
)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not any(name in item.nodeid for name in LONGEST))
