"""Run the repository's own checks on a worktree, with per-test results where pytest runs.

Each check either ran (passed or failed) or could not run (ralph/verdict/could_not_run.py); where the
cause lies outside the lap, in the sandbox or a full disk, the run itself cannot go on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel

from ralph.config.sections import CheckSpec
from ralph.errors import RalphError
from ralph.isolation import proc
from ralph.isolation.files import remove_path
from ralph.isolation.jail import Jail
from ralph.show import events
from ralph.todo import Counts
from ralph.verdict import could_not_run, junit, pytest_results
from ralph.verdict.pytest_results import TestResults

TAIL_CHARS = 4000
DISK_LOW = 64 << 20  # bytes free in the workspace below which "No space left on device" is the machine's


class CheckResult(BaseModel):
    command: str
    exit_code: int
    duration_s: float
    timed_out: bool = False
    output_tail: str = ""
    attempts: int = 1
    flaky: bool = False  # failed, then passed on a retry
    tests: TestResults | None = None  # when the check ran pytest
    could_not_run: str = ""  # why the check could not run (no verdict at all); empty when it ran

    @property
    def passed(self) -> bool:
        """It ran, exited 0 in time, and, where pytest ran, no failing test is in its report: an
        exit code a test forced (`os._exit(0)` at exit) does not outvote the outcomes."""
        return (
            not self.could_not_run
            and self.exit_code == 0
            and not self.timed_out
            and not (self.tests and self.tests.failing_ids)
        )


def run_checks(
    specs: list[CheckSpec],
    worktree: Path,
    *,
    timeout: float,
    env: dict[str, str],
    log_dir: Path,
    jail: Jail | None = None,
    user_tree: Path | None = None,
    idle_timeout: float | None = None,
) -> list[CheckResult]:
    """Each check through the shell in `worktree` (inside `jail` when sandboxed); full output
    spilled under `log_dir`. pytest notes the modules it ran from `user_tree`."""
    if user_tree is not None:
        env = dict(env, RALPH_PYTEST_USER_TREE=str(user_tree))
    results = []
    for index, spec in enumerate(specs, 1):
        result = _run_one(spec, index, worktree, timeout, env, log_dir, jail, idle_timeout)
        events.emit(
            "check_finished",
            command=result.command,
            passed=result.passed,
            could_not_run=result.could_not_run or None,
            exit_code=result.exit_code,
            duration_s=result.duration_s,
            tests_passed=result.tests.counts.passed if result.tests else None,
            tests_failed=len(result.tests.failing_ids) if result.tests else None,
        )
        results.append(result)
    return results


def _run_one(
    spec: CheckSpec,
    index: int,
    worktree: Path,
    timeout: float,
    env: dict[str, str],
    log_dir: Path,
    jail: Jail | None,
    idle_timeout: float | None,
) -> CheckResult:
    # pytest writes its report where the check may write: the sandbox's /tmp, seen outside as jail.tmp
    reports, seen_as = (jail.tmp, Path("/tmp")) if jail else (log_dir, log_dir)
    for attempt in range(1, spec.retries + 2):  # noqa: B007 (the attempt that ended it is recorded)
        report = reports / f"check-{index}.pytest.jsonl"
        remove_path(report)  # whatever the last attempt left there: a file, a folder, a link
        if spec.junit:
            junit.remove(worktree, spec.junit)  # and what the last check (or the lap) left as its report
        check_env = pytest_results.check_env(env, seen_as / report.name)
        idle = proc.Idle(idle_timeout, worktree) if idle_timeout else None
        done = proc.run(
            spec.run,
            worktree,
            env=check_env,
            timeout=timeout,
            spill=log_dir / f"check-{index}.log",
            jail=jail,
            idle=idle,
        )
        if done.ok:
            break
    tail = done.tail(TAIL_CHARS)
    if idle is not None and idle.fired:
        tail += f"\n[ralph: idle — printed nothing and changed no file for {idle.seconds:g}s, and was stopped]"
    elif done.timed_out:
        tail += f"\n[ralph: timed out after {timeout:g}s and was killed]"
    tests, unreadable = pytest_results.read(report), None
    if spec.junit and tests is None:  # pytest's own report, where pytest ran, says more
        tests, unreadable = _junit_results(spec.junit, worktree)
    _refuse_outside_causes(spec.run, done, worktree, jail)
    why = None if done.timed_out else could_not_run.reason(spec.run, done.exit_code, done.output, tests, unreadable)
    return CheckResult(
        command=spec.run,
        exit_code=done.exit_code,
        duration_s=round(done.duration, 3),
        timed_out=done.timed_out,
        output_tail=tail,
        attempts=attempt,
        flaky=done.ok and attempt > 1,
        tests=tests,
        could_not_run=why or "",
    )


def _junit_results(pattern: str, worktree: Path) -> tuple[TestResults | None, str | None]:
    """The check's JUnit reports, read whole, or why they cannot be (none written, unreadable)."""
    try:
        found = junit.read(junit.matching(worktree, pattern), root=worktree)
    except junit.ReportUnreadable as unreadable:
        return None, f"its JUnit report cannot be read: {unreadable}"
    return (found, None) if found is not None else (None, f"it wrote no JUnit report at `{pattern}`")


def _refuse_outside_causes(command: str, done: proc.Completed, worktree: Path, jail: Jail | None) -> None:
    """A check that could not run for a cause outside the lap stops the run: the sandbox could
    not start (bubblewrap's own error, and it cannot start `true` either, so a lap that prints
    bubblewrap's words cannot fake it), or the disk is full."""
    if done.ok:
        return
    first = next((line.strip() for line in done.output.splitlines() if line.strip()), "")
    if jail is not None and first.startswith("bwrap: ") and not proc.run("true", worktree, jail=jail, timeout=60).ok:
        raise RalphError(
            f"the sandbox could not start the check `{command}`: {first[:200]} — `ralph doctor` says what "
            "the sandbox needs; `sandbox: off` runs laps without it"
        )
    if "No space left on device" in done.output and shutil.disk_usage(worktree).free < DISK_LOW:
        raise RalphError(f"the disk is full: the check `{command}` could not run — free some space, then `ralph run`")


def all_pass(results: list[CheckResult]) -> bool:
    return all(result.passed for result in results)


def done(results: list[CheckResult], counts: Counts) -> bool:
    """The one rule for a run's end: every check passes and the TODO has items, none open."""
    return all_pass(results) and counts.open == 0 and counts.total > 0


def passing_tests(results: list[CheckResult]) -> int:
    return sum(result.tests.counts.passed for result in results if result.tests)
