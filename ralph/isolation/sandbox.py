"""Whether laps run sandboxed, and what a sandboxed command needs to see.

The sandbox itself, what bubblewrap is told for one phase, is ralph/isolation/jail.py: proc
runs commands in a jail, and this module runs bubblewrap through proc to see whether it works,
so the jail is apart from both.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from functools import cache
from pathlib import Path

from ralph.errors import RalphError
from ralph.isolation import proc
from ralph.isolation.jail import BASE, BWRAP, bwrap


def needed(*paths: Path, commands: tuple[str, ...] | list[str] = ()) -> tuple[Path, ...]:
    """What a sandboxed command needs to see: the given paths, the absolute paths its commands
    name, the folders on PATH, Python's prefixes, ralph's own package (its pytest plugin, which
    every check loads, lies there: outside the venv when ralph is installed editable) and HOME."""
    named = [Path(word) for command in commands for word in words(command) if word.startswith("/")]
    found = [
        *paths,
        *named,
        *(Path(entry) for entry in os.environ.get("PATH", "").split(os.pathsep) if entry),
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(__file__).parents[1],
        Path.home(),
    ]
    return tuple(dict.fromkeys(Path(os.path.abspath(path)) for path in found if path.is_absolute()))


def words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


@cache
def why_unavailable() -> str | None:
    """None when bubblewrap works on this machine, else what is missing (one line)."""
    if shutil.which(BWRAP) is None:
        return "bubblewrap (`bwrap`) is not installed — apt/dnf install bubblewrap"
    try:
        done = proc.run([bwrap(), *BASE, "--", "/bin/true"], "/", timeout=30, sweep=False)
    except OSError as exc:
        return f"bubblewrap did not start: {exc}"
    if not done.ok:
        said = (done.output.strip().splitlines() or [f"exit {done.exit_code}"])[-1]
        return f"bubblewrap cannot make a sandbox here: {said} (unprivileged user namespaces may be off)"
    return None


def decide(mode: str) -> bool:
    """Whether laps run sandboxed, for a `sandbox.mode`; `required` without bubblewrap is an error."""
    if mode == "off":
        return False
    missing = why_unavailable()
    if missing is None:
        return True
    if mode == "required":
        raise RalphError(f"sandbox: required, but {missing}")
    return False


def refuse_unsafe_writable(paths: list[Path], protected: list[Path]) -> None:
    """A writable path must exist, and may not hold (or be inside) what the sandbox protects."""
    for path in paths:
        if not os.path.lexists(path):
            raise RalphError(f"sandbox.writable: {path} does not exist — create it first (a file or a folder)")
        for guarded in protected:
            if path == guarded or path in guarded.parents or guarded in path.parents:
                raise RalphError(
                    f"sandbox.writable: {path} would make {guarded} writable to laps — "
                    "list a folder that holds neither the repository nor ralph's workspace"
                )
