"""ralph's own cost per lap, how it grows with repository size and with lap count.

    python bench/lap_overhead.py                # sizes 10,1000,10000, 3 runs of 10 laps; 3 runs of 100 laps
    python bench/lap_overhead.py --sizes 10000 --laps 3 --reps 1 --long 0   # the big repo alone
    python bench/lap_overhead.py --sizes 1000 --items 80000 --laps 3 --long 0   # a long TODO.md

The agent only ticks one TODO item and appends a line to a file; the check is `true`.
So nearly all of a lap's time is ralph's own: workspace, sandbox, commit, guard, notes, refs.

Laps run in-process (`ralph.run.loop.run(RunOptions(...))`), with `ralph.run.loop.run_lap` and
`ralph.isolation.proc.run` wrapped to time each lap from outside and to count the git processes
it starts. The breakdown comes from the lap notes (`ledger.load` reads them back):
in-note overhead = duration_s - agent.duration_s - sum(checks[].duration_s); the rest of a
lap's wall time (the workspace's checkout, writing the note and refs) happens outside duration_s.
"bare git" is the same lap by hand with the git CLI, one worktree reused as ralph reuses its
workspace: `checkout -f --detach` + `clean -fd` (ignored files kept, as ralph keeps them), the
same agent command, `add -A`, `commit`, the check (`true`, through a shell), `update-ref`; it runs just before each of ralph's laps
on the same repository, so each pair shares the machine's mood. "prepare s" is the lap note's
prepare_s (ralph's reset of its workspace to the green commit); "git reset s" is the bare lap's
checkout + clean, git's own floor for that step. "checkout s" is ralph's `checkout -f` (both
of a lap; `read-tree -u` before issue 41's sixth pass, counted too). One real `ralph run`
process per size gives the whole-process wall time; "fixed" is that minus laps × the median
lap: imports, config, the workspace's first checkout.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from common import TICK_ONE, command_agent, git, make_repo, median, ralph_yaml, table, timed

import ralph.run.loop
from ralph.isolation import proc
from ralph.records import ledger
from ralph.run.options import RunOptions
from ralph.show import ui

BARE_NUMBERS = itertools.count()


class LapClock:
    """Wall time and git processes of each lap, measured around ralph's own functions."""

    def __init__(self, before_lap: Callable[[Path], tuple[float, float]]) -> None:
        self.laps: list[dict] = []
        self.current: dict | None = None
        run_lap, run_process = ralph.run.loop.run_lap, proc.run

        def timed_lap(ctx, state, turn):
            bare, bare_reset = before_lap(ctx.top)  # the control, just before the lap
            self.current = {"git_n": 0, "git_s": 0.0, "checkout_s": 0.0}
            seconds, record = timed(run_lap, ctx, state, turn)
            self.laps.append(dict(self.current, wall=seconds, bare=bare, bare_reset=bare_reset))
            self.current = None
            return record

        def counted_process(command, cwd, **options):
            seconds, done = timed(run_process, command, cwd, **options)
            if self.current is not None and isinstance(command, list) and command[0] == "git":
                self.current["git_n"] += 1
                self.current["git_s"] += seconds
                self.current["checkout_s"] += seconds if {"read-tree", "checkout"} & set(command) else 0.0
            return done

        ralph.run.loop.run_lap, proc.run = timed_lap, counted_process


def ralph_laps(clock: LapClock, repo: Path, name: str, laps: int) -> list[dict]:
    """Run `laps` laps in-process; each lap's clock readings merged with its note."""
    clock.laps = []
    ralph.run.loop.run(RunOptions(cwd=repo, name=name, max_laps=laps))
    notes = [lap.record for lap in ledger.load(repo, name).laps]
    assert all(note.status == "green" for note in notes), [note.reason for note in notes]
    for reading, note in zip(clock.laps, notes, strict=True):
        inside = note.agent.duration_s + sum(check.duration_s for check in note.checks)
        reading.update(
            in_note=note.duration_s - inside, outside=reading["wall"] - note.duration_s, prepare=note.prepare_s
        )
    return clock.laps


def bare_lap(repo: Path) -> tuple[float, float]:
    """A lap done by hand with the git CLI, as the shortest script would: one reused worktree
    reset to the line's tip (`checkout -f --detach`, `clean -fd`: ignored files kept, as ralph
    keeps them), the same agent command, `add -A`, `commit`, the check, `update-ref`. Returns the whole
    lap's seconds and those of its reset (git's floor for ralph's `prepare_s`)."""
    number = next(BARE_NUMBERS)
    worktree = repo.parent / f"bare-{repo.name}"  # one per repository measured
    if not worktree.exists():
        git(repo, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
        git(repo, "update-ref", "refs/bare/line", "HEAD")

    def reset() -> None:
        git(worktree, "checkout", "-q", "-f", "--detach", "refs/bare/line")
        git(worktree, "clean", "-q", "-fd")

    def rest() -> None:
        subprocess.run(["sh", "-c", TICK_ONE], cwd=worktree, check=True, env=dict(os.environ, RALPH_LAP=str(number)))
        git(worktree, "add", "-A")
        git(worktree, "commit", "-q", "-m", f"bare {number}")
        subprocess.run(["sh", "-c", "true"], cwd=worktree, check=True)  # the check, as ralph's runs it: a shell
        git(worktree, "update-ref", "refs/bare/line", "HEAD")

    reset_s = timed(reset)[0]
    return reset_s + timed(rest)[0], reset_s


def process_wall(repo: Path, name: str, laps: int) -> float:
    command = [sys.executable, "-m", "ralph", "run", "--name", name, "--max-laps", str(laps)]
    seconds, done = timed(subprocess.run, command, cwd=repo, capture_output=True, text=True)
    assert done.returncode == 3, done.stdout + done.stderr  # 3: max_laps reached
    return seconds


def summary(readings: list[dict]) -> list:
    """Medians of one group of laps, in the column order of COLUMNS."""
    lap, bare = median(r["wall"] for r in readings), median(r["bare"] for r in readings)
    prepare, bare_reset = median(r["prepare"] for r in readings), median(r["bare_reset"] for r in readings)
    return [
        lap,
        bare,
        f"{lap / bare:.2f}×",
        prepare,
        bare_reset,
        f"{prepare / bare_reset:.2f}×",
        median(r["checkout_s"] for r in readings),
        median(r["git_n"] for r in readings),
        median(r["git_s"] - r["checkout_s"] for r in readings),
        median(r["in_note"] for r in readings),
        median(r["outside"] for r in readings),
    ]


COLUMNS = [
    "ralph lap s",
    "bare git s",
    "ralph/bare",
    "prepare s",
    "git reset s",
    "prepare/reset",
    "checkout s",
    "git procs",
    "other git s",
    "in-note overhead s",
    "outside note s",
]


def by_size(clock: LapClock, root: Path, sizes: list[int], laps: int, reps: int, items: int) -> list[list]:
    rows = []
    for size in sizes:
        repo = make_repo(root / f"size-{size}", ralph_yaml(command_agent()), items=items, filler=size)
        readings = [r for rep in range(reps) for r in ralph_laps(clock, repo, f"size-{rep}", laps)]
        wall = process_wall(repo, "process", laps)
        rows.append([size, items, *summary(readings), wall, wall - laps * median(r["wall"] for r in readings)])
        print(f"  {size} files: done", file=sys.stderr)
    return rows


def by_lap_count(clock: LapClock, root: Path, size: int, laps: int, reps: int) -> list[list]:
    """Laps 1-10 against the last 10 of the same run; each window pooled over `reps` runs."""
    runs = []
    for rep in range(reps):
        repo = make_repo(root / f"long-{rep}", ralph_yaml(command_agent()), items=laps + 10, filler=size)
        runs.append(ralph_laps(clock, repo, "long", laps))
    return [
        [f"{first + 1}–{first + 10}", *summary([r for run in runs for r in run[first : first + 10]])]
        for first in (0, laps - 10)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,10000", help="files in the repository, comma-separated")
    parser.add_argument("--laps", type=int, default=10, help="laps per run in the size comparison")
    parser.add_argument("--reps", type=int, default=3, help="runs per measurement; medians over all their laps")
    parser.add_argument("--items", type=int, default=1000, help="TODO items in the size comparison's repositories")
    parser.add_argument("--long", type=int, default=100, help="laps of the lap-count runs (0: skip them)")
    parser.add_argument("--long-size", type=int, default=100, help="files in the lap-count run's repository")
    args = parser.parse_args()
    ui.console.quiet = True
    clock = LapClock(before_lap=bare_lap)
    with tempfile.TemporaryDirectory(prefix="ralph-bench-") as root:
        sizes = by_size(clock, Path(root), [int(s) for s in args.sizes.split(",")], args.laps, args.reps, args.items)
        growth = by_lap_count(clock, Path(root), args.long_size, args.long, args.reps) if args.long >= 20 else []
    print(f"Per lap, medians over {args.reps} runs × {args.laps} laps; agent: tick one item, check: `true`.\n")
    print(table(["files", "items", *COLUMNS, f"`ralph run` {args.laps} laps s", "fixed s"], sizes))
    if growth:
        print(f"\n{args.reps} runs of {args.long} laps on {args.long_size} files; medians of the 10-lap windows.\n")
        print(table(["laps", *COLUMNS], growth))


if __name__ == "__main__":
    main()
