"""Laps that wait for their turn to land, checked ahead of it (a merge queue's speculation).

A parallel run's slots land their laps one at a time (advance._landing). The lap whose turn it
is and whose line moved is rebased onto the line and checked again there; it says which commit
that is, the one it lands if its checks pass: its *candidate*. A lap waiting for its turn
meanwhile rebases itself onto that candidate and runs its checks there, beside the other's.
When its turn comes and the line's tip is that candidate, the commit it made and checked is
exactly the commit that lands on it: its checks are not run again. When the tip is any other
commit (the candidate was red, or another lap's turn came first), the guess is dropped and the
lap is rebased and checked as before.

The candidate is a file beside the lock, in the workspace folder of the ralph that started the
slots, which no lap's sandbox shows. Whatever it says, a guess is used only where the line's
tip, read in the lap's turn, is the very commit the guess was made on.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ralph.verdict.decide import CannotCheck, Checked

PAUSE = (0.005, 0.05)  # seconds between looks at the lock and the candidate, from quick to slow
CANDIDATE = "landing.next"
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass(frozen=True)
class Guess:
    """A waiting lap's commit `of`, rebased onto a candidate (`onto`) as `sha`, and its checks there."""

    of: str
    onto: str
    sha: str
    checked: Checked | CannotCheck


def wait_for_turn(lock: IO[str], folder: Path, guess: Callable[[str], Guess | None]) -> Guess | None:
    """Take the lock; until then, a guess on each new candidate. The last guess made: the
    workspace holds its commit, as a lap's own checks leave it."""
    made: Guess | None = None
    tried: set[str] = set()
    pause = PAUSE[0]
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return made
        except BlockingIOError:
            pass
        onto = candidate(folder)
        if onto is not None and onto not in tried:
            tried.add(onto)
            made = guess(onto) or made
            pause = PAUSE[0]
            continue
        time.sleep(pause)
        pause = min(pause * 1.5, PAUSE[1])


def publish(folder: Path, sha: str) -> None:
    """Say, while holding the turn, which commit this lap's checks now run on: the one it lands."""
    written = folder / f"{CANDIDATE}.tmp"
    with contextlib.suppress(OSError):  # the folder is gone (the run ended): nobody waits
        written.write_text(sha + "\n")
        written.replace(folder / CANDIDATE)


def withdraw(folder: Path) -> None:
    """The turn given back: no candidate until the next lap says one."""
    with contextlib.suppress(OSError):
        (folder / CANDIDATE).unlink(missing_ok=True)


def candidate(folder: Path) -> str | None:
    try:
        said = (folder / CANDIDATE).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return said if _SHA.fullmatch(said) else None
