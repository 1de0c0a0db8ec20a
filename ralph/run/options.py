"""The options of one `ralph run` (its command line), shared by the loop and a parallel run's
coordinator, which starts its slots with them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralph.show import view


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """`ralph run`'s options, as the command line gave them."""

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
    best_of: int | None = None  # --best-of: candidate laps side by side on one item; the best lands
    whole_job: bool = False  # `ralph bench --mode session`: the one lap is told to do the whole job
    hide: tuple[Path, ...] = ()  # `ralph bench`: what laps must not read (its cache: the jobs' answers)
