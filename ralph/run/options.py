"""The options of one `ralph run` (its command line), shared by the loop and a parallel run's
coordinator, which starts its slots with them; and the mode they make this process (mode_of)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ralph.config import Config
from ralph.errors import RalphError
from ralph.lap.caller import Caller
from ralph.lap.modes import PARENT_VAR, Candidate, Mode, Parallel, Plain, Round, Rounds, Slot, Worker
from ralph.show import view


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """`ralph run`'s options, as the command line gave them. Which mode they make this process is
    mode_of's to say: nothing else reads parallel, slot, remote or best_of (but `ralph run`, which
    keeps the answers of `ralph status` at the end of a run, not of a slot)."""

    cwd: Path
    config_path: Path | None = None
    name: str | None = None
    max_laps: int | None = None
    allow_dirty: bool = False
    display: view.Display = "auto"
    events_to: str | None = None  # --events: a file, or - for stdout
    parallel: int = 1  # --parallel: slots running laps side by side
    items_per_lap: int = 1  # --items-per-lap: TODO items each lap of a parallel run claims
    slot: int | None = None  # --slot: this process is that slot of a parallel run (started by it)
    remote: str | None = None  # --remote: the git remote that keeps the run's refs, for many workers
    issue: int | None = None  # --issue: the goal and the checklist come from this GitHub issue (via gh)
    best_of: int | None = None  # --best-of: candidate laps side by side on one item; the line advances to the best
    whole_job: bool = False  # `ralph bench --mode session`: the one lap is told to do the whole job
    hide: tuple[Path, ...] = ()  # `ralph bench`: what laps must not read (its cache: the jobs' answers)
    config: Config | None = None  # ralph.api: a configuration given as such, in place of the file's
    caller: Caller = Caller()  # ralph.api: the caller's agent, done check and lap callback


def mode_of(options: RunOptions, environ: Mapping[str, str]) -> Mode:
    """This process's part in the run; what cannot go together refused before anything starts."""
    refused = _refused(options, environ)
    if refused:
        raise RalphError(refused)
    if options.slot is not None:
        slot = Slot(number=options.slot, items_per_lap=options.items_per_lap, parent_pid=int(environ[PARENT_VAR]))
        given = Round.given(environ)
        return Candidate(**asdict(slot), round=given[0], lap=given[1]) if given else slot
    if options.best_of is not None:
        return Rounds(of=options.best_of)
    if options.parallel > 1:
        return Parallel(slots=options.parallel, items_per_lap=options.items_per_lap)
    if options.remote is not None:
        return Worker(remote=options.remote, items_per_lap=options.items_per_lap)
    return Plain()


def _refused(options: RunOptions, environ: Mapping[str, str]) -> str:
    """Why these options cannot go together, or ""."""
    side_by_side = options.parallel > 1 or options.slot is not None or options.remote is not None
    if options.items_per_lap > 1 and not side_by_side:
        return "--items-per-lap is for --parallel runs: a lap of a plain run works on what it chooses"
    if options.best_of is not None and options.parallel > 1:
        return "--best-of runs its candidates side by side itself — use --best-of or --parallel, not both"
    if options.best_of is not None and options.remote is not None:
        return "--best-of runs its candidates on this machine — use --best-of or --remote, not both"
    if options.remote is not None and options.name is None:
        return "--remote needs --name: every worker must name the same run"
    if options.remote is not None and options.parallel > 1:
        return "--remote runs one worker per clone — for more workers, start more clones"
    # A coordinator starts its slots with PARENT_VAR set and the run's name, and none of these options.
    started = environ.get(PARENT_VAR, "").isdigit() and options.name is not None and options.parallel == 1
    if options.slot is not None and not (started and options.best_of is None and options.remote is None):
        return not_started(options.name)
    return ""


def not_started(run: str | None) -> str:
    """Why `--slot` is refused: a slot is started by its coordinator, never by hand."""
    of = f" of {run}" if run else ""
    return f"--slot is for the slots a `ralph run --parallel`{of} starts itself"
