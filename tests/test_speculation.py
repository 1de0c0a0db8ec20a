"""A lap waiting for its turn to land guesses on the commit being landed (lap/speculation.py):
what it takes from the candidate file, when a guess is given up, and that the turn still comes.
A real lock held by another process; `tip` (the line's tip, a git read in a run) is a file here."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, cast

import pytest

from ralph.isolation import proc
from ralph.lap import speculation
from ralph.verdict.decide import Checked

X = "1" * 40

# Holds the lock, says its candidate, then, after a while, lands it (or not) and gives the turn back.
HOLDER = r"""
import fcntl, pathlib, sys, time
folder, said, hold, lands = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
with open(folder / "landing.lock", "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    (folder / "landing.next").write_text(said + "\n")
    (folder / "held").write_text("")
    time.sleep(hold)
    if lands:
        (folder / "tip").write_text(said)
    (folder / "landing.next").unlink()
"""


def holding(folder: Path, said: str, hold: float, lands: bool) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), said, str(hold), "1" if lands else "0"])
    while not (folder / "held").exists():
        time.sleep(0.01)
    return holder


def tip_of(folder: Path):
    return lambda: (folder / "tip").read_text() if (folder / "tip").exists() else "base"


@pytest.mark.parametrize("lands", [True, False], ids=["landed", "not landed"])
def test_a_guess_runs_on_while_its_candidate_may_land_and_is_stopped_once_it_did_not(tmp_path: Path, lands: bool):
    holder = holding(tmp_path, X, 0.5, lands)
    runs: list[proc.Completed] = []

    def guess(onto: str, unwanted: speculation.Unwanted) -> speculation.Guess | None:
        runs.append(proc.run(["sleep", "3"], tmp_path, stop=unwanted))
        return (
            None
            if unwanted()
            else speculation.Guess(of="mine", onto=onto, sha="2" * 40, checked=Checked(results=[], removed=[]))
        )

    started = time.monotonic()
    with open(tmp_path / "landing.lock", "a") as lock:
        made = speculation.wait_for_turn(lock, tmp_path, guess, tip_of(tmp_path))
    took = time.monotonic() - started
    assert holder.wait() == 0 and len(runs) == 1
    if lands:  # its checks ran to their end: the guess is there to be used
        assert made is not None and made.onto == X and runs[0].ok and took >= 3
    else:  # stopped soon after the holder's turn ended, as a timeout stops a command
        assert made is None and runs[0].timed_out and took < 2.5
    assert not (tmp_path / "landing.next").exists()


def test_a_candidate_that_names_no_commit_is_not_guessed_on_and_the_turn_still_comes(tmp_path: Path):
    guessed: list[str] = []
    holder = holding(tmp_path, "HEAD~1; rm -rf /", 0.3, lands=False)
    with open(tmp_path / "landing.lock", "a") as lock:
        made = speculation.wait_for_turn(lock, tmp_path, lambda onto, _: guessed.append(onto), tip_of(tmp_path))
    assert holder.wait() == 0 and made is None and guessed == []


def test_a_command_stopped_as_unwanted_ends_as_a_timed_out_one():
    asked = []

    def stop() -> bool:
        asked.append(time.monotonic())
        return len(asked) > 2

    done = proc.run(["sleep", "5"], Path.cwd(), stop=stop)
    assert done.timed_out and not done.ok and done.duration < 3


def test_a_lock_that_cannot_be_taken_is_said_at_once_not_waited_for(tmp_path: Path):
    class Closed:
        """A lock file whose descriptor is gone: flock says EBADF. The soft limit on open files is
        never a descriptor (they are below it); a number just closed could be reused meanwhile by
        another thread's open, and flock would then take that file."""

        def fileno(self) -> int:
            return resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    started = time.monotonic()
    with pytest.raises(OSError):
        speculation.wait_for_turn(cast(IO[str], Closed()), tmp_path, lambda onto, _: None, tip_of(tmp_path))
    assert time.monotonic() - started < 2
