"""Files' texts at commits, read through one long-lived `git cat-file --batch` a repository
instead of a git process a file: a lap reads TODO.md, PROGRESS.md and .gitmodules at commits
that did not exist a moment before, each a process of its own otherwise (bench/RESULTS.md).

The reader is ralph's child: it ends when ralph closes its input, at exit, or when ralph does.
A name git's batch format cannot carry (a line break in it), an answer that does not come in
time, or a reader that died: the caller reads the file the one-process way (git.show_file).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import subprocess
import threading
import time
from pathlib import Path

from ralph.isolation import proc

_TIMEOUT = 300.0  # seconds, as a single git command of the door's


class _Reader:
    """One `git cat-file --batch` in one repository, and what it has said but not yet been read."""

    def __init__(self, cwd: Path, command: list[str]) -> None:
        self.child = proc.serve(command, cwd, proc.clean_env())
        self.pending = b""

    def ask(self, name: str, kind: bytes) -> bytes | None:
        """The object `name` (`<commit>:<path>`) of type `kind` holds; None if that is no such
        object (missing, a folder where a blob is asked for)."""
        assert self.child.stdin is not None
        self.child.stdin.write(name.encode("utf-8", "surrogateescape") + b"\n")
        self.child.stdin.flush()
        deadline = time.monotonic() + _TIMEOUT
        header = self._line(deadline).split(b" ")
        if len(header) != 3 or not header[2].isdigit():  # `<name> missing`, `ambiguous`
            return None
        data = self._exactly(int(header[2]) + 1, deadline)[:-1]  # (and the line break after it)
        return data if header[1] == kind else None

    def _line(self, deadline: float) -> bytes:
        while b"\n" not in self.pending:
            self._more(deadline)
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def _exactly(self, size: int, deadline: float) -> bytes:
        while len(self.pending) < size:
            self._more(deadline)
        data, self.pending = self.pending[:size], self.pending[size:]
        return data

    def _more(self, deadline: float) -> None:
        assert self.child.stdout is not None
        fd = self.child.stdout.fileno()
        if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise TimeoutError("git cat-file --batch did not answer")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise BrokenPipeError("git cat-file --batch ended")
        self.pending += chunk

    def close(self) -> None:
        """Its pipes closed (git ends at the end of its input), killed if not ended within a second."""
        for stream in (self.child.stdin, self.child.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        try:
            self.child.wait(1)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


_READERS: dict[Path, _Reader] = {}
_LOCK = threading.Lock()


def read(cwd: Path, command: list[str], name: str, kind: bytes = b"blob") -> bytes | None | Exception:
    """What `name` holds in the repository at `cwd` (None: no object of type `kind` there), or the
    exception that kept the reader from saying (its reader is then closed: the next read starts
    another)."""
    if "\n" in name or "\r" in name or "\0" in name:
        return ValueError("a line break or NUL in the name")
    with _LOCK:
        reader = _READERS.get(cwd)
        try:
            if reader is None:
                reader = _READERS[cwd] = _Reader(cwd, command)
            return reader.ask(name, kind)
        except (OSError, ValueError, TimeoutError) as failed:
            _READERS.pop(cwd, None)
            if reader is not None:
                reader.close()
            return failed


@atexit.register
def close_all() -> None:
    with _LOCK:
        for reader in _READERS.values():
            reader.close()
        _READERS.clear()


def _forget_after_fork() -> None:
    """In a forked child (a slot of a parallel run): the parent's readers are the parent's. Their
    pipes closed here (not the readers), a lock the fork may have caught held made anew."""
    global _LOCK
    _LOCK = threading.Lock()
    for reader in _READERS.values():
        for stream in (reader.child.stdin, reader.child.stdout):
            if stream is not None:
                stream.close()
    _READERS.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
