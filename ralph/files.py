"""Deleting what ralph made, safely: never through a link, never stopped by a read-only folder."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
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
        shutil.rmtree(path, onerror=_writable_and_again)
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


def remove_bytecode(root: Path, keep: Callable[[], set[str]]) -> None:
    """Every `.pyc` file under `root`, in `__pycache__` folders or not, but those at the paths
    `keep()` gives (committed ones, relative to `root`; asked only if there is bytecode) and
    those in virtualenvs (a folder with a pyvenv.cfg), node_modules and .git: a lap could leave
    bytecode that Python (and pytest, for rewritten test modules) would run in place of a
    source it trusts as current."""
    found = []
    for folder, folders, files in os.walk(root):
        if "pyvenv.cfg" in files:
            folders.clear()
            continue
        folders[:] = [name for name in folders if name not in (".git", "node_modules")]
        cache = os.path.basename(folder) == "__pycache__"
        found += [Path(folder, name) for name in files if cache or name.endswith((".pyc", ".pyo"))]
    kept = keep() if found else set()
    for path in found:
        if path.relative_to(root).as_posix() not in kept:
            remove_path(path)
