"""Each git command of one ralph lap, with its seconds: where a lap's git time goes.

    python bench/lap_git.py                    # 10,000 files, the 3rd of 4 laps
    python bench/lap_git.py --files 100000 --lap 3

Same repository and agent as lap_overhead.py (tick one item, append a line; the check is
`true`); the laps run in-process with `ralph.isolation.proc.run` wrapped to time each git
process. Options that only say where git looks (`--git-dir`, `--work-tree`, `-c`) are left out
of the listing. The rest of a lap's wall time is ralph's Python and the sandboxed commands.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import command_agent, make_repo, ralph_yaml, timed

import ralph.run.loop
from ralph.isolation import proc
from ralph.run.options import RunOptions
from ralph.show import ui

_WHERE = frozenset({"--git-dir", "--work-tree", "-c"})  # each takes one value


def shown(command: list[str]) -> str:
    """A git command line without the options that only say where git looks."""
    words, skip = [], False
    for word in command[1:]:
        if skip or word in _WHERE:
            skip = not skip
            continue
        words.append(word)
    return " ".join(words)[:100]


def traced_laps(repo: Path, laps: int) -> tuple[list[tuple[int, str, float]], dict[int, float]]:
    """Run `laps` laps; every git command as (lap, command, seconds), and each lap's wall time."""
    commands: list[tuple[int, str, float]] = []
    walls: dict[int, float] = {}
    current = [0]
    run_lap, run_process = ralph.run.loop.run_lap, proc.run

    def timed_lap(ctx, state, turn):
        current[0] = turn.number
        walls[turn.number], record = timed(run_lap, ctx, state, turn)
        return record

    def timed_process(command, cwd, **options):
        seconds, done = timed(run_process, command, cwd, **options)
        if isinstance(command, list) and command[0] == "git":
            commands.append((current[0], shown(command), seconds))
        return done

    ralph.run.loop.run_lap, proc.run = timed_lap, timed_process
    try:
        ralph.run.loop.run(RunOptions(cwd=repo, name="traced", max_laps=laps))
    finally:
        ralph.run.loop.run_lap, proc.run = run_lap, run_process
    return commands, walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10000, help="files in the repository")
    parser.add_argument("--lap", type=int, default=3, help="the lap to list (of lap + 1 run)")
    args = parser.parse_args()
    ui.console.quiet = True
    with tempfile.TemporaryDirectory(prefix="ralph-bench-") as root:
        repo = make_repo(Path(root) / "repo", ralph_yaml(command_agent()), items=100, filler=args.files)
        commands, walls = traced_laps(repo, args.lap + 1)
    mine = [(command, seconds) for lap, command, seconds in commands if lap == args.lap]
    git_s = sum(seconds for _, seconds in mine)
    print(
        f"Lap {args.lap} at {args.files} files: {walls[args.lap]:.3f} s, {len(mine)} git processes, {git_s:.3f} s of git.\n"
    )
    print("| ms | git command |\n|---|---|")
    for command, seconds in mine:
        print(f"| {seconds * 1000:.1f} | `{command}` |")


if __name__ == "__main__":
    main()
