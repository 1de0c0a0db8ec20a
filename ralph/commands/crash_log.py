"""The crash log: what a bug in ralph leaves behind for its report (the versions, the command line,
the traceback), where the user's runs live. pre-commit's error_handler.py is the model: a bug
report without versions starts with a question, and one written to /tmp is gone by the time
someone asks (issue 27)."""

from __future__ import annotations

import os
import platform
import shlex
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from ralph import git
from ralph.git import layout
from ralph.isolation.files import replace_with

NAME = "crash.log"


def write(error: BaseException, cwd: Path, argv: list[str]) -> Path | None:
    """Write the log of `error` to the first folder that takes it; None when none does. Only the
    last crash is kept: it is the one being reported."""
    text = _text(error, cwd, argv)
    for folder in _folders(cwd):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            replace_with(folder / NAME, text)
        except OSError:
            continue
        return folder / NAME
    return _in_temp(text)


def _in_temp(text: str) -> Path | None:
    """A log of its own in the temp folder, made there exclusively: a fixed name in a folder
    every user writes would be anyone's to plant first."""
    try:
        handle, name = tempfile.mkstemp(prefix="ralph-crash-", suffix=".log")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError:
        return None
    return Path(name)


def headline(error: BaseException) -> str:
    """The error's last traceback line, on one line: what the user reads before opening the log."""
    said = " ".join(str(error).split())
    return f"{type(error).__name__}: {said[:200]}" if said else type(error).__name__


def _folders(cwd: Path) -> list[Path]:
    """Where the user's runs live (the repository's git dir), else ralph's cache folder (the
    temp folder is the last resort of `write`)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ralph"
    return [*_in_repository(cwd), cache]


def _in_repository(cwd: Path) -> list[Path]:
    try:
        return [layout.ralph_dir(git.common_dir(cwd).resolve())]
    except Exception:  # not a repository, or git itself is what broke: the log goes elsewhere
        return []


def _git_version(cwd: Path) -> str:
    try:
        return git.run(cwd, "--version", check=False).output.strip() or "unknown"
    except Exception as exc:  # git missing or broken: that is worth knowing too
        return f"unknown ({headline(exc)})"


def _ralph_version() -> str:
    try:
        return metadata.version("git-ralph")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _text(error: BaseException, cwd: Path, argv: list[str]) -> str:
    facts = {
        "ralph": _ralph_version(),
        "git": _git_version(cwd),
        "python": f"{' '.join(sys.version.split())} ({sys.executable})",
        "platform": platform.platform(),
        "command": shlex.join(argv),
        "folder": str(cwd),
    }
    when = datetime.now(UTC).isoformat(timespec="seconds")
    lines = [f"ralph crash log, {when}", "", *(f"{key:<10}{value}" for key, value in facts.items()), ""]
    return "\n".join(lines) + "\n" + "".join(traceback.format_exception(error))
