"""What happens during a run, as events: the live view, the plain lines and `--events` hear them.

`emit` stamps each event with its type, the run, the lap (0 before the first) and the time, and
hands it to whatever listens (the `--events` file is ralph/show/event_lines.py, which adds its
format version); with nothing listening it costs nothing. The types, with the
fields each adds, are TYPES, which the events table of docs/watching.md lists too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from ralph.show.text import printable

LINES_PER_SECOND = 20  # an agent's lines told as events; all of them are in the lap's logs
LINE_CHARS = 200

Event = dict[str, Any]
Listener = Callable[[Event], None]

TYPES = {
    "run_started": "resumed, base, green, next_lap, max_laps, one_session (prompt tokens of the laps before), goal",
    "lap_started": "max_laps; escalated (the agent a lap on a stuck item went to) or split (the item it "
    "splits), only on such laps",
    "phase_changed": "phase: preparing, setup, agent, committing, checks or judge (empty: a run's slots work, "
    "and the process that started them waits)",
    "tool_called": "line: what the built-in agent does (a tool call, its finish, a check it asked for, a retried "
    "request)",
    "agent_output": "line: a line a command agent printed",
    "model_replied": "prompt_tokens, completion_tokens: one reply of the model to the built-in agent",
    "check_finished": "command, passed, could_not_run (why it did not run, else null), exit_code, duration_s, "
    "tests_passed, tests_failed (lap 0: the baseline)",
    "lap_ended": "status, agent, reason, duration_s, tokens, cost_usd, largest_prompt_tokens, files_changed, ticked, "
    "todo_done, todo_total, commit, escalated, split",
    "round_ended": "of, laps (its candidates' lap numbers), chosen (the lap that landed, or null), why: a "
    "`--best-of` round decided",
    "limit_wait": "until, seconds, reason: the agent hit a usage or rate limit; the next lap waits",
    "warning": "message",
    "run_ended": "exit, reason, stopped_by (done, fuse, error or interrupted), flaky (checks that failed, then "
    "passed on a retry)",
}

_listeners: list[Listener] = []
_where: dict[str, Any] = {"run": None, "lap": 0}


def emit(kind: str, **fields: Any) -> None:
    assert kind in TYPES, kind
    if not _listeners:
        return
    if kind == "lap_started":
        _where["lap"] = fields.pop("lap")
    at = datetime.now(UTC).isoformat(timespec="milliseconds")
    event = {"type": kind, **_where, "at": at, **fields}
    for listener in list(_listeners):
        listener(event)


def naming(run: str, slot: int | None = None) -> None:
    """Events from here on are of `run` (known before it starts: its warnings are its own), and
    of its slot `slot` in a parallel run."""
    _where.update(run=run, lap=0)
    if slot is not None:
        _where["slot"] = slot


def forget_listeners() -> None:
    """In a fork of ralph (a slot, run/forked.py): the listeners it inherited are its parent's."""
    _listeners.clear()
    _where.clear()
    _where.update(run=None, lap=0)


@contextmanager
def ahead_of(commit: str) -> Iterator[None]:
    """Events of a lap's checks run ahead of its turn to land, on top of `commit` (the lap landing
    before it, lap/speculation.py): each says so, in `ahead`."""
    _where["ahead"] = commit[:10]
    try:
        yield
    finally:
        _where.pop("ahead", None)


@contextmanager
def listening(*listeners: Listener) -> Iterator[None]:
    _listeners.extend(listeners)
    try:
        yield
    finally:
        for listener in listeners:
            _listeners.remove(listener)
        if not _listeners:
            _where.clear()
            _where.update(run=None, lap=0)


class Lines:
    """What an agent says, as `kind` events: control characters removed, whitespace folded,
    each cut to LINE_CHARS, at most LINES_PER_SECOND of them."""

    def __init__(self, kind: str):
        self.kind = kind
        self.second, self.told = 0, 0

    def __call__(self, text: str) -> None:
        line = " ".join(printable(text).split())
        now = int(time.monotonic())
        if now != self.second:
            self.second, self.told = now, 0
        if line and self.told < LINES_PER_SECOND:
            self.told += 1
            emit(self.kind, line=line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…")
