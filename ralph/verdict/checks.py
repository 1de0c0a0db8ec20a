"""Run the repository's own checks on a workspace, with per-test results where pytest runs.

Each check either ran (passed or failed) or could not run (ralph/verdict/could_not_run.py); where the
cause lies outside the lap, in the sandbox or a full disk, the run itself cannot go on.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection
from pathlib import Path

from pydantic import BaseModel

from ralph.config.sections import CheckSpec
from ralph.errors import RalphError
from ralph.facts import pytest_results
from ralph.facts.pytest_results import TestResults, file_of
from ralph.isolation import proc, sandbox
from ralph.isolation.files import remove_path
from ralph.isolation.jail import Jail
from ralph.show import events
from ralph.todo import Counts
from ralph.verdict import could_not_run, failure_lines, go_test, readers

TAIL_CHARS = 4000
TAIL_ROOM = 200  # characters of the tail kept for ralph's own line (idle, timed out)
# The two sessions of a lap that added test files, as the output of a check names them.
APART = "[ralph: the tests of the last green commit, without the test files the lap added]"
WHOLE = "[ralph: the whole tree, the lap's new test files with them]"
_NOT_RUN = ("skipped", "xfailed", "deselected")
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
    workspace: Path,
    *,
    timeout: float,
    env: dict[str, str],
    log_dir: Path,
    jail: Jail | None = None,
    user_tree: Path | None = None,
    idle_timeout: float | None = None,
    stop: Callable[[], bool] | None = None,
) -> list[CheckResult]:
    """Each check through the shell in `workspace` (inside `jail` when sandboxed); full output
    spilled under `log_dir`. pytest notes the modules it ran from `user_tree`. `stop`: True when
    the results are no longer wanted (proc.run), and the checks left are not run."""
    if user_tree is not None:
        env = dict(env, RALPH_PYTEST_USER_TREE=str(user_tree))
    results = []
    for index, spec in enumerate(specs, 1):
        if stop is not None and stop():
            break
        result = _run_one(spec, index, workspace, timeout, env, log_dir, jail, idle_timeout, stop)
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
    workspace: Path,
    timeout: float,
    env: dict[str, str],
    log_dir: Path,
    jail: Jail | None,
    idle_timeout: float | None,
    stop: Callable[[], bool] | None = None,
) -> CheckResult:
    # pytest writes its report where the check may write: the sandbox's /tmp, seen outside as jail.tmp
    reports, seen_as = (jail.tmp, Path("/tmp")) if jail else (log_dir, log_dir)
    for attempt in range(1, spec.retries + 2):  # noqa: B007 (the attempt that ended it is recorded)
        report = reports / f"check-{index}.pytest.jsonl"
        remove_path(report)  # whatever the last attempt left there: a file, a folder, a link
        readers.remove_reports(spec, workspace)  # and what the last check (or the lap) left as its report
        check_env = pytest_results.check_env(env, seen_as / report.name)
        idle = proc.Idle(idle_timeout, workspace) if idle_timeout else None
        done = proc.run(
            spec.run,
            workspace,
            env=check_env,
            timeout=timeout,
            spill=log_dir / f"check-{index}.log",  # the whole output, read back by the output readers
            jail=jail,
            idle=idle,
            stop=stop,
        )
        if done.ok or (stop is not None and stop()):
            break
    whole = readers.whole_output(log_dir / f"check-{index}.log") if readers.reads_output(spec, passed=done.ok) else ""
    # A check with a reader of its own is judged by it alone: any test may write to the pytest
    # report's path, and a forged report must not stand in for the runner's results.
    tests, unreadable = readers.results(spec, workspace, whole) if spec.reader else (pytest_results.read(report), None)
    tail = _tail(spec, done, whole)
    if idle is not None and idle.fired:
        tail += f"\n[ralph: idle — printed nothing and changed no file for {idle.seconds:g}s, and was stopped]"
    elif done.timed_out:
        tail += f"\n[ralph: timed out after {timeout:g}s and was killed]"
    _refuse_outside_causes(spec.run, done, workspace, jail)
    why = _could_not_run(spec, done, tests, unreadable, check_env, jail)
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


def _could_not_run(
    spec: CheckSpec,
    done: proc.Completed,
    tests: TestResults | None,
    unreadable: str | None,
    env: dict[str, str],
    jail: Jail | None,
) -> str | None:
    """Why the check could not run (None: it ran); inside the sandbox, a program of yours that
    it does not show is named, with the fix (`sandbox.readable`)."""
    if done.timed_out:
        return None
    why = could_not_run.reason(spec.run, done.exit_code, done.output, tests, unreadable)
    if why and jail is not None:
        why = sandbox.missing_inside(spec.run, env, jail) or why
    return why


def _tail(spec: CheckSpec, done: proc.Completed, whole: str) -> str:
    """What people and the next lap read of a check's output: its end (`go test -json`'s events as
    the text go prints), and, where it failed, the runner's failure lines first: a long run's
    end is its summary and npm's notices, not the test that failed. Within TAIL_CHARS, with room
    for ralph's own last line, since a lap's record keeps that many."""
    shown = go_test.text(whole) if spec.reader == "go" else done.output
    lifted = (
        "" if done.ok or len(shown) <= TAIL_CHARS // 2 else failure_lines.lift(whole if spec.reader != "go" else shown)
    )
    room = TAIL_CHARS - len(lifted) - TAIL_ROOM
    return lifted + shown[-room:]


def _refuse_outside_causes(command: str, done: proc.Completed, workspace: Path, jail: Jail | None) -> None:
    """A check that could not run for a cause outside the lap stops the run: the sandbox could
    not start (bubblewrap's own error, and it cannot start `true` either, so a lap that prints
    bubblewrap's words cannot fake it), or the disk is full."""
    if done.ok:
        return
    first = next((line.strip() for line in done.output.splitlines() if line.strip()), "")
    if jail is not None and first.startswith("bwrap: ") and not proc.run("true", workspace, jail=jail, timeout=60).ok:
        raise RalphError(
            f"the sandbox could not start the check `{command}`: {first[:200]} — `ralph doctor` says what "
            "the sandbox needs; `sandbox: off` runs laps without it"
        )
    if "No space left on device" in done.output and shutil.disk_usage(workspace).free < DISK_LOW:
        raise RalphError(f"the disk is full: the check `{command}` could not run — free some space, then `ralph run`")


def apart_and_whole(
    apart: list[CheckResult], whole: list[CheckResult], old_files: Collection[str] = ()
) -> list[CheckResult]:
    """Each check's one result from its two sessions, `apart` (the lap's tree without the test
    files it added) and `whole`: a test session 1 reports keeps that outcome, whatever a new test
    file made of it in session 2; a test only `whole` reports (a new one) takes its outcome there,
    unless its id names one of `old_files` (the last green commit's): an old file's tests are
    session 1's to report. The check passes only if both sessions did, and could not run if
    either could not."""
    old = frozenset(old_files)
    return [_combined(first, second, old) for first, second in zip(apart, whole, strict=True)]


def _combined(apart: CheckResult, whole: CheckResult, old_files: frozenset[str]) -> CheckResult:
    return CheckResult(
        command=whole.command,
        exit_code=next((result.exit_code for result in (apart, whole) if result.exit_code), 0),
        duration_s=round(apart.duration_s + whole.duration_s, 3),
        timed_out=apart.timed_out or whole.timed_out,
        output_tail=_tail_of_two(apart, whole),
        attempts=max(apart.attempts, whole.attempts),
        flaky=apart.flaky or whole.flaky,
        tests=_tests_of_two(apart.tests, whole.tests, old_files),
        could_not_run=f"{apart.could_not_run} {APART}" if apart.could_not_run else whole.could_not_run,
    )


def _tail_of_two(apart: CheckResult, whole: CheckResult) -> str:
    """The failures of the session without the new test files first: the old tests' verdict."""
    failed = [(label, result) for label, result in ((APART, apart), (WHOLE, whole)) if not result.passed]
    if not failed:
        return whole.output_tail
    room = TAIL_CHARS // len(failed) - len(APART) - 1
    return "\n".join(f"{label}\n{result.output_tail[-room:]}" for label, result in failed)


def _tests_of_two(
    apart: TestResults | None, whole: TestResults | None, old_files: frozenset[str]
) -> TestResults | None:
    """Per test, session 1's outcome where it gave one, else session 2's. No results from session
    1 is none at all: session 2's alone would let a new test file speak for the old tests. Counts
    of tests that ran neither way (skipped, xfailed, deselected) are the larger of the two."""
    if apart is None or whole is None:
        return apart
    known = {*apart.passed_ids, *apart.failing_ids}
    new_failing = [test for test in whole.failing_ids if test not in known]
    failing = set(whole.failing_ids)
    new_passing = [
        test
        for test in whole.passed_ids
        if test not in known and test not in failing and file_of(test) not in old_files
    ]
    counts = apart.counts.model_copy(
        update={
            "passed": apart.counts.passed + len(new_passing),
            "failed": apart.counts.failed + len(new_failing),
            **{kind: max(getattr(apart.counts, kind), getattr(whole.counts, kind)) for kind in _NOT_RUN},
        }
    )
    return TestResults(
        counts=counts,
        passed_ids=sorted({*apart.passed_ids, *new_passing}),
        failing_ids=sorted({*apart.failing_ids, *new_failing}),
        skipped_modules=sorted({*apart.skipped_modules, *whole.skipped_modules}),
        plugin_errors=[*apart.plugin_errors, *whole.plugin_errors][:5],
        setup=whole.setup or apart.setup,  # as one session of the whole tree set pytest up: the ratchet's
        passing_files=_files_of_two(apart.passing_files, whole.passing_files, old_files),
    )


def _files_of_two(apart: list[str] | None, whole: list[str] | None, old_files: frozenset[str]) -> list[str] | None:
    """A JUnit report's files with a passing test: an old file's only as session 1 saw them."""
    if apart is None and whole is None:
        return None
    return sorted({*(apart or []), *(path for path in whole or [] if path and path not in old_files)})


def all_pass(results: list[CheckResult]) -> bool:
    return all(result.passed for result in results)


def done(results: list[CheckResult], counts: Counts) -> bool:
    """The one rule for a run's end: every check passes and the TODO has items, none open."""
    return all_pass(results) and counts.open == 0 and counts.total > 0


def passing_tests(results: list[CheckResult]) -> int:
    return sum(result.tests.counts.passed for result in results if result.tests)
