"""How soon a run reaches its first lap, and how soon it is over after its last, against git's
own checkout of the same commit.

    python bench/run_start.py                       # 1,000, 20,000 and 100,000 files, 3 runs each
    python bench/run_start.py --sizes 100 --reps 1  # tiny

A first `ralph run` makes its workspace: a checkout of every file, as `git worktree add` makes
one. A run's workspace outlives it (ralph/workspace/reuse.py): the next run of the repository
takes it over and writes only the files that differ. Each of the next runs here is paired with
a `git worktree add --detach` of the same commit just before it (its removal not timed), and
timed in-process (`ralph.run.loop.run`, one lap, agent: tick one item, check: `true`): "to
first lap" is from the call to the first lap's start (the workspace made ready, the baseline
checked: `true`), "after last lap" from the last lap's end to the run's return (what ends the
run: the workspace's release or, before, its deletion). Imports and start-up are not in these
(the issue's fixed 0.3 s; `ralph status` time is bench/status_time.py's).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from common import command_agent, git, make_repo, median, ralph_yaml, table, timed

import ralph.run.loop
from ralph.run.options import RunOptions
from ralph.show import ui


def timed_run(repo: Path, name: str) -> tuple[float, float]:
    """One one-lap run: seconds to its first lap's start, and from its last lap's end to its return."""
    marks: dict[str, float] = {}
    run_lap = ralph.run.loop.run_lap

    def lap(*args, **kwargs):
        marks.setdefault("first", time.perf_counter())
        try:
            return run_lap(*args, **kwargs)
        finally:
            marks["last"] = time.perf_counter()

    ralph.run.loop.run_lap = lap
    started = time.perf_counter()
    try:
        ralph.run.loop.run(RunOptions(cwd=repo, name=name, max_laps=1))
    finally:
        ralph.run.loop.run_lap = run_lap
    return marks["first"] - started, time.perf_counter() - marks["last"]


def worktree_add(repo: Path, where: Path) -> float:
    seconds = timed(git, repo, "worktree", "add", "-q", "--detach", str(where), "HEAD")[0]
    shutil.rmtree(where)
    git(repo, "worktree", "prune")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,20000,100000", help="files in the repository, comma-separated")
    parser.add_argument("--reps", type=int, default=3, help="next runs per size, each paired with a worktree add")
    options = parser.parse_args()
    ui.console.quiet = True
    root = Path(tempfile.mkdtemp(prefix="ralph-bench-start-"))
    rows = []
    for size in [int(size) for size in options.sizes.split(",")]:
        repo = make_repo(root / f"r{size}", ralph_yaml(command_agent()), 50, filler=size)
        os.sync()  # the repository's own files on disk first: else the first run waits on their writing
        first, first_end = timed_run(repo, "first")
        adds, starts, ends = [], [], []
        for rep in range(options.reps):
            adds.append(worktree_add(repo, root / f"wt{size}-{rep}"))
            start, end = timed_run(repo, f"next{rep}")
            starts.append(start)
            ends.append(end)
        add, start = median(adds), median(starts)
        rows.append(
            [
                f"{size:,}",
                f"{add:.3g}",
                f"{first:.3g}",
                f"{first_end:.3g}",
                f"{start:.3g}",
                f"{start / add:.2f}×",
                f"{median(ends):.3g}",
            ]
        )
    print(f"Medians over {options.reps} next runs a size, each paired with a `git worktree add` just before it.\n")
    header = ["files", "worktree add s", "first run: to first lap s", "first run: after last lap s"]
    header += ["next run: to first lap s", "next / add", "next run: after last lap s"]
    print(table(header, rows))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
