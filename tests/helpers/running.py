"""One way to run ralph as the user would, and what a test reads back of a run: its lap notes,
the user's state it must not change, the workspaces it leaves."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from helpers.repos import git
from ralph.cli import main
from ralph.isolation import orphans
from ralph.isolation.proc import is_secret

# Called in-process through the CLI's entry point (a process start each is much of their cost):
# every command but `demo`, when the test sets no environment or stdin of its own. Tests of
# signals, crashes and secrets set the environment, so `ralph run` is then a real process.
IN_PROCESS = frozenset(
    {"run", "plan", "tell", "log", "show", "status", "clean", "init", "doctor", "land", "report", "bench", "stats"}
)


def ralph(
    cwd: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`ralph ARGS` as the user would run it: its exit code and output; a real process for
    `demo` (and whenever the test sets the environment or stdin)."""
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


def _ralph_in_process(cwd: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    before, handler, children = Path.cwd(), signal.getsignal(signal.SIGTERM), set(orphans.children())
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(before)
        signal.signal(signal.SIGTERM, handler)
        _unharden(children)
    return subprocess.CompletedProcess(["ralph", *args], result.exit_code, result.stdout, result.stderr)


def _unharden(children: set[int]) -> None:
    """What `ralph run` does to its own process (ralph/isolation/hardening.py), undone for the test worker
    it ran in: the worker is no child subreaper, and its memory is readable again. The orphans it
    adopted meanwhile that have ended are reaped: a ralph process would have taken its zombies
    with it on exit (a `--remote` run's git leaves some), and test_long_run counts children."""
    if orphans.adopting():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
        orphans._adopting = False
        for pid in set(orphans.children()) - children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # a child still running is left alone


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
    """What ralph left on disk for laps: runs' workspaces (under the isolated HOME) and worktrees;
    not those released for the next run (idle_workspaces)."""
    root = Path(os.environ["HOME"]) / ".cache" / "ralph" / "workspaces"
    listing = git(repo, "worktree", "list", "--porcelain")
    return [line for line in listing.splitlines() if line.startswith("worktree ") and "/ralph/" in line] + sorted(
        path.name for path in (root.iterdir() if root.is_dir() else ()) if path.is_dir() and path.name != "idle"
    )


def idle_workspaces(cache: Path | None = None) -> list[Path]:
    """The workspaces ended runs released for the next run of their repository, every repository's."""
    root = (cache or Path(os.environ["HOME"]) / ".cache") / "ralph" / "workspaces" / "idle"
    return sorted(path for repo in (root.iterdir() if root.is_dir() else ()) for path in repo.iterdir())


def lap_notes(repo: Path, run: str) -> list[dict]:
    """Every lap's JSON note, in lap order, read with plain git as a reviewer would
    (`ralph log --json` shows the same records; tests that only need the records use git)."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", f"refs/ralph/{run}/laps/")
    ordered = sorted((int(ref.rsplit("/", 1)[1]), sha) for ref, sha in (line.split() for line in refs.splitlines()))
    if not ordered:
        return []
    listing = git(repo, "log", "--no-walk=unsorted", "--notes=ralph", "--format=%N%x1e", *(sha for _, sha in ordered))
    return [json.loads(note) for note in listing.split("\x1e") if note.strip()]


def ralph_on_a_terminal(cwd: Path, *args: str, typed: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`ralph ARGS` as a real process whose stdin is a terminal (a pseudo-terminal), `typed` being
    what the user types there, a line an answer; its output captured."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, typed.encode())
        return subprocess.run(
            [sys.executable, "-m", "ralph", *args],
            cwd=cwd,
            stdin=follower,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        os.close(leader)
        os.close(follower)
