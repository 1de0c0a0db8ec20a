"""Does a long run leak? Open file descriptors, child processes, threads and memory over N laps.

    python bench/long_run.py                   # 200 laps
    python bench/long_run.py --laps 20         # quick
    python bench/long_run.py --agent openai    # the built-in agent against the scripted server

One in-process run (`ralph.run.loop.run(RunOptions(cwd=repo, name=..., max_laps=N))`) in the
main thread, with the check `true` and an agent that ticks one TODO item a lap: a command
agent (a shell one-liner), or the built-in openai agent talking to ralph's scripted server,
which then runs in this process too (its sockets and request threads count).
A background thread samples every 0.2 s: open fds (/proc/self/fd), descendant processes
and how many of them are `git` or zombies (the /proc ppid chain leading to this process),
threads (the sampler not counted) and RSS (/proc/self/status VmRSS). `ralph.run.loop.run_lap`
is wrapped to take one more sample right after each lap, when nothing should be running:
those give the first-vs-last-laps columns.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from common import command_agent, make_repo, median, openai_agent, ralph_yaml, table
from token_growth import SOURCE, next_step

import ralph.run.loop
from ralph.agents.scripted import ScriptedServer
from ralph.run.options import RunOptions
from ralph.show import ui

METRICS = ["fds", "children", "git children", "zombies", "threads", "rss MB"]


def descendants() -> list[tuple[str, str]]:
    """(command name, state) of every process whose parent chain leads to this one."""
    parents, seen = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # it exited while we looked
            name, _, rest = stat.partition(" (")[2].rpartition(") ")
            fields = rest.split()
            parents[int(entry)], seen[int(entry)] = int(fields[1]), (name, fields[0])
    found, frontier = [], {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        found += [seen[pid] for pid in frontier]
    return found


def sample() -> dict[str, float]:
    children = descendants()
    status = Path("/proc/self/status").read_text()
    rss_kb = int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "children": len(children),
        "git children": sum(name == "git" for name, _ in children),
        "zombies": sum(state == "Z" for _, state in children),
        "threads": sum(not isinstance(t, Sampler) for t in threading.enumerate()),
        "rss MB": rss_kb / 1024,
    }


class Sampler(threading.Thread):
    def __init__(self, every: float = 0.2):
        super().__init__(daemon=True)
        self.every, self.samples, self.stop = every, [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.samples.append(sample())


def sample_after_each_lap(after_lap: list[dict], between_laps: Callable[[], None]) -> None:
    run_lap = ralph.run.loop.run_lap

    def sampled_lap(ctx, state, number, *more):  # more: which agent, as the loop passes it
        record = run_lap(ctx, state, number, *more)
        between_laps()
        after_lap.append(sample())
        return record

    ralph.run.loop.run_lap = sampled_lap


def measure(repo: Path, laps: int, between_laps: Callable[[], None]) -> tuple[int, dict, list, list, dict]:
    """Exit code; a sample before, the background samples, one after each lap, one after the run."""
    after_lap: list[dict] = []
    sample_after_each_lap(after_lap, between_laps)
    before, sampler = sample(), Sampler()
    sampler.start()
    code = ralph.run.loop.run(RunOptions(cwd=repo, name="long", max_laps=laps))
    sampler.stop.set()
    sampler.join()
    return int(code), before, sampler.samples, after_lap, sample()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--laps", type=int, default=200)
    parser.add_argument("--files", type=int, default=100, help="files in the repository")
    parser.add_argument("--agent", choices=["command", "openai"], default="command")
    args = parser.parse_args()
    ui.console.quiet = True
    server = ScriptedServer(next_step) if args.agent == "openai" else None
    with tempfile.TemporaryDirectory(prefix="ralph-bench-") as root, server or contextlib.nullcontext():
        agent = openai_agent(server.base_url) if server else command_agent()
        repo = make_repo(
            Path(root) / "repo",
            ralph_yaml(agent),
            items=args.laps + 10,
            files={"src/app.py": SOURCE},
            filler=args.files,
        )
        # The scripted server keeps every request it got; that memory is the benchmark's, not ralph's.
        forget = server.requests.clear if server else lambda: None
        code, before, samples, after_lap, after = measure(repo, args.laps, forget)
    window = min(20, len(after_lap) // 2)
    first, last = after_lap[:window], after_lap[-window:]
    rows = [
        [
            metric,
            before[metric],
            min(s[metric] for s in samples),
            median(s[metric] for s in samples),
            max(s[metric] for s in samples),
            median(s[metric] for s in first),
            median(s[metric] for s in last),
            after[metric],
        ]
        for metric in METRICS
    ]
    print(
        f"{len(after_lap)} laps of the {args.agent} agent (exit {code}), {len(samples)} samples every 0.2 s; "
        f"after-lap medians of the first and last {window} laps.\n"
    )
    print(
        table(
            ["metric", "before", "min", "median", "max", f"first {window} laps", f"last {window} laps", "after run"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
