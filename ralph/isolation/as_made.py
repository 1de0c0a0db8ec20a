"""Whether a file or folder ralph made is still exactly as made: the same inode, mode and ctime
as when ralph recorded it. A lap cannot set a ctime back, and whatever it does to the very
inode moves it (a write, an entry added or deleted, a chmod, a chattr, an xattr, a link); a
path made anew, even on the inode number just freed (ext4 hands it out again at once), has
another ctime. What a phase left untouched can so stay for the next one: a folder made and
deleted costs milliseconds on a disk with slow discards."""

from __future__ import annotations

import errno
import os
from pathlib import Path

_MADE: dict[Path, tuple[int, int, int, int]] = {}  # by path: device, inode, mode, ctime


def record(path: Path) -> None:
    """`path` as ralph just made it."""
    info = os.lstat(path)
    _MADE[path] = (info.st_dev, info.st_ino, info.st_mode, info.st_ctime_ns)


def unchanged(path: Path) -> bool:
    """`path` is the very one recorded, untouched since, and carries no ACL (an error: missing)."""
    info = os.lstat(path)
    if _MADE.get(path) != (info.st_dev, info.st_ino, info.st_mode, info.st_ctime_ns):
        return False
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:  # a file system without them
        if exc.errno != errno.ENOTSUP:
            raise
        names = []
    return not any(name.startswith("system.") for name in names)  # (POSIX ACLs are system.posix_acl_*)
