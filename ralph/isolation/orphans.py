"""What commands leave behind, found and ended: by a mark in their environment (a command's
token, a run's mark after a `kill -9` of ralph), or, once ralph is a child subreaper, as its
own children however they hid (setsid, double fork, a cleared environment)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MARKED_GRACE = 2.0  # seconds an orphan of a killed run has, after TERM, to end itself before KILL

_adopting = False  # ralph is a child subreaper: orphans of the commands it ran are its children


def adopt_orphans() -> None:
    """Called once ralph is a child subreaper (`hardening`): from then on, whatever a command
    left behind, however it hid (setsid, double fork, a cleared environment), is ended with it."""
    global _adopting
    _adopting = True


def adopting() -> bool:
    """Whether ralph is a child subreaper now, so what a command left behind is its child."""
    return _adopting


def end_children(spare: list[int]) -> None:
    """Once ralph adopts orphans: kill and reap its children that are not in `spare`, which
    is how what a long-lived child left behind is ended, however it hid."""
    if _adopting:
        end_orphans(set(spare))


def end_orphans(spare: set[int]) -> None:
    """Kill and reap every child of ralph's that was not there before the command (`spare`)."""
    while pids := [pid for pid in children() if pid not in spare]:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def children() -> list[int]:
    """ralph's child processes, by pid."""
    mine, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == mine:  # after "(comm)": state, ppid
                found.append(int(entry.name))
    return found


def kill_marked(name: str, value: str) -> int:
    """Kill every process whose environment has `name=value`; returns how many there were.

    Children carry markers in their environment: a per-command token (so stragglers
    that left the process group are found) and a per-run mark (so processes orphaned
    by a `kill -9` of ralph are found when the run resumes).
    """
    needle = f"{name}={value}".encode()
    pids = _pids_with(needle)
    found = len(pids)
    # TERM first, KILL what is left: a git ended by TERM removes its lock files (packed-refs.lock
    # left by a KILL mid-update stops every later ref deletion until a person removes it).
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + MARKED_GRACE
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = [pid for pid in _pids_with(needle) if pid in pids]
    _signal_all(pids, signal.SIGKILL)
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _pids_with(needle: bytes) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                pids.append(int(entry.name))
    return pids
