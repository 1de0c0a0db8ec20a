"""A lap's tree made safe for ralph's own git, and the submodules in it read as data.

ralph's git runs outside the sandbox on files a lap's code wrote. What in them git would
follow (a `.git` leading elsewhere, a FIFO it would wait on for ever, a folder git never looks
into) is deleted first; a submodule's commit is read from its HEAD as plain files, never by
a git command inside it, whose git dir the lap writes.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ralph.isolation.files import PATH_MAX, regular_text, remove_path, walk

_GIT_READS = frozenset({".gitignore", ".gitattributes", ".gitmodules"})  # files git opens in the work tree


@dataclass(frozen=True)
class GitReads:
    """What the walk met of the files git reads in the tree as rules."""

    attributes: bool  # a `.gitattributes` anywhere git looks
    ignores: list[str]  # every `.gitignore` file, relative to the tree (git decides which are its rules)


def make_safe_for_git(tree: Path, lap_git: Path) -> GitReads:
    """What a lap's code may have left in tree/ that ralph's git must not meet, deleted:
    - a folder named `.git` below the top that is no repository: git never lists, stages or
      cleans what is in one, so a module there would reach the checks in no commit;
    - the `.git` of a repository (a submodule's, one the lap made) that leads outside tree/
      and git/, or through a file that is no regular one: git, reading its HEAD or refs,
      would wait on a FIFO for ever (the folder is then plain files to git, or, for a
      submodule, one not checked out: its gitlink stays);
    - a `.gitignore`, `.gitattributes` or `.gitmodules` that is no file (a FIFO), likewise;
    - whatever lies deeper than a path can name (PATH_MAX), which ralph cannot look into.
    A repository that stays is staged as a gitlink (the lap is red for one it made).
    Returns whether a `.gitattributes` is left anywhere git looks (what converts a file's bytes
    between the tree and its blob: eol, ident, encodings, filters), and where `.gitignore` files are."""
    top, within, attributes, ignores = str(tree), (tree, lap_git), False, []
    for folder, folders, files in walk(tree):
        # What ralph cannot name it cannot look at (git, from the top, may reach it): gone.
        beyond = _too_long(folder, (*folders, *files))
        for name in beyond:
            remove_path(Path(folder, name))
        folders[:] = [name for name in folders if name not in beyond]
        if folder != top and (".git" in folders or ".git" in files):
            found = Path(folder, ".git")
            layout = not found.is_dir() or all((found / name).exists() for name in ("HEAD", "objects", "refs"))
            if not layout or repository_head(Path(folder), within) is None:
                remove_path(found)
        for name in _GIT_READS.intersection(files):
            if not os.path.islink(os.path.join(folder, name)) and not os.path.isfile(os.path.join(folder, name)):
                remove_path(Path(folder, name))
        attributes = attributes or ".gitattributes" in files or ".gitattributes" in folders
        if ".gitignore" in files and os.path.lexists(os.path.join(folder, ".gitignore")):
            ignores.append(os.path.relpath(os.path.join(folder, ".gitignore"), top))
        folders[:] = [name for name in folders if name != ".git"]
    return GitReads(attributes, ignores)


def _too_long(folder: str, names: tuple[str, ...]) -> set[str]:
    """Those of `names` whose path in `folder` is too long to name (PATH_MAX bytes). A character
    takes at most 4 bytes, so only a long name is encoded: the walk meets every name in the
    tree twice a lap, and encoding each whole path was most of its time."""
    room = PATH_MAX - len(os.fsencode(folder)) - 1  # the bytes left for a name after `folder/`
    return {name for name in names if 4 * len(name) >= room and len(os.fsencode(name)) >= room}


def submodule_heads(tree: Path, lap_git: Path, gitlinks: list[str]) -> dict[str, str | None]:
    """The submodules checked out in `tree` (those of `gitlinks` with a folder there),
    each with the commit its HEAD names now (None: none can be read; the gitlink stays).

    `git add` would ask each submodule's own git whether it changed (`git status` there),
    which reads the submodule's git dir: the lap's to write (a clean filter, an fsmonitor
    command, an include there would run outside the sandbox). So ralph's `add` leaves
    submodules out and reads their HEAD itself, as data."""
    return {path: repository_head(tree / path, (tree, lap_git)) for path in gitlinks if _is_folder(tree / path)}


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def repository_head(folder: Path, within: tuple[Path, ...]) -> str | None:
    """The commit `folder`'s repository has checked out, read from its files as git would (a
    `.git` file naming the git dir, HEAD, a symbolic ref through loose refs or packed-refs),
    executing nothing. None when that leads nowhere, outside `within`, or through a file git
    would open that is no regular file (on a FIFO git, and ralph, would wait for ever)."""
    dot_git = folder / ".git"
    if os.path.isdir(dot_git):
        git_dir = Path(os.path.realpath(dot_git))
    else:
        named = _regular_text(dot_git)
        if named is None or not named.startswith("gitdir:"):
            return None
        git_dir = Path(os.path.realpath(folder / named.removeprefix("gitdir:").strip()))
    if not any(git_dir == top or top in git_dir.parents for top in within) or os.path.lexists(git_dir / "commondir"):
        return None
    read = {name: _regular_text(git_dir / name) for name in ("HEAD", "config", "packed-refs")}
    if any(text is None and os.path.lexists(git_dir / name) for name, text in read.items()):
        return None
    value = (read["HEAD"] or "").strip()
    for _ in range(5):  # git follows symbolic refs as deep
        if _OBJECT_ID.fullmatch(value):
            return value
        ref = value.removeprefix("ref:").strip()
        if not ref.startswith("refs/") or ".." in ref.split("/"):
            return None
        if os.path.lexists(git_dir / ref):
            value = (_regular_text(git_dir / ref) or "").strip()
        else:
            lines = (read["packed-refs"] or "").splitlines()
            value = next((line.split(" ", 1)[0] for line in lines if line.endswith(" " + ref)), "")
    return None


def _regular_text(path: Path) -> str | None:
    """A regular file's text (a link followed); None for anything else, or nothing."""
    return regular_text(path, 64 << 20, follow=True)
