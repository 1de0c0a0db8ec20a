"""What `ralph bench` spends before its first job runs: a job built from nothing (the sdist
downloaded through pip, cut, its finished form checked, committed), from a kept sdist, and from
the cache, for every job, side by side in one run; then `ralph bench --list` as a process,
cold and warm.

    python bench/bench_prep.py              # every job, 3 warm repetitions
    python bench/bench_prep.py --reps 5

Each phase gets a fresh cache folder ($RALPH_BENCH_CACHE) in a temp dir: "download" starts
empty; "kept sdist" has the sdists but no built job; "cached" has both. Times are wall
seconds; warm ones the median of --reps.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import median, table  # importing common isolates HOME and git's identity

from ralph.bench import build, jobs


def timed_prepare(job: jobs.Job, cache: Path) -> float:
    started = time.perf_counter()
    build.prepared(job, cache)
    return time.perf_counter() - started


def listing(cache: Path) -> float:
    started = time.perf_counter()
    env = dict(os.environ, RALPH_BENCH_CACHE=str(cache))
    subprocess.run([sys.executable, "-m", "ralph", "bench", "--list"], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=len(jobs.JOBS), help="the first N jobs (fewer: no --list timing)")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ralph-bench-prep-"))
    fresh, kept = root / "fresh", root / "kept"
    rows = []
    for job in jobs.JOBS[: options.jobs]:
        cold = timed_prepare(job, fresh)
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(fresh / "sdists", kept / "sdists")
        from_sdist = timed_prepare(job, kept)
        warm = median([timed_prepare(job, kept) for _ in range(options.reps)])
        rows.append(
            [job.name, f"{cold:.2f}", f"{from_sdist:.2f}", f"{warm * 1000:.1f} ms", f"{from_sdist / warm:.0f}×"]
        )
    print(table(["job", "download + build s", "build s (sdist kept)", "cached", "build / cached"], rows))
    if options.jobs < len(jobs.JOBS):  # (the listing prepares every job)
        return
    cold_list = listing(root / "listed")
    warm_list = median([listing(root / "listed") for _ in range(options.reps)])
    print(f"\n`ralph bench --list` as a process: {cold_list:.1f} s from nothing, {warm_list:.2f} s cached")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
