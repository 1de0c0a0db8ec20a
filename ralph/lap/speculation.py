"""Laps that wait for their turn to land, checked ahead of it (a merge queue's speculation).

A parallel run's slots land their laps one at a time (advance._landing). The lap whose turn it
is and whose line moved is rebased onto the line and checked again there; it says which commit
that is, the one it lands if its checks pass: its *candidate*. A lap waiting for its turn
meanwhile rebases itself onto that candidate and runs its checks there, beside the other's.
When its turn comes and the line's tip is that candidate, the commit it made and checked is
exactly the commit that lands on it: its checks are not run again. When the tip is any other
commit (the candidate was red, or another lap's turn came first), the guess is dropped and the
lap is rebased and checked as before. A guess whose candidate's turn ended without landing it is
given up at once, its checks stopped.

The lap waits for its turn in the kernel's queue (a thread blocks on the lock while it guesses),
so guessing never lets a later lap take its place. The candidate is a file beside the lock, in
the workspace folder of the ralph that started the slots, which no lap's sandbox shows; whatever
it says, a guess is used only where the line's tip, read in the lap's turn, is the very commit
the guess was made on.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ralph.verdict.decide import CannotCheck, Checked

PAUSE = (0.005, 0.05)  # seconds between looks at the candidate, from quick to slow
CANDIDATE = "landing.next"
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass(frozen=True)
class Guess:
    """A waiting lap's commit `of`, rebased onto a candidate (`onto`) as `sha`, and its checks there."""

    of: str
    onto: str
    sha: str
    checked: Checked | CannotCheck


class Unwanted:
    """Whether a guess on `onto` is no longer wanted: the candidate is no longer `onto` and the
    line's tip is not `onto` either (its turn ended without landing it, or it is being rebased
    again). Asked by the guess's checks as they run: the file read at most every LOOK seconds,
    `tip` (a git process) only once the candidate changed."""

    LOOK = 0.1

    def __init__(self, folder: Path, onto: str, tip: Callable[[], str | None]):
        self.folder, self.onto, self.tip = folder, onto, tip
        self.settled: bool | None = None  # once the candidate changed: whether the guess is unwanted
        self.looked = 0.0

    def __call__(self) -> bool:
        now = time.monotonic()
        if self.settled is None and now - self.looked >= self.LOOK:
            self.looked = now
            if candidate(self.folder) != self.onto:
                self.settled = self.tip() != self.onto
        return bool(self.settled)


def wait_for_turn(
    lock: IO[str], folder: Path, guess: Callable[[str, Unwanted], Guess | None], tip: Callable[[], str | None]
) -> Guess | None:
    """The lock taken; until then, a guess on each new candidate. The last guess tried, or None:
    the workspace holds that guess's commit, as a lap's own checks leave it."""
    taken, failed = threading.Event(), list[OSError]()
    threading.Thread(target=_take, args=(lock, taken, failed), daemon=True).start()
    made: Guess | None = None
    tried: set[str] = set()
    pause = PAUSE[0]
    while not taken.wait(pause):
        onto = candidate(folder)
        if onto is None or onto in tried:
            pause = min(pause * 1.5, PAUSE[1])
            continue
        tried.add(onto)
        made = guess(onto, Unwanted(folder, onto, tip))
        pause = PAUSE[0]
    if failed:  # the lock could not be taken (as a lap's landing without a guess would have failed)
        raise failed[0]
    withdraw(folder)  # one a lap that died in its turn left: nobody lands it
    return made


def _take(lock: IO[str], taken: threading.Event, failed: list[OSError]) -> None:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
    except OSError as error:  # said to the waiting lap, which would otherwise wait for ever
        failed.append(error)
    except ValueError:  # the lock's file closed: the lap was interrupted, and waits no more
        return
    taken.set()


def publish(folder: Path, sha: str) -> None:
    """Say, while holding the turn, which commit this lap's checks now run on: the one it lands."""
    written = folder / f"{CANDIDATE}.tmp"
    with contextlib.suppress(OSError):  # the folder is gone (the run ended): nobody waits
        written.write_text(sha + "\n")
        written.replace(folder / CANDIDATE)


def withdraw(folder: Path) -> None:
    """No candidate: the turn given back, or a run of slots starting."""
    with contextlib.suppress(OSError):
        (folder / CANDIDATE).unlink(missing_ok=True)


def candidate(folder: Path) -> str | None:
    try:
        said = (folder / CANDIDATE).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return said if _SHA.fullmatch(said) else None
