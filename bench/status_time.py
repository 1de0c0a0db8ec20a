"""`ralph status`, `ralph log` and `ralph show 1` as the user runs them (the installed console
script, a process each), in repositories of 3, 10 and 30 runs and of runs with many laps, paired
with another ralph (`--against`, e.g. main's) in the same run: A B A B …

    python bench/status_time.py                                  # --runs 3,10,30 --laps 3 --long 30 --reps 11
    python bench/status_time.py --against /work/wt-base/.venv/bin/ralph
    python bench/status_time.py --runs 1 --laps 1 --long 0 --reps 1 --after-runs 1   # tiny: seconds

The runs are made by real `ralph run` processes of this checkout (a command agent ticks one item a
lap, the check `true`), so the refs, notes and records are the ones ralph writes. Each command is
run once first, untimed, with bytecode written (PYTHONDONTWRITEBYTECODE is dropped), so neither
side pays for compiling. A git stand-in on PATH counts the git processes of one more run.

This ralph keeps what a command printed and answers the same question again from it while nothing
it printed from has changed (ralph/commands/answers.py), so each command is timed in three cases:
"again" (asked before: the untimed first run kept the answer), "read" (no answer kept: the folder of
answers removed, untimed, before each timed run of either side: the records are read, and the answer
kept) and, for status and log, "after a run" (the first call after a new `ralph run` of one lap,
which keeps status's answer at its end, not log's: the run printed that table; --after-runs new
runs, so the repository gains that many). Another ralph
without kept answers reads the records in every case.
Times are the median of --reps: wall seconds, and CPU seconds of the command and its git
children (a busy machine sways them less); "÷" is the median of the pairs' ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import command_agent, make_repo, median, ralph_yaml, table  # importing common isolates HOME

COMMANDS = (["status"], ["log"], ["show", "1"])
OURS = Path(sys.executable).parent / "ralph"


def repo_with_runs(root: Path, runs: int, laps: int) -> Path:
    """A repository with `runs` runs of `laps` laps each, none done."""
    repo = make_repo(root / f"runs{runs}x{laps}", ralph_yaml(command_agent()), items=laps + 2)
    for n in range(1, runs + 1):
        made = subprocess.run(
            [str(OURS), "run", "--name", f"r{n:02d}", "--max-laps", str(laps), "--quiet"],
            cwd=repo,
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert made.returncode == 3, made.stdout + made.stderr  # 3: max laps reached, not done
    return repo


def _env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return env | extra


def seconds(ralph: Path, repo: Path, args: list[str]) -> tuple[float, float]:
    """Wall seconds, and the CPU seconds of the process and its git children (less swayed by a busy machine)."""
    used, started = _children_cpu(), time.perf_counter()
    subprocess.run([str(ralph), *args], cwd=repo, check=True, capture_output=True, env=_env())
    return time.perf_counter() - started, _children_cpu() - used


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def git_processes(ralph: Path, repo: Path, args: list[str], shims: Path) -> int:
    """The git processes one run of the command starts, counted by a stand-in first on PATH."""
    count = shims / "count"
    count.write_text("")
    env = _env(PATH=f"{shims}{os.pathsep}{os.environ['PATH']}", GIT_COUNT=str(count))
    subprocess.run([str(ralph), *args], cwd=repo, check=True, capture_output=True, env=env)
    return len(count.read_text())


def make_shims(root: Path) -> Path:
    shims = root / "shims"
    shims.mkdir()
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    (shims / "git").write_text(f'#!/bin/sh\nprintf x >> "$GIT_COUNT"\nexec {real} "$@"\n')
    (shims / "git").chmod(0o755)
    return shims


def measure(
    repo: Path, args: list[str], sides: list[Path], reps: int, *, read: bool
) -> list[list[tuple[float, float]]]:
    """Each side's (wall, CPU) seconds, taken in turns; `read`: no answer kept before each."""
    for ralph in sides:  # bytecode written, caches warm
        seconds(ralph, repo, args)
    times: list[list[tuple[float, float]]] = [[] for _ in sides]
    for _ in range(reps):
        for side, ralph in enumerate(sides):
            if read:
                forget(repo)
            times[side].append(seconds(ralph, repo, args))
    return times


def forget(repo: Path) -> None:
    shutil.rmtree(repo / ".git" / "ralph" / ".answers", ignore_errors=True)


def after_runs(repo: Path, args: list[str], sides: list[Path], runs: int) -> list[list[tuple[float, float]]]:
    """Each side's (wall, CPU) seconds of the first call after a new run of one lap (the sides in
    turns, which one goes first alternating)."""
    times: list[list[tuple[float, float]]] = [[] for _ in sides]
    for n in range(runs):
        made = subprocess.run(
            [str(OURS), "run", "--name", f"a{args[0]}{n:02d}", "--max-laps", "1", "--quiet"],
            cwd=repo,
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert made.returncode == 3, made.stdout + made.stderr
        order = list(enumerate(sides))
        for side, ralph in order if n % 2 == 0 else order[::-1]:
            times[side].append(seconds(ralph, repo, args))
    return times


def row(shape: str, args: list[str], case: str, times: list[list[tuple[float, float]]], counts: list[object]) -> list:
    cells = [shape, " ".join(args), case]
    for side, count in enumerate(counts):
        walls, cpus = zip(*times[side], strict=True)
        cells += [f"{median(walls):.3f}", f"{median(cpus):.3f}", str(count)]
    if len(times) == 2:
        pairs = list(zip(times[0], times[1], strict=True))
        cells.append(f"{statistics.median(ours[0] / theirs[0] for ours, theirs in pairs):.2f}")
        cells.append(f"{statistics.median(ours[1] / theirs[1] for ours, theirs in pairs):.2f}")
    return cells


def counted(sides: list[Path], repo: Path, args: list[str], shims: Path, *, read: bool) -> list[object]:
    """Each side's git processes for one more run of the command (`read`: no answer kept before it)."""
    counts: list[object] = []
    for ralph in sides:
        if read:
            forget(repo)
        counts.append(git_processes(ralph, repo, args, shims))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="3,10,30", help="runs in the repository, comma-separated")
    parser.add_argument("--laps", type=int, default=3, help="laps of each run")
    parser.add_argument("--long", type=int, default=30, help="laps of each of 3 runs, for a repository of long runs")
    parser.add_argument("--reps", type=int, default=11, help="timed runs of each command on each side")
    parser.add_argument("--after-runs", type=int, default=5, help="new runs, each followed by one timed call a side")
    parser.add_argument("--against", type=Path, help="another ralph's console script, timed in turns with this one")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ralph-bench-status-"))
    shims = make_shims(root)
    sides = [OURS, *([options.against] if options.against else [])]
    shapes = [(int(runs), options.laps) for runs in options.runs.split(",")] + (
        [(3, options.long)] if options.long else []
    )
    columns = ["runs × laps", "command", "case", "this s", "cpu s", "git"]
    if options.against:
        columns += ["against s", "cpu s", "git", "this ÷ against", "cpu ÷"]
    rows = []
    for runs, laps in shapes:
        repo = repo_with_runs(root, runs, laps)
        shape = f"{runs} × {laps}"
        for args in COMMANDS:
            for case, read in (("again", False), ("read", True)):
                times = measure(repo, args, sides, options.reps, read=read)
                rows.append(row(shape, args, case, times, counted(sides, repo, args, shims, read=read)))
        for args in COMMANDS[:2]:  # what a run keeps at its end
            times = after_runs(repo, args, sides, options.after_runs)
            rows.append(row(f"{shape} + {options.after_runs}", args, "after a run", times, ["-"] * len(sides)))
    print(table(columns, rows))
    print(f"\nmedians of {options.reps} runs each ({options.after_runs} after a run), the sides in turns; ", end="")
    print(f"{os.cpu_count()} cores, load {' '.join(f'{load:.1f}' for load in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
