"""Throughput of `ralph run --parallel N`, and what contention costs.

1. Throughput. A job of independent items; the stand-in agent sleeps (an agent's time
   dominates a real lap), writes its items' files and ticks them. Items per minute with 1, 2
   and 4 slots, and the ratio to 1 slot (a plain `ralph run`, laps one at a time), measured
   one after the other in one run.
   Then the same job with 2 and 4 workers of `ralph run --remote origin`, each on a clone of
   one bare repository (a file:// remote on this machine): what the git remote as the
   coordinator costs beside slots of one repository (fetches and pushes around each lap).
2. Contention. The same job with a share of its items all editing one line of one shared
   file: laps that had to be rebased and checked again, and laps red with a conflict, as a
   share of all laps, as that overlap grows.

After every run, ledger.audit must find nothing: each commit on the green line has a green
note written for exactly it, each lap its note, no claim left.

    python bench/parallel.py    # --items 8 --sleep 3 --slots 1,2,4 --workers 2,4 --overlaps 0,0.5,1
    python bench/parallel.py --items 6 --sleep 3 --slots 1,3 --workers '' --overlaps '' --repeat 5 \\
        --against ../ralph-before    # issue 41's figure, paired with an older ralph, A B A B …
    python bench/parallel.py --items 6 --sleep 3 --slots 3 --workers '' --overlaps '' --check 'sleep 1' \
        --repeat 3 --against ../ralph-before    # checks that take time: laps that wait to land

The speed-up of issue 41 is the items' agent time over the run's: items × sleep ÷ seconds (3 at
best with 3 slots, when only the agents took time); "× 1 slot" is the ratio to the plain run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import as_installed, git, median, table

from ralph.records import ledger

AGENT = r"""
import os, pathlib, re, time
time.sleep(SLEEP)
todo = pathlib.Path("TODO.md")
text = todo.read_text()
# Its items; run without slots (1 slot is a plain `ralph run`), the first open one.
items = [line for line in os.environ.get("RALPH_ITEMS", "").splitlines() if line]
items = items or re.findall(r"- \[ \] (.*)", text)[:1]
for item in items:
    name = re.match(r"Item (\d+)( shared)?", item)
    if name[2]:
        pathlib.Path("shared.txt").write_text(f"item {name[1]} was here\n")
    else:
        pathlib.Path(f"item{name[1]}.txt").write_text(item + "\n")
    text = text.replace(f"- [ ] {item}", f"- [x] {item}")
todo.write_text(text)
"""


def job(folder: Path, items: int, shared: int, sleep: float, check: str = "true") -> Path:
    repo = folder / "repo"
    repo.mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT.replace("SLEEP", str(sleep)))
    config = {
        "goal": "Benchmark: independent items",
        "agent": {"kind": "command", "command": f"{sys.executable} {folder / 'agent.py'}"},
        "checks": [check],
        "limits": {"max_laps": items * 4, "stagnation": items * 4},
    }
    names = [f"Item {n:03d}{' shared' if n <= shared else ''}" for n in range(1, items + 1)]
    (repo / "ralph.yaml").write_text(json.dumps(config))
    (repo / "TODO.md").write_text("# TODO\n" + "".join(f"- [ ] {name}\n" for name in names))
    (repo / "PROGRESS.md").write_text("# Progress\n")
    (repo / "shared.txt").write_text("nobody yet\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "job")
    return repo


def run(repo: Path, slots: int, code: Path | None = None) -> tuple[float, list[dict]]:
    """`ralph run --parallel SLOTS` in `repo`, of this checkout's ralph or (`code`) another's."""
    env = dict(os.environ, PYTHONPATH=str(code)) if code else None
    started = time.perf_counter()
    command = [sys.executable, "-m", "ralph", "run", "--name", "b", "--parallel", str(slots), "--quiet"]
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ralph run --parallel {slots} exited {done.returncode}: {done.stdout}{done.stderr}")
    return seconds, audited_laps(repo)


def run_remote(repo: Path, workers: int, code: Path | None = None) -> tuple[float, list[dict]]:
    """`workers` clones of a bare copy of `repo`, each running a worker of one run, all at once."""
    env = dict(os.environ, PYTHONPATH=str(code)) if code else None
    origin = repo.parent / "origin.git"
    git(repo.parent, "clone", "-q", "--bare", str(repo), str(origin))
    clones = [repo.parent / f"clone{number}" for number in range(workers + 1)]
    for clone in clones:
        git(repo.parent, "clone", "-q", origin.as_uri(), str(clone))
    command = [sys.executable, "-m", "ralph", "run", "--remote", "origin", "--name", "b", "--quiet"]
    started = time.perf_counter()
    running = [subprocess.Popen(command, cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env) for clone in clones[1:]]  # fmt: skip
    outputs = [process.communicate()[0] for process in running]
    seconds = time.perf_counter() - started
    if any(process.returncode != 0 for process in running):
        raise SystemExit(f"a worker of {workers} failed: {outputs}")
    observer = clones[0]  # the run as the remote has it, fetched, for the audit
    status = [sys.executable, "-m", "ralph", "status", "--remote", "origin"]
    subprocess.run(status, cwd=observer, check=True, capture_output=True)
    return seconds, audited_laps(observer)


def audited_laps(repo: Path) -> list[dict]:
    """The run's lap records, once ledger.audit found its promises kept."""
    problems = ledger.audit(repo, "b")
    if problems:
        raise SystemExit(f"the run broke its promises: {problems}")
    state = ledger.load(repo, "b")
    assert state is not None
    return [lap.record.model_dump() for lap in state.laps if lap.record]


def throughput(options: argparse.Namespace) -> None:
    """Each configuration `--repeat` times, alternating with the ralph of `--against` if given."""
    codes: list[tuple[str, Path | None]] = [("this", None)]
    codes += [(f"{options.against}", options.against)] if options.against else []
    if options.against:
        as_installed(options.against)
    runs: list[tuple[str, int, Callable[..., tuple[float, list[dict]]]]]
    runs = [(f"{count} slots", count, run) for count in options.slots]
    runs += [(f"{count} workers", count, run_remote) for count in options.workers]
    load_before = _load()
    seconds: dict[tuple[str, str], list[float]] = {}
    laps: dict[tuple[str, str], int] = {}
    for _ in range(options.repeat):  # A B A B …: the machine's load falls on both alike
        for label, count, runner in runs:
            for name, code in codes:
                with tempfile.TemporaryDirectory(prefix="ralph-bench-parallel-") as folder:
                    repo = job(Path(folder), options.items, 0, options.sleep, options.check)
                    took, done = runner(repo, count, code)
                seconds.setdefault((label, name), []).append(took)
                laps[label, name] = len(done)
    ideal = options.items * options.sleep  # the agents' time alone, were every lap side by side at no cost
    rows = []
    for label, count, _ in runs:
        for name, _ in codes:
            taken = median(seconds[label, name])
            alone = median(seconds.get((f"{min(options.slots)} slots", name), [taken]))
            rows.append(
                [label, name, options.items, laps[label, name], taken, min(seconds[label, name]), ideal / taken]
                + [alone / taken, alone / taken / count * min(options.slots)]
            )
    print(
        f"## Throughput: {options.items} independent items, the agent {options.sleep:g} s a lap, check `{options.check}`\n"
    )
    print(f"median of {options.repeat} runs; load average before: {load_before}\n")
    columns = ["side by side", "ralph", "items", "laps", "seconds", "min", "items × sleep ÷ seconds"]
    print(table(columns + [f"× {min(options.slots)} slots", "÷ N"], rows))
    print(f"\nload average after: {_load()}")


def contention(options: argparse.Namespace) -> None:
    rows = []
    for overlap in options.overlaps:
        shared = round(options.items * overlap)
        with tempfile.TemporaryDirectory(prefix="ralph-bench-parallel-") as folder:
            repo = job(Path(folder), options.items, shared, options.sleep, options.check)
            seconds, laps = run(repo, max(options.slots))
        rebased = sum("rebased onto" in lap["reason"] for lap in laps)
        conflicts = sum(lap["reason"].startswith("conflict:") for lap in laps)
        rows.append([overlap, shared, len(laps), rebased / len(laps), conflicts / len(laps), seconds])
    print(f"\n## Contention: {options.items} items, {max(options.slots)} slots, a share editing one line of one file\n")
    print(table(["overlap", "shared items", "laps", "rebased and checked again", "red: conflict", "seconds"], rows))


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _numbers(kind: Callable[[str], float]) -> Callable[[str], list]:
    return lambda text: [kind(value) for value in text.split(",") if value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=3.0, help="seconds the stand-in agent takes a lap")
    parser.add_argument("--slots", type=_numbers(int), default="1,2,4")
    parser.add_argument("--workers", type=_numbers(int), default="2,4", help="workers of `ralph run --remote`")
    parser.add_argument("--overlaps", type=_numbers(float), default="0,0.5,1", help="shares editing one shared line")
    parser.add_argument("--check", default="true", help="the job's check command (`sleep 1`: checks that take time)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each configuration; the table has medians")
    parser.add_argument("--against", type=Path, help="another ralph checkout, run alternately with this one")
    options = parser.parse_args()
    throughput(options)
    if options.overlaps:
        contention(options)


if __name__ == "__main__":
    main()
