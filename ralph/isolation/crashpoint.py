"""Debug only: stop ralph at a named phase of a lap, to prove that it is crash safe.

Inert unless RALPH_DEBUG_STOP_AT is set; tests set it to `PHASE` (SIGKILL at the first
time ralph reaches PHASE), `PHASE:INT` (SIGINT, as Ctrl-C would) or `PHASE:RAISE` (an
exception no code expects: a bug, to prove the crash log). The phases, in lap order:
workspace, agent, add, commit, checks, note, lap-ref, advance. It sits in isolation/, below
git/, since the workspace, the ledger and the lap all stop at one, and it ends ralph's own
process as the process door ends others.
"""

from __future__ import annotations

import os
import signal


def reached(phase: str) -> None:
    wanted = os.environ.get("RALPH_DEBUG_STOP_AT")
    if not wanted:
        return
    name, _, how = wanted.partition(":")
    if name == phase and how == "RAISE":
        raise RuntimeError(f"RALPH_DEBUG_STOP_AT={wanted}: a bug, as asked for")
    if name == phase:
        os.kill(os.getpid(), signal.SIGINT if how == "INT" else signal.SIGKILL)
