"""`ralph doctor`: what this machine gives a run, the sandbox first."""

from __future__ import annotations

import platform
import shutil
import sys
from pathlib import Path

from ralph import proc, sandbox, ui
from ralph.errors import Exit

MIN_GIT = (2, 38)  # merge-tree --write-tree replays a lap onto a green line that moved


def doctor(cwd: Path) -> Exit:
    missing = sandbox.why_unavailable()
    bwrap = shutil.which(sandbox.BWRAP)
    version = _first_line([bwrap, "--version"]) if bwrap else "not installed"
    ui.say(f"system       {platform.system()} {platform.release()}, Python {sys.version.split()[0]}")
    ui.say(f"git          {_first_line(['git', '--version'])}{_git_note()}")
    ui.say(f"bubblewrap   {version}")
    if missing is None:
        ui.say("sandbox      works: laps run sandboxed (sandbox: auto or required)")
        return Exit.DONE
    ui.say(f"sandbox      [bold red]unavailable[/]: {missing}")
    ui.say("             sandbox: auto runs laps unsandboxed with a warning; sandbox: required refuses to run")
    if platform.system() == "Darwin":
        ui.say("             on macOS there is no bubblewrap: laps run unsandboxed (see README, Sandbox)")
    return Exit.ERROR


def _first_line(argv: list[str]) -> str:
    try:
        done = proc.run(argv, "/", timeout=30, sweep=False)
    except OSError as exc:
        return f"cannot run {argv[0]}: {exc}"
    return next(iter(done.output.strip().splitlines()), "?")


def _git_note() -> str:
    words = _first_line(["git", "--version"]).split()
    try:
        found = tuple(int(part) for part in words[2].split(".")[:2])
    except (IndexError, ValueError):
        return ""
    return "" if found >= MIN_GIT else f" — ralph needs git {MIN_GIT[0]}.{MIN_GIT[1]} or newer"
