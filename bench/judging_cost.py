"""What judging a lap costs beyond the checks themselves (issue 9's additions).

1. ralph's pytest plugin: one pytest session of N trivial tests with the plugin (and its
   report read back) against the same session without it, taking turns.
2. Deleting bytecode before the checks: over a tree of N files of which a quarter are
   `.pyc` in `__pycache__` folders (deleted), then again with none left (the walk alone),
   against `git status` on the same tree for scale.
3. The static shadowing rule's listing of two commits of N files (`git ls-tree -r`), paid
   only by laps that add a module, a link or a startup file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import git, median, table, timed  # common isolates HOME first

from ralph import git as ralph_git
from ralph.facts import pytest_results
from ralph.isolation.files import BYTECODE, remove_bytecode


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="ralph-bench-judging-"))


def run(command: list[str], cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)


def pytest_session(folder: Path, tests: int, reps: int) -> tuple[float, float]:
    (folder / "test_many.py").write_text("".join(f"def test_{n}():\n    assert {n} == {n}\n" for n in range(tests)))
    report = folder / "report.jsonl"
    plain_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    ours_env = pytest_results.check_env(plain_env, report)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_many.py"]
    plain, ours = [], []
    for _ in range(reps):
        plain.append(timed(run, command, folder, plain_env)[0])
        report.unlink(missing_ok=True)
        ours.append(timed(run, command, folder, ours_env)[0] + timed(pytest_results.read, report)[0])
    return median(plain), median(ours)


def bytecode_walk(folder: Path, files: int) -> tuple[float, float, float]:
    for n in range(files):
        sub = folder / f"pkg{n // 400}" / ("__pycache__" if n % 4 == 0 else "")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"m{n}.{'pyc' if n % 4 == 0 else 'py'}").write_bytes(b"x")
    git(folder, "init", "-q")
    status = timed(git, folder, "status", "--porcelain", "-uall")[0]

    def found_and_removed() -> None:  # as the workspace does it: git lists, ralph deletes
        remove_bytecode(folder, git(folder, "ls-files", "-o", "--", *BYTECODE).splitlines(), made=lambda path: True)

    return timed(found_and_removed)[0], timed(found_and_removed)[0], status


def listing(folder: Path, files: int) -> float:
    for n in range(files):
        sub = folder / f"d{n // 500}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{n}.py").write_bytes(b"")
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "files")
    return timed(lambda: (ralph_git.files_at(folder, "HEAD"), ralph_git.files_at(folder, "HEAD")))[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", default="100,2000")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--reps", type=int, default=5)
    options = parser.parse_args()
    rows = []
    for tests in map(int, options.tests.split(",")):
        plain, ours = pytest_session(scratch(), tests, options.reps)
        rows.append([f"{tests:,} tests", plain, ours, ours / plain])
    print(table(["pytest session", "without plugin (s)", "with plugin + read (s)", "ratio"], rows))
    rows = []
    for files in map(int, options.sizes.split(",")):
        deleting, walking, status = bytecode_walk(scratch(), files)
        rows.append([f"{files:,}", deleting * 1000, walking * 1000, status * 1000, listing(scratch(), files) * 1000])
    print()
    print(
        table(
            [
                "files in the tree",
                "delete a quarter as bytecode (ms)",
                "nothing to delete (ms)",
                "`git status -uall` (ms)",
                "shadowing's two listings (ms)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
