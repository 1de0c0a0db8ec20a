"""Whether laps run sandboxed, and what a sandboxed command needs to see.

The sandbox itself, what bubblewrap is told for one phase, is ralph/isolation/jail.py: proc
runs commands in a jail, and this module runs bubblewrap through proc to see whether it works,
so the jail is apart from both.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path

from ralph.errors import RalphError
from ralph.isolation import as_made, proc, toolchains
from ralph.isolation.files import remove_path
from ralph.isolation.jail import BWRAP, Jail, bwrap, plain, system


def phase_jail(
    scratch: Path,
    chdir: Path,
    *,
    writable: tuple[Path, ...] = (),
    home: Path | None = None,
    network: bool = True,
    keep: tuple[Path, ...] = (),
    hide: tuple[Path, ...] = (),
    sockets: tuple[Path, ...] = (),
) -> Jail:
    """The sandbox of one phase, its own folders made anew in `scratch`: a /tmp, and a HOME unless
    `home` names one of the user's choosing (read-only but for `writable`). The toolchains' homes
    are set inside (the private HOME has none of them), and the files of theirs that hold a
    registry login read as empty. A lap's phases and `ralph doctor --agent` alike.

    `scratch` itself and its empty `blank` file are read-only inside, so they stay from one phase
    to the next; the two folders a phase can write stay only while they are empty and exactly as
    made (as_made.py), else they are made anew (a folder made and deleted costs milliseconds on a
    disk with slow discards, a few a lap)."""
    _keep_or_make(scratch, lambda info: stat.S_ISDIR(info.st_mode), lambda: scratch.mkdir(parents=True))
    for folder in (scratch / "tmp", scratch / "home"):
        if not _empty_as_made(folder):
            remove_path(folder)
            folder.mkdir()
            as_made.record(folder)
    _keep_or_make(scratch / "blank", _empty_file, (scratch / "blank").touch)
    private_home = () if home else (scratch / "home",)
    return Jail(
        (*writable, *private_home),
        scratch / "tmp",
        home or scratch / "home",
        network=network,
        chdir=chdir,
        keep=keep,
        hide=(*hide, *toolchains.logins(os.environ)),
        blank=scratch / "blank",
        setenv=tuple(toolchains.variables(os.environ).items()),
        sockets=sockets,
    )


def _keep_or_make(path: Path, kept: Callable[[os.stat_result], bool], make: Callable[[], None]) -> None:
    """`path` as it is if `kept` says it is what `make` made (never a link), else made anew."""
    try:
        if kept(os.lstat(path)):
            return
    except FileNotFoundError:
        pass
    remove_path(path)
    make()


def _empty_as_made(folder: Path) -> bool:
    try:
        return as_made.unchanged(folder) and not os.listdir(folder)
    except OSError:
        return False


def _empty_file(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_size == 0 and info.st_nlink == 1


def needed(*paths: Path, commands: tuple[str, ...] | list[str] = ()) -> tuple[Path, ...]:
    """What a sandboxed command needs to see: the given paths, the absolute paths its commands
    name, the toolchains (the folders on PATH and the programs the commands start, resolved, and
    the tools' homes: ralph/isolation/toolchains.py), Python's prefixes and ralph's own package (its
    pytest plugin, which every check loads, lies there: outside the venv when ralph is installed
    editable). Never HOME: a phase has its own."""
    # A program named by its path anywhere in a command (`mkdir -p out && /x/node_modules/.bin/jest`)
    # brings what it needs: its real file, its prefix or node_modules.
    named = [Path(word) for command in commands for word in words(command) if word.startswith("/")]
    named += [need for path in named for need in toolchains.program_needs(shlex.quote(str(path)), os.environ)]
    found = [
        *paths,
        *named,
        *(Path(entry) for entry in os.environ.get("PATH", "").split(os.pathsep) if entry),
        *toolchains.readable(os.environ, commands),
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(__file__).parents[1],
    ]
    return tuple(dict.fromkeys(plain(path) for path in found if path.is_absolute()))


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
        done = proc.run([bwrap(), *system(), "--", "/bin/true"], "/", timeout=30, sweep=False)
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


def missing_inside(command: str, env: Mapping[str, str], jail: Jail | None = None) -> str | None:
    """One line when the program `command` starts is found outside the sandbox but is not all
    there inside it (the program, its real file, its `#!` interpreter), naming the path and the
    fix; None when it is there, or is not found outside either (nothing the sandbox took).
    `jail`: the phase's sandbox; by default one that binds back what ralph binds for `command`
    run with `env`."""
    program = toolchains.first_program(command)
    needs = sorted(toolchains.program_needs(command, env), key=os.path.islink)  # a link's target named first
    if program is None or not needs or why_unavailable() is not None:
        return None
    probe = 'for path do [ -e "$path" ] || { echo "$path"; exit 3; }; done'
    with tempfile.TemporaryDirectory(prefix="ralph-probe-") as scratch:
        keep = (*needed(commands=[command]), *toolchains.readable(env, [command]))
        inside = jail or Jail((), Path(scratch), Path(scratch), keep=keep)
        done = proc.run(["/bin/sh", "-c", probe, "sh", *map(str, needs)], "/", env=dict(env), jail=inside, timeout=30)
    if done.exit_code != 3:  # there; or the sandbox itself failed, which is said elsewhere
        return None
    gone = (done.output.strip().splitlines() or [str(needs[0])])[-1]
    outside = shutil.which(program, path=env.get("PATH"))
    return (
        f"`{program}` is at {outside} outside the sandbox, but {gone} is not there inside it — "
        f"list {_readable_for(Path(gone), needs)} in `sandbox.readable` (ralph.yaml)"
    )


def _readable_for(gone: Path, needs: list[Path]) -> Path:
    """The folder to list for a path the sandbox lacks: the install prefix or package holding it."""
    holders = [path for path in needs if path in gone.parents and path.is_dir()]
    return min(holders, key=lambda path: len(path.parts)) if holders else gone
