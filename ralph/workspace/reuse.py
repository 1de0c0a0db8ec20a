"""A workspace outlives its run: released at the run's end, taken over by the next run of the
same repository, so the first checkout writes only the files that differ, and no run ends by
deleting a tree of 100,000 files on the user's time.

A released workspace waits in workspaces/idle/<id>/ (places.py), the newest KEEP_IDLE kept. What
is trusted of it: its folders, if still real folders, and ralph's index, if its sha256 is the one
KEPT wrote down at the release, outside everything a lap may write (tree/, git/, scratch/). The
files are judged by that index as between laps: any file written since has a new ctime, which no
lap can set back, and is written anew from its blob. Its untracked files are all deleted
(Workspace.create), and setup runs again.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from ralph.isolation.files import remove_path
from ralph.workspace.places import idle_root

KEEP_IDLE = 4  # released workspaces kept a repository, the newest: a --parallel run's slots reuse theirs
KEPT = "kept"  # in a released workspace: the commit its tree holds and its index's sha256


def claim(root: Path, common_dir: Path) -> bool:
    """Whether `root` holds a workspace to reuse: this run's own (a killed process left it),
    else one an ended run of this repository released, moved there (one rename: of two runs
    starting at once, one gets it)."""
    if os.path.lexists(root):
        return True
    idle = idle_root(common_dir)
    try:
        waiting = sorted(os.listdir(idle), reverse=True)  # the newest first
    except FileNotFoundError:
        return False
    for name in waiting:
        try:
            os.rename(idle / name, root)
            return True
        except OSError:  # another run took it
            continue
    return False


def vouched(root: Path, index: Path) -> tuple[str, bytes, int] | None:
    """What a released workspace at `root` vouches for: the commit its tree holds, and its index
    (bytes, mtime) if the sha256 KEPT wrote down at the release is still the index's. KEPT is
    then gone: a second claim of it (another crash) starts anew."""
    try:
        commit, digest = (root / KEPT).read_text().split()
    except (OSError, ValueError):
        return None
    remove_path(root / KEPT)
    try:
        data, mtime = index.read_bytes(), os.stat(index).st_mtime_ns
    except OSError:
        return None
    return (commit, data, mtime) if hashlib.sha256(data).hexdigest() == digest else None


def keep(root: Path, common_dir: Path, commit: str, index: bytes) -> bool:
    """Release the workspace at `root`, its tree at `commit` as `index` says: moved among the
    repository's idle ones, the newest KEEP_IDLE kept. False: it could not be moved."""
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        return False
    (root / KEPT).write_text(f"{commit} {hashlib.sha256(index).hexdigest()}\n")
    idle = idle_root(common_dir)
    idle.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(root, idle / f"{time.time_ns()}")
    except OSError:
        return False
    for extra in sorted(os.listdir(idle), reverse=True)[KEEP_IDLE:]:
        remove_path(idle / extra)
    return True
