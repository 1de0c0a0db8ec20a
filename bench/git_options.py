"""What git's options for big trees buy a lap: index version 4, the untracked cache, feature.manyFiles.

    python bench/git_options.py                 # 100,000 files, 7 laps per option
    python bench/git_options.py --files 10000 --laps 5

One reused worktree of a repository of `--files` small files; each "lap" is the bare-git lap of
bench/lap_overhead.py (`checkout -f --detach`, `clean -fd`, a one-line edit, `add -A`, `commit`),
then ralph's own index-reading steps on a copy of the worktree's index, as its workspace runs
them (`checkout -f`, `clean -ffd`, `ls-files -o` of bytecode, `add -A`). Each option
set takes its turn lap by lap, so all share the machine's mood; medians per step.
ralph keeps the untracked cache and fsmonitor off for its own git (docs/design.md):
their rows say what that costs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import command_agent, git, make_repo, median, ralph_yaml, table, timed

from ralph.isolation.files import BYTECODE

OPTIONS = {  # each with a worktree and an index of its own
    "default": ["-c", "core.untrackedCache=false"],
    "index.version=4": ["-c", "index.version=4", "-c", "core.untrackedCache=false"],
    "core.untrackedCache": ["-c", "core.untrackedCache=true"],
    "feature.manyFiles (v4 + untracked cache)": ["-c", "feature.manyFiles=true"],
}


def bare_steps(worktree: Path, options: list[str], number: int) -> dict[str, float]:
    def step(*args: str) -> float:
        return timed(git, worktree, *options, *args)[0]

    steps = {"checkout -f": step("checkout", "-q", "-f", "--detach", "HEAD"), "clean -fd": step("clean", "-q", "-fd")}
    (worktree / "work.txt").write_text(f"{number}\n")
    steps["add -A"] = step("add", "-A")
    steps["commit"] = step("commit", "-q", "-m", f"lap {number}")
    return steps


def ralph_steps(worktree: Path, index: Path, options: list[str]) -> dict[str, float]:
    env = dict(os.environ, GIT_INDEX_FILE=str(index))

    def step(*args: str) -> float:
        command = ["git", *options, "-c", "core.fsmonitor=false", *args]
        return timed(subprocess.run, command, cwd=worktree, env=env, check=True, capture_output=True)[0]

    return {
        "checkout -f": step("checkout", "-q", "-f", "--detach", "HEAD", "--"),
        "clean -ffd": step("clean", "-q", "-ffd"),
        "ls-files -o bytecode": step("ls-files", "-o", "--", *BYTECODE),
        "add -A (ralph)": step("add", "-A"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--laps", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ralph-bench-") as root:
        repo = make_repo(Path(root) / "repo", ralph_yaml(command_agent()), items=1, filler=args.files)
        worktrees, indexes = {}, {}
        for number, (name, options) in enumerate(OPTIONS.items()):
            worktrees[name], indexes[name] = Path(root) / f"worktree-{number}", Path(root) / f"index-{number}"
            git(repo, "worktree", "add", "-q", "--detach", str(worktrees[name]), "HEAD")
            version = "4" if {"index.version=4", "feature.manyFiles=true"} & set(options) else "2"
            subprocess.run(
                ["git", *options, "update-index", "--index-version", version], cwd=worktrees[name], check=True
            )
            index = git(worktrees[name], "rev-parse", "--path-format=absolute", "--git-path", "index")
            shutil.copyfile(index, indexes[name])
        readings: dict[str, list[dict[str, float]]] = {name: [] for name in OPTIONS}
        for number in range(args.laps):
            for name, options in OPTIONS.items():
                steps = bare_steps(worktrees[name], options, number)
                steps.update(ralph_steps(worktrees[name], indexes[name], options))
                readings[name].append(steps)
            print(f"  lap {number + 1} of {args.laps}", file=sys.stderr)
    names = list(next(iter(readings.values()))[0])
    rows = [[name, *(median(r[step] for r in laps) for step in names)] for name, laps in readings.items()]
    print(f"{args.files} files, medians of {args.laps} laps, seconds per step.\n")
    print(table(["options", *names], rows))


if __name__ == "__main__":
    main()
