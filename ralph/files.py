"""Deleting what ralph made, safely: never through a link, never stopped by a read-only folder."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path


def remove_path(path: Path) -> None:
    """Delete a file or folder ralph made, never following a link: a link is removed, not its target."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        # rmtree removes links inside a folder, never what they point at. A folder left read-only
        # (Go's module cache, a lap's chmod -R a-w) is made writable, never a link's target.
        try:
            shutil.rmtree(path, onerror=_writable_and_again)
        except RecursionError:  # folders nested deeper than Python recurses: a lap's, on purpose
            _remove_deep(path)
    else:
        try:
            os.unlink(path)
        except PermissionError as error:
            _writable_and_again(os.unlink, str(path), error)


def _writable_and_again(function: Callable[..., object], path: str, _error: object) -> None:
    parent = os.path.dirname(path)
    if not os.path.islink(parent):
        os.chmod(parent, stat.S_IRWXU)
    if function is os.rmdir or function is os.unlink:
        function(path)
    elif function is os.scandir or function is os.open:  # a folder it could not list
        os.chmod(path, stat.S_IRWXU)
        shutil.rmtree(path, onerror=_writable_and_again)


def _remove_deep(path: Path) -> None:
    """rmtree without recursion: the folders' modes first (unreadable ones), then deepest first."""
    make_usable(path)
    folders = [str(path)]
    for folder, _, _ in walk(path):
        folders.append(folder)
    for folder in reversed(folders):
        for entry in os.scandir(folder) if os.path.isdir(folder) else ():
            if not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.path)
        if os.path.isdir(folder):
            os.rmdir(folder)


def walk(top: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk, top-down, links not followed, without recursion (a tree may be nested deeper than
    Python recurses), and making each folder it cannot list readable to its owner (a lap's chmod)."""
    stack = [str(top)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except PermissionError:
            os.chmod(folder, stat.S_IRWXU)
            entries = list(os.scandir(folder))
        except OSError:
            continue
        folders = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
        yield folder, folders, [entry.name for entry in entries if not entry.is_dir(follow_symlinks=False)]
        stack.extend(os.path.join(folder, name) for name in reversed(folders))


def make_usable(top: Path) -> None:
    """Every folder under `top` readable, writable and searchable by its owner: a lap's chmod
    must not hide files from git's staging and cleaning, nor stop them."""
    for folder, _, _ in walk(top):
        mode = os.lstat(folder).st_mode
        if mode & stat.S_IRWXU != stat.S_IRWXU:
            os.chmod(folder, mode | stat.S_IRWXU)


BYTECODE = (":(glob)**/*.py[co]", ":(glob)**/__pycache__/**")  # pathspecs of what Python may run in place of a source


def remove_bytecode(root: Path, untracked: list[str]) -> None:
    """Delete bytecode files (`untracked`: relative to `root`, found with BYTECODE) but those in
    virtualenvs (a folder with a pyvenv.cfg above them), node_modules and .git: a lap could
    leave bytecode that Python (and pytest, for rewritten test modules) would run in place of a
    source it trusts as current. Committed bytecode is no lap's to leave: it is not untracked."""
    spared: dict[Path, bool] = {}

    def in_environment(folder: Path) -> bool:
        if folder not in spared:
            spared[folder] = folder != root and (
                folder.name in ("node_modules", ".git")
                or (folder / "pyvenv.cfg").is_file()
                or in_environment(folder.parent)
            )
        return spared[folder]

    for path in untracked:
        if not in_environment((root / path).parent):
            remove_path(root / path)
