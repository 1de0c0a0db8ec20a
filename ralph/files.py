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
