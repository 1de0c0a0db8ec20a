"""40 laps in one process: no growth in open file descriptors or child git processes, and
bounded memory (GitPython's long-lived Repo objects leak `git cat-file` processes; ralph
opens and closes per use)."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from helpers.repos import make_repo

import ralph.lap.phases as lap_module
from ralph.run.loop import run
from ralph.run.options import RunOptions

LAPS = 40  # a leak of one per lap shows in 30; 200 laps: bench/long_run.py measures memory (bench/RESULTS.md)
AGENT = "echo $RALPH_LAP > lap.txt && sed -i '0,/- \\[ \\]/s//- [x]/' TODO.md"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def child_processes() -> list[str]:
    me, found = str(os.getpid()), []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me:
            command = (entry / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
            found.append(f"{entry.name} {command}")
    return found


def batch_readers(children: list[str]) -> int:
    """ralph's own `git cat-file --batch` (git/blobs.py): one a repository, while a run runs."""
    return sum(1 for child in children if " git " in child and child.rstrip().endswith("cat-file --batch"))


def test_40_laps_in_one_process_leak_nothing(tmp_path: Path, monkeypatch):
    todo = "".join(f"- [ ] step {n}\n" for n in range(1, LAPS + 1))
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": AGENT},
        "checks": ["true"],
        "limits": {"max_laps": LAPS, "stagnation": 5},
    }
    repo = make_repo(tmp_path / "repo", {"TODO.md": todo}, config=config)
    samples: list[tuple[int, int, int]] = []
    earlier = set(child_processes())

    real_run_lap = lap_module.run_lap

    def sampled_run_lap(*args, **kwargs):  # observe between laps; the lap itself runs unchanged
        children = [child for child in child_processes() if child not in earlier]  # (other tests' in this worker)
        assert batch_readers(children) <= 1, children
        others = len(children) - batch_readers(children)
        samples.append((open_fds(), others, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
        return real_run_lap(*args, **kwargs)

    monkeypatch.setattr("ralph.run.loop.run_lap", sampled_run_lap)
    assert run(RunOptions(cwd=repo, name="long")) == 0
    assert len(samples) == LAPS
    early, late = samples[10], samples[-1]
    assert late[0] <= early[0], f"open file descriptors grew: {early[0]} → {late[0]}"
    assert late[1] == 0 and all(children == 0 for _, children, _ in samples), "child processes left between laps"
    assert set(child_processes()) <= earlier  # the run's reader ended with it
    assert late[2] - early[2] < 50_000, f"peak RSS grew by {late[2] - early[2]} KiB over {LAPS - 10} laps"
