"""Every script in bench/ runs, each in a tiny mode of seconds, so a change to what a script
calls breaks the suite instead of the numbers (issue 41: two scripts had failed at HEAD for
weeks). What they measure is for a person to read: bench/RESULTS.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
# Each script's smallest run that still goes through all of its code.
TINY = {
    "bench_prep.py": ["--jobs", "1", "--reps", "1"],
    "git_options.py": ["--files", "20", "--laps", "1"],
    "judging_cost.py": ["--tests", "20", "--sizes", "20", "--reps", "1"],
    "judging_scale.py": ["--sizes", "1000", "--reps", "1"],  # (below 100 tests no test newly fails)
    "lap_git.py": ["--files", "50"],
    "lap_overhead.py": ["--sizes", "50", "--laps", "2", "--reps", "1", "--long", "0"],
    "long_run.py": ["--laps", "2", "--files", "20"],
    "paired.py": ["--against", "..", "--pairs", "1", "todo_parse.py", "--items", "100", "--reps", "1"],
    "parallel.py": ["--items", "2", "--sleep", "0.2", "--slots", "2", "--workers", ""],
    "run_start.py": ["--sizes", "100", "--reps", "1"],
    "sandbox_cost.py": ["--sizes", "20", "--laps", "1", "--reps", "1"],
    "status_time.py": ["--runs", "1", "--laps", "1", "--long", "0", "--reps", "1", "--after-runs", "1"],
    "todo_parse.py": ["--items", "100", "--reps", "1"],
    "token_growth.py": ["--laps", "2"],
}


def test_every_script_has_a_tiny_mode() -> None:
    scripts = {path.name for path in BENCH.glob("*.py")} - {"common.py"}
    assert scripts == set(TINY)


@pytest.mark.parametrize("script", sorted(TINY))
def test_the_script_runs_and_prints_its_table(script: str) -> None:
    done = subprocess.run(
        [sys.executable, script, *TINY[script]], cwd=BENCH, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "|---" in done.stdout  # its markdown table
