"""ralph as a library: start or resume a run from Python, hear its laps, read its result, and read
the runs a repository holds. What `__all__` lists is ralph's public surface (docs/library.md);
every other module of the package is private and may change in any release. `ralph run` comes in
through `run_with`, the way `run` does.

A run here is the run `ralph run` makes, in the caller's process: the same refs, notes, checks and
verdicts. It prints nothing unless asked (`display`), raises RalphError (with the command line's
one-line message) rather than exiting, and leaves the caller's working directory, signal handlers
and environment as they were.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ralph import git, todo
from ralph.agents.base import AgentResult, LapTask, Usage
from ralph.config import CONFIG_FILE, Config
from ralph.config import from_mapping as config_from_mapping
from ralph.config import load as load_config
from ralph.errors import Exit, RalphError
from ralph.git import blobs
from ralph.isolation.hardening import closed_while_running
from ralph.lap.caller import Caller, Kept, LapAgent, Stop
from ralph.records import ledger
from ralph.records.formats import LapRecord
from ralph.records.ledger import RunState
from ralph.run import loop
from ralph.run.options import RunOptions
from ralph.run.summary import what_is_left
from ralph.show import events
from ralph.verdict.checks import passing_tests
from ralph.verdict.decide import LapStatus

__all__ = [
    "AgentResult",
    "Config",
    "Event",
    "Exit",
    "LapAgent",
    "LapDetail",
    "LapRecord",
    "LapStatus",
    "LapTask",
    "RalphError",
    "RunResult",
    "RunStatus",
    "Stop",
    "Usage",
    "lap",
    "laps",
    "run",
    "status",
]

Event = dict[str, Any]  # one event as `ralph run --events` writes it: its "type", "run", "lap", "at" and fields
PathLike = str | os.PathLike[str]
Display = Literal["off", "quiet", "plain", "auto"]
DoneCheck = Callable[[Path, RunState], bool]
ONE_AT_A_TIME = (
    "a ralph.api run is already running in this process — one at a time: a run's display, events "
    "and callbacks are the process's (start another process for another run)"
)
_ONE_AT_A_TIME = threading.Lock()


@dataclass(frozen=True)
class RunStatus:
    """Where a run stands, as `ralph status --json` gives it (but the laps under way)."""

    run: str
    base: str  # the commit the run started from
    green: str  # the green tip: the last commit every check passed on
    done: bool
    laps: int
    green_laps: int
    max_laps: int
    todo_done: int  # TODO items ticked on the green line
    todo_open: int
    tests_passing: int  # on the green tip
    tokens: int
    cost_usd: float
    still_failing: dict[str, int]  # checks failing on the green tip, and since which lap (0: the base)
    left: list[str]  # what stands between the green tip and done, a line each (`ralph run`'s "left:")


@dataclass(frozen=True)
class RunResult(RunStatus):
    """How a run ended: where it stands (RunStatus), and why it stopped."""

    exit_code: Exit  # what `ralph run` would have exited with (docs/commands.md)
    stop_reason: str
    tests_before: int  # passing on the run's base commit (tests_passing: on its green tip)
    records: tuple[LapRecord, ...] = field(repr=False)  # every lap's record, in lap order


@dataclass(frozen=True)
class LapDetail:
    """One lap as `ralph show --json` gives it: its commit, its record (None when its note is
    missing or unreadable: `problem` says why), and (from `lap`) its diff stat and patch against
    its parent."""

    lap: int
    commit: str
    record: LapRecord | None
    problem: str
    diffstat: str = ""
    diff: str = ""


def run(
    repo: PathLike,
    *,
    config: PathLike | Config | Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    name: str | None = None,
    agent: Callable[[], LapAgent] | None = None,
    is_done: Callable[[Path, RunStatus], bool] | None = None,
    on_lap: Callable[[LapRecord], None] | None = None,
    on_event: Callable[[Event], None] | None = None,
    max_laps: int | None = None,
    allow_dirty: bool = False,
    display: Display = "off",
    events_to: str | None = None,
) -> RunResult:
    """Start the run `name` on the git repository at `repo` (or the one there is, resumed with
    the configuration it started with), and lap until it is done or a fuse blows.

    config: ralph.yaml's path (default: the repository's), a Config, or a mapping shaped like the
    file; `overrides` is a mapping merged over it, key by key. agent: a factory of LapAgents (a class
    will do), called once a lap (every lap a fresh agent), in place of config's agent.
    is_done: given the tree of a lap that would end the run done (read it, do not write it) and
    the run before that lap; done needs it True too. on_lap: called with each lap's record once it
    is saved; raise Stop there to end the run after that lap (the same `run` resumes it). on_event:
    every event as `--events` writes it; what it raises ends the run after the lap in progress and
    is raised here then. display: what is printed while it runs (off: nothing)."""
    _check_arguments(locals())
    top = git.find_repo(Path(repo)).top
    given = _config(top, config, overrides, python=agent is not None)
    kept = Kept()
    asking = _asking(top, is_done, kept) if is_done is not None else None
    caller = Caller(agent=agent, is_done=asking, on_lap=on_lap, kept=kept)
    heard = _Heard(on_event, kept)
    options = RunOptions(
        cwd=top,
        name=name,
        max_laps=max_laps,
        allow_dirty=allow_dirty,
        display=display,
        events_to=events_to,
        config=given,
        caller=caller,
    )
    if not _ONE_AT_A_TIME.acquire(blocking=False):
        raise RalphError(ONE_AT_A_TIME)
    try:
        with closed_while_running():
            code = run_with(options, heard)
    finally:
        _ONE_AT_A_TIME.release()
    if kept.first is not None:
        raise kept.first[1]
    with _readers_closed():
        return _result(top, heard, code)


def run_with(options: RunOptions, heard: Callable[[Event], None] | None = None) -> Exit:
    """The run, as `run` and the command line (`ralph run`, its options as they are) start it."""
    with events.listening(heard) if heard else nullcontext():
        return loop.run(options)


def status(repo: PathLike, run: str | None = None) -> RunStatus:
    """The run named (default: the most recent) as it stands now."""
    _check_arguments(locals())
    top = git.find_repo(Path(repo)).top
    with _readers_closed():
        return _status(top, ledger.resolve(top, run))


def laps(repo: PathLike, run: str | None = None) -> list[LapDetail]:
    """Every lap of the run named (default: the most recent), as `ralph log --json` lists them."""
    _check_arguments(locals())
    top = git.find_repo(Path(repo)).top
    with _readers_closed():
        return [_detail(one) for one in ledger.resolve(top, run).laps]


def lap(repo: PathLike, number: int, run: str | None = None) -> LapDetail:
    """Lap `number` of the run named (default: the most recent), with its diff stat and patch."""
    _check_arguments(locals())
    top = git.find_repo(Path(repo)).top
    with _readers_closed():
        state = ledger.resolve(top, run)
    found = next((one for one in state.laps if one.number == number), None)
    if found is None:
        raise RalphError(f"run {state.name!r} has no lap {number} — it has laps 1..{len(state.laps)}")
    parent = found.record.parent if found.record else f"{found.commit}^"
    return _detail(found, git.diffstat(top, parent, found.commit), git.diff(top, parent, found.commit))


# --- inside --------------------------------------------------------------------------------


class _Heard:
    """The events of the run, handed to the caller's on_event (each its own copy); the run's name
    and how it ended kept. What on_event raises is kept (Kept.keep), and it hears no more."""

    def __init__(self, on_event: Callable[[Event], None] | None, kept: Kept) -> None:
        self.on_event, self.kept = on_event, kept
        self.run: str | None = None
        self.reason = ""
        self.failed = False  # on_event raised: it hears no more

    def __call__(self, event: Event) -> None:
        self.run = event.get("run") or self.run
        if event["type"] == "run_ended":
            self.reason = str(event.get("reason", ""))
        if self.on_event is not None and not self.failed:
            try:
                self.on_event(copy.deepcopy(event))
            except Exception as raised:
                self.failed = True
                self.kept.keep("on_event", raised)


def _asking(top: Path, is_done: Callable[[Path, RunStatus], bool], kept: Kept) -> DoneCheck:
    """The caller's is_done, told the run as RunStatus; what it raises counts as not done, and is kept."""

    def ask(tree: Path, state: RunState) -> bool:
        try:
            said = is_done(tree, _status(top, state))
            if not isinstance(said, bool):  # "no" is no yes
                raise RalphError(f"is_done returned {type(said).__name__} {said!r:.40}, not True or False")
            return said
        except Exception as raised:
            kept.keep("is_done", raised)
            return False

    return ask


@contextmanager
def _readers_closed() -> Iterator[None]:
    """ralph reads git objects through a long-lived `git cat-file --batch` a repository: a caller's
    process keeps none of them (nor their pipes) once a function here returns."""
    try:
        yield
    finally:
        blobs.close_all()


def _optional(kind: type | tuple[type, ...]) -> Callable[[object], bool]:
    return lambda value: value is None or isinstance(value, kind)


def _callable(value: object) -> bool:
    return value is None or callable(value)


# What each argument of the functions here takes, and how that is said when it is not so.
_TAKES: dict[str, tuple[Callable[[object], bool], str]] = {
    "repo": (lambda value: isinstance(value, str | os.PathLike), "a path (str or os.PathLike)"),
    "config": (_optional((str, os.PathLike, Config, Mapping)), "a path, a Config or a mapping"),
    "overrides": (_optional(Mapping), "a mapping"),
    "name": (_optional(str), "a run's name (str)"),
    "run": (_optional(str), "a run's name (str)"),
    "agent": (_callable, "a factory of LapAgents: a class, or a function that makes one (not an agent)"),
    "is_done": (_callable, "a function"),
    "on_lap": (_callable, "a function"),
    "on_event": (_callable, "a function"),
    "max_laps": (lambda value: value is None or (type(value) is int and value >= 1), "a whole number, 1 or more"),
    "number": (lambda value: type(value) is int, "a lap's number (int)"),
    "allow_dirty": (lambda value: isinstance(value, bool), "True or False"),
    "display": (lambda value: value in ("off", "quiet", "plain", "auto"), "off, quiet, plain or auto"),
    "events_to": (_optional(str), "a file's path (str), or - for stdout"),
}


def _check_arguments(given: dict[str, object]) -> None:
    """The arguments given, each of what it takes, or a RalphError saying which is not (rather than
    whatever error it would raise deep inside ralph)."""
    for name, value in given.items():
        takes, said = _TAKES[name]
        if not takes(value):
            raise RalphError(f"{name}: expected {said}, got {type(value).__name__} {value!r:.60}")


def _config(
    top: Path, given: PathLike | Config | Mapping[str, Any] | None, overrides: Mapping[str, Any] | None, *, python: bool
) -> Config:
    """The configuration asked for: read, merged with `overrides`, the agent made the caller's."""
    if isinstance(given, Config):
        data, name = given.model_dump(mode="json", exclude_unset=True), "the configuration given"
    elif isinstance(given, Mapping):
        data, name = dict(given), "the configuration given"
    else:
        path = Path(given) if given is not None else top / CONFIG_FILE
        if overrides is None and not python:
            return load_config(path)
        data, name = load_config(path).model_dump(mode="json", exclude_unset=True), str(path)
    if overrides:
        name = f"{name} with overrides"
    data = _merged(data, overrides or {})
    if python:
        data["agent"] = {"kind": "python"}
    return config_from_mapping(data, name)


def _merged(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over`'s keys over `base`'s; mappings merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        merged[key] = _merged(below, value) if isinstance(below, dict) and isinstance(value, Mapping) else value
    return merged


def _status(top: Path, state: RunState) -> RunStatus:
    on_line = todo.count(todo.parse(git.show_file(top, state.green, state.record.config.files.todo)))
    return RunStatus(
        run=state.name,
        base=state.record.base,
        green=state.green,
        done=state.is_done,
        laps=len(state.laps),
        green_laps=state.green_laps(),
        max_laps=state.record.config.limits.max_laps,
        todo_done=on_line.done,
        todo_open=on_line.open,
        tests_passing=passing_tests(state.green_checks()),
        tokens=state.tokens_used(),
        cost_usd=state.cost_used()[0],
        still_failing=state.still_failing(),
        left=[] if state.is_done else what_is_left(top, state),
    )


def _result(top: Path, heard: _Heard, code: Exit) -> RunResult:
    state = ledger.resolve(top, heard.run)
    return RunResult(
        **vars(_status(top, state)),
        exit_code=code,
        stop_reason=heard.reason,
        tests_before=passing_tests(state.record.baseline),
        records=tuple(one.record for one in state.laps if one.record is not None),
    )


def _detail(one: ledger.Lap, diffstat: str = "", diff: str = "") -> LapDetail:
    return LapDetail(one.number, one.commit, one.record, one.problem, diffstat, diff)
