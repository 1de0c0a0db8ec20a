"""What the sandbox costs a lap: bubblewrap's start-up, and the lap with and without it.

    python bench/sandbox_cost.py                  # sizes 10,1000; 3 runs of 10 laps per mode
    python bench/sandbox_cost.py --sizes 10000 --laps 5 --reps 1

Per size, `ralph run` laps (in-process `ralph.run.loop.run`, command agent that ticks one item,
check `true`) with `sandbox: auto` (bubblewrap) and `sandbox: off`, the two modes taking turns
run after run so both see the same machine. A lap runs two sandboxed commands (the agent and
the check; the commit's `git add` and `git commit` too when the repository has commit hooks),
so the sandbox's share of a lap is about two bubblewrap start-ups. "first lap" is the lap that also fills the workspace (a full
checkout of the tree, once per `ralph run`); later laps reuse it. The micro rows time
`bwrap ... /bin/true` against `/bin/sh -c true` alone.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from common import command_agent, make_repo, median, table, timed

import ralph.run.loop
from ralph.isolation.jail import Jail
from ralph.run.options import RunOptions
from ralph.show import ui


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,1000", help="files in the repository, comma-separated")
    parser.add_argument("--laps", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    ui.console.quiet = True
    with tempfile.TemporaryDirectory(prefix="ralph-bench-sandbox-") as scratch:
        print(start_up(Path(scratch)))
        rows = []
        for size in (int(part) for part in args.sizes.split(",")):
            rows += laps_by_mode(Path(scratch) / f"size-{size}", size, args.laps, args.reps)
    print()
    print(table(["files", "sandbox", "first lap s", "later laps s (median)", "later laps vs off"], rows))


def start_up(scratch: Path, runs: int = 50) -> str:
    jail = Jail((), scratch, scratch, chdir=scratch, keep=(scratch,))
    assert subprocess.run(jail.argv(["/bin/true"])).returncode == 0, "bubblewrap does not work here"
    plain = median(timed(subprocess.run, ["/bin/sh", "-c", "true"])[0] for _ in range(runs))
    boxed = median(timed(subprocess.run, jail.argv(["/bin/true"]))[0] for _ in range(runs))
    return table(
        ["command", "median s", "ratio"],
        [["/bin/sh -c true", plain, 1.0], ["bwrap (ralph's options) /bin/true", boxed, boxed / plain]],
    )


def laps_by_mode(folder: Path, size: int, laps: int, reps: int) -> list[list]:
    times: dict[str, list[list[float]]] = {"auto": [], "off": []}
    for rep in range(reps):
        for mode in ("auto", "off") if rep % 2 == 0 else ("off", "auto"):
            times[mode].append(one_run(folder / f"{mode}-{rep}", size, laps, mode))
    off_later = median(t for run in times["off"] for t in run[1:])
    rows = []
    for mode in ("auto", "off"):
        first = median(run[0] for run in times[mode])
        later = median(t for run in times[mode] for t in run[1:])
        rows.append([size, mode, first, later, later / off_later])
    return rows


def one_run(folder: Path, size: int, laps: int, mode: str) -> list[float]:
    config = (
        f'goal: "Benchmark: tick one item a lap"\nagent: {command_agent()}\nchecks: ["true"]\n'
        f"limits: {{max_laps: {laps}, stagnation: 1000}}\nsandbox: {{mode: {mode}}}\n"
    )
    repo = make_repo(folder, config, items=laps + 1, filler=size)
    seconds: list[float] = []
    run_lap = ralph.run.loop.run_lap

    def timed_lap(ctx, state, number, *more):  # more: which agent, as the loop passes it
        spent, record = timed(run_lap, ctx, state, number, *more)
        seconds.append(spent)
        return record

    ralph.run.loop.run_lap = timed_lap
    try:
        ralph.run.loop.run(RunOptions(cwd=repo, name="bench"))
    finally:
        ralph.run.loop.run_lap = run_lap
    return seconds


if __name__ == "__main__":
    main()
