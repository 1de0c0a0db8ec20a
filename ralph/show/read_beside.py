"""Files a command reads beside git (a lap's transcript, its output log), noted as it reads them:
what `ralph show` printed is kept (ralph/commands/answers.py) only while each is as it was."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

Stat = list[int] | None  # what a file is (or None: no file there), as far as a read of it can tell
Noted = list[tuple[str, Stat]]

_noted: Noted | None = None  # while a command's answer may be kept


def watch(path: Path) -> None:
    """The command is about to read `path`, or to find it missing: noted with what it is now (noted
    before the read, compared again after it)."""
    if _noted is not None:
        _noted.append((str(path), stat(str(path))))


@contextmanager
def noting() -> Iterator[Noted]:
    """The files the command reads meanwhile, as `watch` notes them."""
    global _noted
    _noted = []
    try:
        yield _noted
    finally:
        _noted = None


def stat(path: str) -> Stat:
    """Its kind, size, times and inode: a write changes its size or its times, a replacement its inode."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return [found.st_mode, found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino]
