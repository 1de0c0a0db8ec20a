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
import time
from dataclasses import dataclass
from pathlib import Path

from ralph.isolation.files import PATH_MAX, listing, regular_text, remove_path

_GIT_READS = frozenset({".gitignore", ".gitattributes", ".gitmodules"})  # files git opens in the work tree


@dataclass(frozen=True)
class GitReads:
    """What the walk met of the files git reads in the tree as rules."""

    attributes: bool  # a `.gitattributes` anywhere git looks
    ignores: list[str]  # every `.gitignore` file, relative to the tree (git decides which are its rules)


@dataclass(frozen=True)
class Folder:
    """One folder as the safety walk left it."""

    stamp: tuple[int, int, int] | None  # device, inode and ctime, taken before it was listed
    folders: tuple[str, ...]  # the folders to walk into (no `.git`)
    repository: bool  # a `.git` is in it (below the top): looked at again every walk
    attributes: bool  # a `.gitattributes` is in it
    ignore: str | None  # its `.gitignore`, relative to the tree


class Walked:
    """What the last safety walk of a tree found in each folder, kept for the next. A folder
    whose device, inode and ctime are still the same holds the same entries: adding, removing
    or renaming one sets the folder's ctime, as a chmod does, and no process can set a ctime
    (only the clock moves it). Such a folder is not listed again; only a repository's `.git`
    in it, whose files change without it, is looked at again. A folder changed in the last
    second before a walk is listed again at the next one: the file system's clock is coarse,
    and a change in the same tick as the listing may leave the ctime as it was. Nothing is kept
    for a tree on a file system not known to keep ctimes so (a FUSE or network one)."""

    SETTLED_NS = 1_000_000_000  # far longer than a tick of the file system's clock (1 to 10 ms)
    # Local Linux file systems that set a folder's ctime on every change to it.
    KEEPING = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "bcachefs", "zfs", "tmpfs", "overlay"})

    def __init__(self, tree: Path) -> None:
        self.kept = file_system(tree) in Walked.KEEPING
        self.folders: dict[str, Folder] = {}


def file_system(path: Path) -> str:
    """The type of the file system `path` is on, as /proc/self/mountinfo names it ("" unknown):
    that of the last mount of the longest mount point above it."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    real, found, kind = os.path.realpath(path), "", ""
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 10 or "-" not in fields[6:]:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda code: chr(int(code[1], 8)), fields[4])  # \040: a space
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(found):
            found, kind = point, fields[fields.index("-", 6) + 1]
    return kind


def make_safe_for_git(tree: Path, lap_git: Path, walked: Walked) -> GitReads:
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
    between the tree and its blob: eol, ident, encodings, filters), and where `.gitignore` files are.
    Folders unchanged since the last walk (`walked`) are not listed again."""
    top, within = str(tree), (tree, lap_git)
    settled = time.time_ns() - Walked.SETTLED_NS  # a folder whose ctime is older changes it if changed again
    found: dict[str, Folder] = {}
    attributes, ignores = False, []
    stack = [top]
    while stack:
        path = stack.pop()
        stamp = _stamp(path)
        folder = walked.folders.get(path)
        if folder is None or stamp is None or folder.stamp != stamp:
            folder = _made_safe(path, stamp, top, within)
            if folder is None:
                continue
        elif folder.repository:
            _keep_only_a_repository(Path(path), within)
        if walked.kept and stamp is not None and stamp[2] < settled:
            found[path] = folder
        attributes = attributes or folder.attributes
        if folder.ignore is not None:
            ignores.append(folder.ignore)
        stack.extend(os.path.join(path, name) for name in reversed(folder.folders))
    walked.folders = found
    return GitReads(attributes, ignores)


def _made_safe(path: str, stamp: tuple[int, int, int] | None, top: str, within: tuple[Path, ...]) -> Folder | None:
    """One folder listed and made safe (make_safe_for_git); None if it cannot be listed."""
    listed = listing(path)
    if listed is None:
        return None
    folders, files = listed
    # What ralph cannot name it cannot look at (git, from the top, may reach it): gone.
    beyond = _too_long(path, (*folders, *files))
    for name in beyond:
        remove_path(Path(path, name))
    repository = path != top and (".git" in folders or ".git" in files)
    if repository:
        _keep_only_a_repository(Path(path), within)
    for name in _GIT_READS.intersection(files):
        if not os.path.islink(os.path.join(path, name)) and not os.path.isfile(os.path.join(path, name)):
            remove_path(Path(path, name))
    ignore = None
    if ".gitignore" in files and os.path.lexists(os.path.join(path, ".gitignore")):
        ignore = os.path.relpath(os.path.join(path, ".gitignore"), top)
    return Folder(
        stamp,
        tuple(name for name in folders if name not in beyond and name != ".git"),
        repository,
        ".gitattributes" in files or ".gitattributes" in folders,
        ignore,
    )


def _keep_only_a_repository(folder: Path, within: tuple[Path, ...]) -> None:
    """`folder`'s `.git` deleted unless it is a repository whose HEAD leads within `within`."""
    found = folder / ".git"
    layout = not found.is_dir() or all((found / name).exists() for name in ("HEAD", "objects", "refs"))
    if not layout or repository_head(folder, within) is None:
        remove_path(found)


def _stamp(path: str) -> tuple[int, int, int] | None:
    """A folder's device, inode and ctime; None for what is no folder now."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_ctime_ns) if stat.S_ISDIR(info.st_mode) else None


def _too_long(folder: str, names: tuple[str, ...]) -> set[str]:
    """Those of `names` whose path in `folder` is too long to name (PATH_MAX bytes). A character
    takes at most 4 bytes, so only a long name is encoded: the walk meets every name in the
    tree twice a lap, and encoding each whole path was most of its time."""
    room = PATH_MAX - len(os.fsencode(folder)) - 1  # the bytes left for a name after `folder/`
    if 4 * max(map(len, names), default=0) < room:
        return set()
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
        named = _regular_text(dot_git, within)
        if named is None or not named.startswith("gitdir:"):
            return None
        git_dir = Path(os.path.realpath(folder / named.removeprefix("gitdir:").strip()))
    if not any(git_dir == top or top in git_dir.parents for top in within) or os.path.lexists(git_dir / "commondir"):
        return None
    read = {name: _regular_text(git_dir / name, within) for name in ("HEAD", "config", "packed-refs")}
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
            value = (_regular_text(git_dir / ref, within) or "").strip()
        else:
            lines = (read["packed-refs"] or "").splitlines()
            value = next((line.split(" ", 1)[0] for line in lines if line.endswith(" " + ref)), "")
    return None


def _regular_text(path: Path, within: tuple[Path, ...]) -> str | None:
    """A regular file's text, through links only while they stay within `within` (the tree and the
    lap's git dir); None for anything else, or nothing: a lap's link to /proc/self/mem, or to a
    file of the user's, is read as no file."""
    real = Path(os.path.realpath(path))
    if not any(real == top or top in real.parents for top in within):
        return None
    return regular_text(real, 64 << 20)
