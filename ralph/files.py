"""Deleting what ralph made, safely: never through a link, never stopped by a read-only folder."""

from __future__ import annotations

import os
import shutil
import stat
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
        os.unlink(path)


def _writable_and_again(function, path: str, _error) -> None:
    parent = os.path.dirname(path)
    if not os.path.islink(parent):
        os.chmod(parent, stat.S_IRWXU)
    if function is os.rmdir or function is os.unlink:
        function(path)
    elif function is os.scandir or function is os.open:  # a folder it could not list
        os.chmod(path, stat.S_IRWXU)
        shutil.rmtree(path, onerror=_writable_and_again)


def remove_bytecode(root: Path) -> None:
    """Every `__pycache__` folder and `.pyc` file under `root`, except in virtualenvs (a folder
    with a pyvenv.cfg), node_modules and .git: a lap could leave bytecode that Python (and
    pytest, for rewritten test modules) would run in place of a source it trusts as current."""
    for folder, folders, files in os.walk(root):
        if "pyvenv.cfg" in files:
            folders.clear()
            continue
        for name in [name for name in folders if name in (".git", "node_modules", "__pycache__")]:
            folders.remove(name)
            if name == "__pycache__":
                remove_path(Path(folder, name))
        for name in files:
            if name.endswith((".pyc", ".pyo")):
                remove_path(Path(folder, name))
