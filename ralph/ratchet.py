"""Green is a ratchet: nothing that passed on the last green commit may fail now.

Per check (a check that exited 0 must still exit 0) and, where the check ran pytest,
per test (every test that passed must still exist and pass; no more skipped, xfailed or
deselected tests than before).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ralph.checks import CheckResult
from ralph.pytest_results import COLLECTION, file_of

SHOWN = 5  # test ids named in a reason before "and N more"


@dataclass
class Comparison:
    problems: list[str] = field(default_factory=list)
    newly_failing: list[str] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)
    failing_output: str = ""


def compare(last_green: list[CheckResult], now: list[CheckResult], granted_files: set[str]) -> Comparison:
    """What regressed between the last green results and now; `granted_files` are test
    files a ticked TODO item allowed to change, whose passing tests may disappear."""
    before_by_command = {result.command: result for result in last_green}
    result = Comparison()
    for check in now:
        before = before_by_command.get(check.command)
        if before is None:
            continue
        count = len(result.problems)
        if before.passed and not check.passed:
            what = "timed out" if check.timed_out else f"exit {check.exit_code}"
            result.problems.append(f"check regressed: `{check.command}` ({what})")
        if before.tests and check.tests:
            _compare_tests(before, check, granted_files, result)
        elif before.tests and before.tests.counts.passed:
            # A crashed or hung session writes no report: its passing tests are unaccounted for.
            result.problems.append(f"`{check.command}` wrote no pytest report: {before.tests.counts.passed} "
                                   "passing tests unaccounted for")
        if len(result.problems) > count and not result.failing_output:
            result.failing_output = check.output_tail
    return result


def _compare_tests(before: CheckResult, now: CheckResult, granted: set[str], result: Comparison) -> None:
    old, new = before.tests, now.tests
    # An id that passes in one place and fails in another (two tests claiming one id) is failing.
    now_passing = set(new.passed_ids) - set(new.failing_ids)
    lost = [test for test in old.passed_ids if test not in now_passing]
    failing_now = set(new.failing_ids)
    broken = [test for test in lost if test in failing_now]
    missing = [test for test in lost if test not in failing_now]
    allowed = [test for test in missing if file_of(test) in granted]
    missing = [test for test in missing if test not in allowed]
    vanished = [test for test in old.failing_ids if test not in now_passing and test not in failing_now
                and file_of(test) not in granted and not test.endswith(COLLECTION)]
    result.newly_failing += broken
    result.newly_passing += [test for test in new.passed_ids if test not in set(old.passed_ids)]
    if broken:
        result.problems.append(f"tests that passed now fail: {_name(broken)}")
    if missing:
        result.problems.append(f"tests that passed are gone: {_name(missing)}")
    if vanished:
        result.problems.append(f"failing tests are gone: {_name(vanished)}")
    if new.counts.passed < old.counts.passed - len(allowed):
        result.problems.append(f"passing tests dropped {old.counts.passed} → {new.counts.passed}")
    for kind in ("skipped", "xfailed", "deselected"):
        was, now_count = getattr(old.counts, kind), getattr(new.counts, kind)
        if now_count > was:
            result.problems.append(f"{kind} tests rose {was} → {now_count}")


def _name(tests: list[str]) -> str:
    shown = ", ".join(tests[:SHOWN])
    return shown + (f" and {len(tests) - SHOWN} more" if len(tests) > SHOWN else "")
