"""A slot started as a fork of the ralph that coordinates it, not as a new program.

`ralph run --slot K` as a new process spends about a second of CPU importing ralph before it
does anything, and a parallel run starts N of them at once on a machine that may have two
cores: most of a short run's start. A fork already has every module loaded. The child then
runs the very command a new process would (`python -m ralph` with the slot's arguments), in a
session of its own, with its output on a pipe, the coordinator's listeners forgotten and its
lock on the run let go of (the slot takes its own), and leaves by os._exit: nothing of the
coordinator's stack (its cleanups) ever runs in it. The secrets reach it as they reach a ralph
that re-executes itself (hardening.secrets_aside), so it has no reason to.

A lock another thread holds at the fork stays held in the child, forever. The child uses none
of what ralph's own daemon threads lock (the display's heartbeat, the relays of slots' lines,
the feeders of commands' input): it writes through stdout and stderr objects of its own and
makes its own consoles. A thread that is no daemon is work ralph waits for, of a kind this
does not know: then the caller starts a new process instead (`can_fork`).
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import IO, NoReturn

from ralph.isolation import hardening
from ralph.show import events

WAIT_STEP = 0.02  # seconds between looks at a forked slot waited for with a timeout


class Forked:
    """A forked slot as the coordinator supervises it: what `subprocess.Popen` offers of it."""

    def __init__(self, pid: int, stdout: IO[bytes], args: list[str]):
        self.pid, self.stdout, self.args = pid, stdout, args
        self.returncode: int | None = None
        self._reaping = threading.Lock()

    def poll(self) -> int | None:
        if self.returncode is None and self._reaping.acquire(blocking=False):
            try:
                self._reap(os.WNOHANG)
            finally:
                self._reaping.release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            with self._reaping:
                if self.returncode is None:
                    self._reap(0)
        else:
            until = time.monotonic() + timeout
            while self.poll() is None:
                if time.monotonic() >= until:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                time.sleep(WAIT_STEP)
        assert self.returncode is not None
        return self.returncode

    def _reap(self, options: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, options)
        except ChildProcessError:  # reaped by someone else: how it ended is lost
            self.returncode = 1
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)


def can_fork() -> bool:
    others = [thread for thread in threading.enumerate() if thread is not threading.current_thread()]
    return hasattr(os, "fork") and all(thread.daemon for thread in others)


def start(args: list[str], cwd: Path, env: dict[str, str], lock: Path) -> Forked:
    """`ralph ARGS` in a fork of this process, in `cwd` with `env` as its whole environment;
    `lock`: the coordinator's lock file, which the fork lets go of."""
    assert can_fork(), "a fork beside a thread that is no daemon may inherit a lock held forever"
    reading, writing = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():  # (Python 3.12 warns of any thread at all: see the docstring)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover (the child: coverage does not follow it)
        os.close(reading)
        _child(args, cwd, env, lock, writing)
    os.close(writing)
    return Forked(pid, os.fdopen(reading, "rb"), args)


def _child(args: list[str], cwd: Path, env: dict[str, str], lock: Path, output: int) -> NoReturn:
    code = 1
    try:
        os.setsid()
        quiet = os.open(os.devnull, os.O_RDONLY)
        os.dup2(quiet, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        for fd in (quiet, output, *_open_on(lock)):
            os.close(fd)
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(hardening.secrets_aside(env))
        sys.argv = [sys.argv[0], *args]
        events.forget_listeners()  # the coordinator's display and --events file are its own
        runpy.run_module("ralph", run_name="__main__")  # `python -m ralph ARGS`, its modules loaded already
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 0 if ended.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _open_on(path: Path) -> list[int]:
    """The descriptors of this process open on `path`."""
    found = []
    for entry in os.scandir("/proc/self/fd"):
        try:
            if os.readlink(entry.path) == str(path):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
