"""What `ralph run` does to its own process before any lap: secrets out of its environment
block, its memory closed to other processes, and every orphan of a lap adopted and ended.

/proc/<pid>/environ shows the environment a process was started with, whatever it changes
later, so ralph re-executes itself without the secrets and reads them back from an anonymous
file: they then live in its memory only. PR_SET_DUMPABLE 0 closes that memory (and environ)
to other processes of the same user. PR_SET_CHILD_SUBREAPER makes processes that leave a
lap's process group (setsid, a double fork, `env -i`) become ralph's children instead of
init's, so `proc` can find and end them whatever their environment says.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ralph.errors import RalphError
from ralph.isolation import orphans, proc

SECRETS_FD = "RALPH_SECRETS_FD"
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1


def harden(argv: list[str]) -> None:
    """Call first thing in `ralph run`; may replace the process (same pid) with a clean one."""
    if not _take_back_secrets():
        _reexec_without_secrets(argv)
    if _prctl(_PR_SET_DUMPABLE, 0) and _prctl(_PR_SET_CHILD_SUBREAPER, 1):
        orphans.adopt_orphans()


def _reexec_without_secrets(argv: list[str]) -> None:
    env = secrets_aside(dict(os.environ))
    if SECRETS_FD not in env:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # -P: the repository ralph runs in may hold a folder named ralph; only the installed one runs.
    os.execve(sys.executable, [sys.executable, "-P", "-m", "ralph", *argv], env)


def secrets_aside(env: dict[str, str]) -> dict[str, str]:
    """`env` without its secrets, which wait in an anonymous file named by SECRETS_FD for the
    ralph that gets this environment to take back (`harden`), inheriting the descriptor; `env`
    itself when it holds none (or the system has no anonymous files)."""
    secrets = {name: value for name, value in env.items() if proc.is_secret(name, value)}
    if not secrets or not hasattr(os, "memfd_create"):
        return env
    fd = os.memfd_create("ralph-secrets", 0)
    os.write(fd, json.dumps(secrets).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return dict({name: value for name, value in env.items() if name not in secrets}, **{SECRETS_FD: str(fd)})


def _take_back_secrets() -> bool:
    """In the re-executed ralph: the secrets back into os.environ (memory only, not environ)."""
    fd = os.environ.pop(SECRETS_FD, None)
    if fd is None:
        return False
    try:
        with os.fdopen(int(fd), "rb") as saved:
            os.environ.update(json.loads(saved.read()))
    except (OSError, ValueError) as exc:
        raise RalphError(f"{SECRETS_FD} is set but names no secrets ralph passed itself ({exc}) — unset it") from None
    return True


def end_with_parent(parent: int) -> None:
    """A slot of a parallel run ends, as after a Ctrl-C, when the ralph that started it dies
    (`kill -9` included): nothing of a run outlives it."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGINT)
    if os.getppid() != parent:  # it died before the line above
        raise KeyboardInterrupt


@contextmanager
def closed_while_running() -> Iterator[None]:
    """ralph.api's run, in its caller's process: that process's memory (its environment with the
    secrets too) closed to other processes of the user while the run lasts, and as it was after.
    Not the rest of `harden`: the process is the caller's to re-execute, and as a child subreaper
    ralph would reap the caller's own children. Sandboxed laps end all they started anyway."""
    before = _prctl_value(_PR_GET_DUMPABLE)
    closed = before is not None and _prctl(_PR_SET_DUMPABLE, 0)
    try:
        yield
    finally:
        if closed:
            _prctl(_PR_SET_DUMPABLE, before or 0)


def _prctl(option: int, value: int) -> bool:
    return _prctl_value(option, value) == 0


def _prctl_value(option: int, value: int = 0) -> int | None:
    """prctl's answer; None where there is no prctl or it refused."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        answer = int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0))
    except (OSError, AttributeError):
        return None
    return None if answer < 0 else answer
