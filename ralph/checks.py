"""Run the repository's own checks on a worktree, with per-test results where pytest runs."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ralph import events, proc, pytest_results
from ralph.config import CheckSpec
from ralph.files import remove_path
from ralph.pytest_results import TestResults
from ralph.sandbox import Jail
from ralph.todo import Counts

TAIL_CHARS = 4000


class CheckResult(BaseModel):
    command: str
    exit_code: int
    duration_s: float
    timed_out: bool = False
    output_tail: str = ""
    attempts: int = 1
    flaky: bool = False  # failed, then passed on a retry
    tests: TestResults | None = None  # when the check ran pytest

    @property
    def passed(self) -> bool:
        """Exit 0 in time, and, where pytest ran, no failing test in its report: an exit code
        a test forced (`os._exit(0)` at exit) does not outvote the outcomes."""
        return self.exit_code == 0 and not self.timed_out and not (self.tests and self.tests.failing_ids)


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
    return CheckResult(
        command=spec.run,
        exit_code=done.exit_code,
        duration_s=round(done.duration, 3),
        timed_out=done.timed_out,
        output_tail=tail,
        attempts=attempt,
        flaky=done.ok and attempt > 1,
        tests=pytest_results.read(report),
    )


def all_pass(results: list[CheckResult]) -> bool:
    return all(result.passed for result in results)


def done(results: list[CheckResult], counts: Counts) -> bool:
    """The one rule for a run's end: every check passes and the TODO has items, none open."""
    return all_pass(results) and counts.open == 0 and counts.total > 0


def passing_tests(results: list[CheckResult]) -> int:
    return sum(result.tests.counts.passed for result in results if result.tests)
