"""Where a check's per-test results come from, besides pytest's plugin (which every pytest session
loads): a report file the check writes (JUnit XML, jest's JSON), or the check's own output
(`go test -json`, cargo's libtest, `python -m unittest -v`), read whole from the spill file ralph
wrote outside the sandbox, never from the capped copy people read.

Each gives the same TestResults, so one ratchet judges them all. A check with a reader is judged
by it alone (any test can write at the pytest report's path); one that declares (or whose command
implies) a reader and gives nothing it can read could not run: nothing was judged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ralph.config.sections import CheckSpec
from ralph.facts import junit
from ralph.facts.pytest_results import TestResults, _regular_file
from ralph.verdict import go_test, jest_results, libtest, unittest_results

# What each output reader reads, as people know it, for the reason a check gives nothing.
STREAMS = {
    "go": (go_test.read, "`go test -json` events"),
    "libtest": (libtest.read, "libtest results (`test NAME ... ok` lines)"),
    "unittest": (unittest_results.read, "unittest's verbose results (`Ran N tests`)"),
}


def remove_reports(spec: CheckSpec, workspace: Path) -> None:
    """Whatever a report path matches is deleted before the check runs: nothing is left from a
    previous check, or planted by the lap."""
    for pattern in (spec.junit, spec.jest):
        if pattern:
            junit.remove(workspace, pattern)


def reads_output(spec: CheckSpec, *, passed: bool) -> bool:
    """Is the check's whole output needed: its results are in it, or it failed (its failure lines)?"""
    return spec.reader in STREAMS or not passed


def results(spec: CheckSpec, workspace: Path, output: str) -> tuple[TestResults | None, str | None]:
    """The check's per-test results from its reader (`output` is all it printed), or why there are
    none (a one-line reason that makes the check one that could not run); (None, None) for a
    check with no reader."""
    reader = spec.reader
    if spec.junit:
        return _from_files(junit.read, spec.junit, workspace, "JUnit")
    if spec.jest:
        return _from_files(jest_results.read, spec.jest, workspace, "jest")
    if reader in STREAMS:
        read, what = STREAMS[reader]
        found = read(output, workspace)
        return (found, None) if found is not None else (None, f"its output holds no {what}")
    return None, None


def _from_files(
    read: Callable[[list[Path], Path], TestResults | None], pattern: str, workspace: Path, kind: str
) -> tuple[TestResults | None, str | None]:
    """The reports a pattern matches, read whole, or why they cannot be (none written, unreadable)."""
    try:
        found = read(junit.matching(workspace, pattern), workspace)
    except junit.ReportUnreadable as unreadable:
        return None, f"its {kind} report cannot be read: {unreadable}"
    return (found, None) if found is not None else (None, f"it wrote no {kind} report at `{pattern}`")


def whole_output(path: Path) -> str:
    """All the check printed (stdout and stderr as they came); past REPORT_MAX_BYTES nothing is
    read, so a result is never taken from part of it."""
    try:
        return _regular_file(path).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def hint(command: str) -> str:
    """How a check gets per-test results that judge every test, by the runner its command names."""
    words = command.split()
    if _stops_early(words):
        return "let it run every test: `cargo test --no-fail-fast`; drop `-x`, `--maxfail`, `--bail`, `-f`, `-failfast`"
    if "go" in words and "test" in words:
        return "run `go test -json ./...`: ralph reads its events test by test"
    if "unittest" in " ".join(words):
        return "add `-v` (`python -m unittest -v`): ralph reads its lines test by test"
    if any(word in ("npm", "npx", "pnpm", "yarn", "jest", "vitest", "mocha", "node") for word in words):
        return (
            "run the test runner itself with its report (`ralph init` writes it: node --test or vitest with "
            "`junit:`, jest with `jest:`, mocha's xunit with `junit:`)"
        )
    return (
        "declare the JUnit report it writes (`junit:`), or run a runner ralph reads "
        "(docs/trust.md: Per-test results from other runners)"
    )


# Options that stop a runner at its first failing test (or test binary), by the runner's name as
# the last part of a command word: on a red base, the tests after the first failure never run,
# so no lap could be held to them.
_FAIL_FAST: dict[str, Callable[[list[str]], bool]] = {
    "cargo": lambda words: "test" in words and "--no-fail-fast" not in words,
    "jest": lambda words: any(word == "--bail" or word.startswith("--bail=") for word in words),
    "unittest": lambda words: bool({"-f", "--failfast"} & set(words)),
    "go": lambda words: bool({"-failfast", "--failfast"} & set(words)),
    "pytest": lambda words: any(word in ("-x", "--exitfirst") or word.startswith("--maxfail") for word in words),
}


def judges_nothing(spec: CheckSpec, *, passed: bool, has_tests: bool) -> str | None:
    """Why a check that fails on the base commit could judge no lap (None: it can): it gives no
    per-test results and is not marked `expect_red`, or its runner stops at the first failure,
    leaving the tests after it unrun. `expect_red` accepts either: then it judges no lap, only
    done waits for it. The one rule `ralph run` refuses by and doctor reports."""
    if passed or spec.expect_red:
        return None
    if not has_tests:
        return "gives no per-test results"
    runner = _stops_early(spec.run.split())
    return f"stops at its first failure ({runner}), so the tests after it never run" if runner else None


def _stops_early(words: list[str]) -> str | None:
    """The runner of a command that stops at its first failure, if it does."""
    names = {word.rsplit("/", 1)[-1] for word in words}
    return next((runner for runner, stops in _FAIL_FAST.items() if runner in names and stops(words)), None)
