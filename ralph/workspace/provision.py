"""What a lap's tree holds beyond the commit: the user's untracked files that `copy` names,
and what the setup commands made (a venv, a build), which no lap commit holds and no clean
between laps removes, and which `strict` (the default) knows by their stat data.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ralph.errors import RalphError
from ralph.isolation.files import remove_bytecode, remove_path, walk
from ralph.workspace.own_git import OwnGit


class SetupFailed(RalphError):
    """A setup command failed: on the base commit the run cannot start; on a lap's, it is red."""

    def __init__(self, message: str, output: str):
        super().__init__(f"{message}; its output ends:\n{output.strip()}" if output.strip() else message)
        self.reason, self.output = message, output


class CopyFailed(RalphError):
    """The commit leaves no room for a file `copy` names (a file where its folder should be)."""


@dataclass
class Provision:
    """The untracked paths of a workspace's tree that are the user's or setup's, and when
    setup last ran."""

    own: OwnGit  # ralph's git on the tree
    # Untracked paths that are the user's (`copy`) or setup's (ignored or not): never staged,
    # never cleaned but by `Workspace.empty`.
    copied: tuple[str, ...] = ()
    setup_made: tuple[str, ...] = ()
    # For `strict`: the untracked files setup made, each by its stat data; before the checks
    # every other untracked file is deleted.
    trusted: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # What the base commit's own code left beside setup's before the first lap (the baseline's
    # checks: a build's dependencies), by stat data: kept while no lap changed it. None: not yet known.
    base_made: dict[str, tuple[int, ...]] | None = None
    setup_at: str | None = None  # the commit setup last ran on; None: not since the tree was emptied
    setup_for_lap: bool = False  # ... before a lap's checks, and that lap has not become the green commit

    @property
    def kept(self) -> tuple[str, ...]:
        return (*self.copied, *self.setup_made)

    def forget(self) -> None:
        """What setup made is gone, or no longer trusted: it runs again before it is needed."""
        self.trusted, self.setup_at, self.setup_made, self.base_made = {}, None, (), {}

    def setup_ran(self, commit: str, made: list[str], *, for_lap: bool, remember: bool) -> None:
        """Setup ran to its end on `commit` and made `made` (untracked paths); with `remember`,
        everything untracked now is trusted as setup's (strict)."""
        self.setup_made = tuple(dict.fromkeys([*self.setup_made, *made]))
        self.setup_at, self.setup_for_lap = commit, for_lap
        if remember:
            self.trusted = self.untracked()

    def copy_in(self, top: Path, paths: list[str]) -> None:
        """The user's untracked files named by `copy`, copied anew (whatever a lap did to them);
        never written through a link a lap left, nor outside tree/."""
        for path in paths:
            source, target = top / path, self.own.tree / path
            if not os.path.exists(source):
                raise RalphError(f"copy: {path} is not in your work tree ({top}) — create it or remove it from copy")
            if not _real_folders(self.own.tree, Path(path).parent):
                raise CopyFailed(f"copy: {path} cannot be copied in: a folder on its way is a file or a link")
            remove_path(target)
            if os.path.isdir(source):
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target)
        self.copied = tuple(paths)

    def needs_setup(self, commit: str, inputs: list[str], *, for_checks: bool) -> bool:
        """Whether setup must run for `commit`: never run in this tree; at a lap's start, last run
        for a lap that did not become this commit (a red lap's own environment); or a file it
        installs from differs from the commit it last ran on."""
        if self.setup_at is None:
            return True
        if self.setup_at == commit:
            self.setup_for_lap = self.setup_for_lap and for_checks  # at a lap's start: it is green's
            return False
        if self.setup_for_lap and not for_checks:
            return True
        specs = [_input_spec(pattern) for pattern in inputs]
        if not specs:
            return False
        return bool(
            self.own.run("diff", "--name-only", "--no-renames", self.setup_at, commit, "--", *specs).output.strip()
        )

    def untracked(self) -> dict[str, tuple[int, ...]]:
        """Every file and folder in tree/ that the last checkout did not write (ignored, `kept`,
        a lap's), with the stat data that shows a file's change: ctime, which no lap can set
        back (a folder: what it is, not its times, which any file made in it changes)."""
        found: dict[str, tuple[int, ...]] = {}
        for entry in self.own.untracked("--directory"):
            top = os.path.join(self.own.tree, entry.rstrip("/"))
            walked = walk(Path(top)) if entry.endswith("/") else [(os.path.dirname(top), [], [os.path.basename(top)])]
            if entry.endswith("/"):
                found[entry.rstrip("/")] = _identity_of(top, folder=True)
            for folder, folders, files in walked:
                for name in folders:
                    path = os.path.join(folder, name)
                    found[os.path.relpath(path, self.own.tree)] = _identity_of(path, folder=not os.path.islink(path))
                for name in files:
                    path = os.path.join(folder, name)
                    found[os.path.relpath(path, self.own.tree)] = _identity_of(path, folder=False)
        return found

    def note_base_made(self) -> None:
        """At the first lap's start, before anything of a lap has run in this tree: what is untracked
        beyond setup's was made by the base commit's own code."""
        if self.base_made is None:
            self.base_made = {path: info for path, info in self.untracked().items() if path not in self.trusted}

    def remove_untrusted(self, *, bytecode: bool = False) -> tuple[list[str], list[str]]:
        """Delete the untracked files and folders neither setup nor the base commit's code made
        (`base_made`: only while unchanged), and with `bytecode` what is left of bytecode Python
        could run in place of a source; returns the untrusted ones (a folder, not also what was
        in it), and those setup made that were changed or deleted since (which cannot be put
        back: the caller empties the tree and sets it up again), as names fit to show (bytes
        that are no UTF-8 replaced). Once `base_made` is known this deletes all `git clean`
        would, and more: a checkout needs no clean of its own (Workspace.checkout)."""
        now = {path: info for path, info in self.untracked().items() if not under(path, self.copied)}
        base_made = self.base_made or {}
        untrusted = sorted(path for path in now if path not in self.trusted and base_made.get(path) != now[path])
        for path in untrusted:
            remove_path(self.own.tree / path)
        gone = set(untrusted)
        if bytecode:
            left = [path for path, info in now.items() if path not in gone and _bytecode(info, path)]
            remove_bytecode(self.own.tree, left, made=lambda path: path in now and path not in gone)
        if self.base_made is not None:
            self.base_made = {path: info for path, info in base_made.items() if path not in gone}
        changed = sorted(
            path for path, info in self.trusted.items() if now.get(path) != info and not under(path, self.copied)
        )
        tops = [path for path in untrusted if os.path.dirname(path) not in gone]
        return [_shown(path) for path in tops], [_shown(path) for path in changed]


def _bytecode(info: tuple[int, ...], path: str) -> bool:
    """Whether an untracked file (not a folder: its identity has two fields) is what
    files.BYTECODE names: a `.pyc` or `.pyo`, or anything in a `__pycache__` folder."""
    return len(info) != 2 and (path.endswith((".pyc", ".pyo")) or "/__pycache__/" in f"/{path}")


def under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == folder or path.startswith(folder + "/") for folder in folders)


def _input_spec(pattern: str) -> str:
    """A `setup_inputs` glob as a pathspec: `/x` and `a/x` from the top, `x` at any depth."""
    if pattern.startswith("/"):
        return f":(glob){pattern.lstrip('/')}"
    return f":(glob){pattern}" if "/" in pattern else f":(glob)**/{pattern}"


def _shown(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "replace")


def _identity_of(path: str, *, folder: bool) -> tuple[int, ...]:
    try:
        info = os.lstat(path)
    except OSError:
        return ()
    if folder:
        return (info.st_mode, info.st_ino)
    return (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def _real_folders(root: Path, relative: Path) -> bool:
    """Make the folders of `relative` below `root`; False if one on the way is a link or a file."""
    folder = root
    for part in relative.parts:
        folder = folder / part
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return False
        except FileNotFoundError:
            folder.mkdir()
    return True
