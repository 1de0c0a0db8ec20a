"""Whether a file or folder ralph made is still as made: the same inode, mode, owner, extended
attributes (ACLs among them), inode flags and ctime as when ralph recorded it. What a phase left
untouched can so stay for the next one (a folder made and deleted costs milliseconds on a disk
with slow discards).

A lap cannot set a ctime back, but a file system keeps ctimes to a tick only (a jiffy, or a
second on some): an inode written, or deleted and made again on the same inode number, within the
tick ralph recorded it in shows the same ctime. So ctime is not trusted alone: everything the
next phase could tell apart is compared too, and a caller compares the content (a folder's
listing, a file's bytes)."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
from pathlib import Path

FS_IOC_GETFLAGS = 0x80086601  # chattr's flags (linux/fs.h, 64-bit)
_MADE: dict[Path, tuple] = {}


def record(path: Path) -> None:
    """`path` as ralph just made it."""
    _MADE[path] = _identity(path)


def unchanged(path: Path) -> bool:
    """`path` is as recorded (False when it is gone or cannot be read)."""
    try:
        return path in _MADE and _identity(path) == _MADE[path]
    except OSError:
        return False


def _identity(path: Path) -> tuple:
    info = os.lstat(path)
    return (
        *(info.st_dev, info.st_ino, info.st_mode, info.st_uid, info.st_gid, info.st_ctime_ns),
        _attributes(path),
        _flags(path) if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode) else None,
    )


def _attributes(path: Path) -> tuple[tuple[str, bytes], ...]:
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:  # a file system without them
        if exc.errno != errno.ENOTSUP:
            raise
        return ()
    return tuple(sorted((name, os.getxattr(path, name, follow_symlinks=False)) for name in names))


def _flags(path: Path) -> int | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        return struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))[:4])[0]
    except OSError as exc:  # a file system without them
        if exc.errno not in (errno.ENOTTY, errno.ENOTSUP, errno.EINVAL):
            raise
        return None
    finally:
        os.close(fd)
