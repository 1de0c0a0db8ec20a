"""A lap's own ignore rules, kept from hiding files from its commit.

A `.gitignore` the lap added or changed could hide a module its code imports, a venv or a build
it made: such files would be in no commit, yet the checks would find them in the tree. So what
the lap's rules hide and the checked-out commit's do not is deleted before staging; the rules
themselves are committed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ralph.isolation.files import remove_path
from ralph.isolation.git_syntax import unquoted
from ralph.workspace.own_git import OwnGit
from ralph.workspace.provision import under

_NAMED = 200  # .gitignore files named to git one by one, at most


def remove_what_its_own_rules_hide(own: OwnGit, aside: Path, kept: tuple[str, ...], ignores: list[str]) -> None:
    """Delete what the lap's own ignore rules (a new .gitignore, a line added to one) hide and
    the checked-out commit's do not: a module its code imports, a venv or a build it made, a
    tool's cache that ignores itself (pytest's, mypy's). Such files would be in no commit, yet
    the checks would find them in the tree; the rules themselves are committed. `ignores`: every
    `.gitignore` in the tree now (safe_tree's walk)."""
    rules = _lap_rules(own, kept, ignores)
    if not rules:
        return
    seen_by_lap = set(own.untracked("--exclude-standard"))
    remove_path(aside)
    aside.mkdir()
    for number, path in enumerate(rules):
        if os.path.lexists(own.tree / path):
            os.rename(own.tree / path, aside / str(number))
    tracked = [path for path in rules if own.run("ls-files", "--", f":(literal){path}").output]
    try:
        if tracked:
            own.run("--literal-pathspecs", "checkout", "-f", "--", *tracked)
        seen_by_commit = set(own.untracked("--exclude-standard"))
    finally:
        for number, path in enumerate(rules):
            remove_path(own.tree / path)
            if os.path.lexists(aside / str(number)):
                os.rename(aside / str(number), own.tree / path)
        remove_path(aside)
    for path in sorted(seen_by_commit - seen_by_lap):
        if not under(path, kept):
            remove_path(own.tree / path)


def _lap_rules(own: OwnGit, kept: tuple[str, ...], ignores: list[str]) -> list[str]:
    """The `.gitignore` files the lap added, changed or deleted: plain files (or gone) in plain
    folders, none of setup's (a venv's own). Of those in the tree, git says which are untracked
    (named one by one, git lists only their folders, not the whole tree; a glob past _NAMED)."""
    named = [f":(literal){path}" for path in ignores] if len(ignores) <= _NAMED else [":(glob)**/.gitignore"]
    added = own.untracked("--", *named) if ignores else []
    listing = own.run(
        "-c", "core.quotePath=true", "diff", "--name-only", "--ignore-submodules=all", "--", ":(glob)**/.gitignore"
    ).output
    changed = [unquoted(line) for line in listing.splitlines() if line]
    return [path for path in dict.fromkeys([*added, *changed]) if not under(path, kept) and _plain(own.tree, path)]


def _plain(tree: Path, path: str) -> bool:
    """A regular file, or nothing, under folders none of which is a link (a lap's link to a
    folder elsewhere: ralph, unsandboxed, must not move files there)."""
    folder = tree
    for part in Path(path).parts[:-1]:
        folder = folder / part
        if not folder.is_dir() or folder.is_symlink():
            return False
    target = tree / path
    return not os.path.lexists(target) or (target.is_file() and not target.is_symlink())
