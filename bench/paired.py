"""Another bench script run with two ralphs in turns (A B A B …), each side's ralph first on
PYTHONPATH, and their tables put together: figures compared only when taken side by side, as
the machine's load moves under both alike.

    python paired.py --against DIR --pairs 3 lap_overhead.py --sizes 1000 --laps 10 --reps 1 --long 0

DIR is another checkout of ralph (`git worktree add DIR <commit>`); this checkout is the other side.
Each row of the table is one row of the first table one run printed, after the pair's number, the
side and the load average when that run began. For scripts that start ralph processes of their own
(parallel.py, status_time.py), use their own `--against`.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
HERE = BENCH.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="another checkout of ralph")
    parser.add_argument("--pairs", type=int, default=3, help="runs of the script on each side, in turns")
    parser.add_argument("script", help="a script in bench/, with its arguments after it")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    sides = [("before", options.against.resolve()), ("after", HERE)]
    header: list[str] = []
    rows: list[str] = []
    for pair in range(1, options.pairs + 1):
        for side, checkout in sides:
            load = f"{os.getloadavg()[0]:.1f}"
            lines = run(checkout, options.script, options.args)
            header = header or [f"| pair | side | load {lines[0]}", "|---|---|---" + lines[1]]
            rows += [f"| {pair} | {side} | {load} {line}" for line in lines[2:]]
    print(f"`{options.script} {' '.join(options.args)}`; before: {sides[0][1]}, after: {HERE}\n")
    print("\n".join(header + rows))


def run(checkout: Path, script: str, args: list[str]) -> list[str]:
    """The lines of the first table `script` printed, with `checkout`'s ralph imported."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, script, *args], cwd=BENCH, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{script} failed with {checkout}'s ralph:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    printed = done.stdout.splitlines()
    start = next((n for n, line in enumerate(printed) if line.startswith("|")), len(printed))
    lines = list(itertools.takewhile(lambda line: line.startswith("|"), printed[start:]))
    if len(lines) < 3:
        raise SystemExit(f"{script} printed no table with {checkout}'s ralph")
    return lines


if __name__ == "__main__":
    main()
