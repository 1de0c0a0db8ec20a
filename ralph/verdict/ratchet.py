"""Green is a ratchet: nothing that passed on the last green commit may fail now.

Per check (a check that exited 0 must still exit 0) and, where the check ran pytest,
per test (every test that passed must still exist and pass; no more skipped, xfailed or
deselected tests than before), and per set-up (pytest's configuration and plugins as they were,
unless a TODO item of the user's names what changed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ralph.facts.pytest_results import COLLECTION, PytestSetup, TestResults, file_of
from ralph.verdict.checks import CheckResult
from ralph.verdict.guard import GuardReport

SHOWN = 5  # test ids named in a reason before "and N more"


@dataclass
class Comparison:
    unrun: list[str] = field(default_factory=list)  # checks that could not run: no verdict, so never green
    problems: list[str] = field(default_factory=list)
    newly_failing: list[str] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)
    failing_output: str = ""


def compare(last_green: list[CheckResult], now: list[CheckResult], grants: GuardReport) -> Comparison:
    """What regressed between the last green results and now; `grants` says what the lap's
    ticked TODO items allow: a test file's passing tests to disappear, pytest's configuration
    file or a plugin file to differ."""
    before_by_command = {result.command: result for result in last_green}
    result = Comparison()
    for check in now:
        before = before_by_command.get(check.command)
        why = check.could_not_run  # no verdict at all, whatever it was before: never green
        if not why and before is not None and before.tests and not check.tests and not check.timed_out:
            # A session that crashed wrote no report: nothing was judged, its passing tests unaccounted for.
            why = (
                f"it gave no per-test results, as it did on the last green commit "
                f"({before.tests.counts.passed} passing tests unaccounted for)"
            )
        if why:
            result.unrun.append(f"check could not run: `{check.command}`: {why}")
            result.failing_output = result.failing_output or check.output_tail
            continue
        if before is None:
            continue
        count = len(result.problems)
        if before.passed and not check.passed:
            what = (
                "timed out"
                if check.timed_out
                else f"exit {check.exit_code}"
                if check.exit_code
                else "exit 0, but its pytest report has failing tests"
            )
            result.problems.append(f"check regressed: `{check.command}` ({what})")
        if before.tests and check.tests:
            _compare_tests(before, check, grants.allows, result)
            result.problems += _setup_changes(before.tests.setup, check.tests.setup, grants.allows)
        elif before.tests and before.tests.counts.passed:
            result.problems.append(
                f"`{check.command}` timed out before it gave its per-test results: "
                f"{before.tests.counts.passed} passing tests unaccounted for"
            )
        if len(result.problems) > count and not result.failing_output:
            result.failing_output = check.output_tail
    return result


def _compare_tests(before: CheckResult, now: CheckResult, granted: Callable[[str], bool], result: Comparison) -> None:
    old, new = before.tests, now.tests
    assert old is not None and new is not None  # compared only where both ran pytest
    # An id that passes in one place and fails in another (two tests claiming one id) is failing;
    # a file's `<collection>` passing (a JUnit runner's testcase for a file that ran no test) is
    # no test passing. Any test that passed must pass still: a file's entry that passed, too,
    # may go (its file runs tests now) but not fail. Each list is made a set once and each test
    # looked up once: a lap's judging grows with its tests, never as the product of two lists.
    failing_now = set(new.failing_ids)
    now_passing = passing(new)
    lost = [
        test
        for test in old.passed_ids
        if test not in now_passing and (test in failing_now or not test.endswith(COLLECTION))
    ]
    broken = [test for test in lost if test in failing_now]
    gone = [test for test in lost if test not in failing_now]
    granted_files = {path: granted(path) for path in {file_of(test) for test in gone}}  # a file's tests go together
    allowed = [test for test in gone if granted_files[file_of(test)]]
    missing = [test for test in gone if not granted_files[file_of(test)]]
    newly_passing = now_passing.difference(old.passed_ids)
    turned = _turned_passing(old, new, now_passing, failing_now, newly_passing)
    vanished = [test for test in old.failing_ids if test not in failing_now and test not in turned]
    result.newly_failing += broken
    result.newly_passing += sorted(newly_passing)
    if broken:
        result.problems.append(f"tests that passed now fail: {named(broken)}")
    if missing:
        result.problems.append(f"tests that passed are gone: {named(missing)}")
    if vanished:
        result.problems.append(f"failing tests are gone: {named(vanished)}")
    if new.counts.passed < old.counts.passed - len(allowed):
        result.problems.append(f"passing tests dropped {old.counts.passed} → {new.counts.passed}")
    for kind in ("skipped", "xfailed", "deselected"):
        was, now_count = getattr(old.counts, kind), getattr(new.counts, kind)
        if now_count > was:
            result.problems.append(f"{kind} tests rose {was} → {now_count}")


def passing(results: TestResults) -> set[str]:
    """The tests that pass: an id also failing is failing, and a `<collection>` is no test."""
    found = {test for test in results.passed_ids if not test.endswith(COLLECTION)}
    found.difference_update(results.failing_ids)
    return found


def turned_passing(old: TestResults, new: TestResults) -> set[str]:
    """The failing tests of `old` that pass in `new` (the one rule, for the ratchet and best-of).
    A failing test goes away only by passing; a module that failed to import, or a test file a
    JUnit runner could not load (`<file>::<collection>`), only when a test of that file passes
    now — by the report's structure where it names files (`passing_files`), by the test's id
    where the id starts with its file. A report that names no file (node 20) cannot say which
    file a test is in: there, only an entry that is gone (its file reported tests) goes, and only
    when a test passes that did not before; an entry that passes (its file ran none) never does."""
    now_passing = passing(new)
    return _turned_passing(old, new, now_passing, set(new.failing_ids), now_passing.difference(old.passed_ids))


def _turned_passing(
    old: TestResults, new: TestResults, now_passing: set[str], failing_now: set[str], newly_passing: set[str]
) -> set[str]:
    """turned_passing, given the sets the ratchet has made already; the files of the passing tests
    and the ids reported are gathered only where a failing module's entry asks."""
    turned = {test for test in old.failing_ids if test in now_passing}
    entries = [test for test in old.failing_ids if test.endswith(COLLECTION) and test not in turned]
    if not entries:
        return turned
    if new.passing_files is None:
        collecting = _folders_and_files({test.partition("::")[0] for test in now_passing})  # file_of, inlined
    else:
        collecting = _folders_and_files(set(new.passing_files) - {""})
    unnamed = "" in (new.passing_files or ()) and bool(newly_passing)
    reported = set(new.passed_ids) | failing_now if unnamed else set()
    turned.update(test for test in entries if file_of(test) in collecting or (unnamed and test not in reported))
    return turned


def _folders_and_files(files: set[str]) -> set[str]:
    """The files and every folder above them ("." for the top, where any file is): a package or
    crate that failed to build (`folder::<collection>`) builds again when a test under it passes."""
    found = set(files) | ({"."} if files else set())
    for path in files:
        parts = path.split("/")
        found.update("/".join(parts[:end]) for end in range(1, len(parts)))
    return found


def green_reason(checks: list[CheckResult]) -> str:
    """What a green lap's line says of its checks: a check red with no per-test results (accepted
    as `expect_red`) judged nothing, and the line says so every lap."""
    if all(check.passed for check in checks):
        return "all checks pass"
    unjudged = [f"`{check.command}`" for check in checks if not check.passed and check.tests is None]
    return "no check regressed" + (
        f"; {', '.join(unjudged)} judged nothing (red, no per-test results)" if unjudged else ""
    )


def _setup_changes(before: PytestSetup | None, now: PytestSetup | None, granted: Callable[[str], bool]) -> list[str]:
    """A configuration file, a value in it, or a plugin (a conftest, a `pytest_plugins` module,
    an installed one) added, removed or changed decides what pytest reports: not the lap's call."""
    if before is None:  # a note from before set-ups were recorded: nothing to hold the lap to
        return []
    if now is None:
        return ["pytest's session wrote no set-up: it did not finish, or ralph's plugin was kept out"]
    problems = []
    if before.config != now.config and not granted(now.config or "") and not granted(before.config or ""):
        problems.append(f"pytest's configuration file changed: {before.config or 'none'} → {now.config or 'none'}")
    elif before.values != now.values and not granted(now.config or ""):
        keys = sorted(
            key for key in before.values.keys() | now.values.keys() if before.values.get(key) != now.values.get(key)
        )
        problems.append(f"pytest's configuration changed in {now.config}: {named(keys)}")
    hiding = sorted(
        f"{name} ({where})"
        for name, where in now.shadowing.items()
        if before.shadowing.get(name) != where and not granted(where.split(" over ")[0])
    )
    if hiding:
        problems.append(f"modules of the tree hide others of the same name: {named(hiding)}")
    plugins = sorted(
        name
        for name in before.plugins.keys() | now.plugins.keys()
        if before.plugins.get(name) != now.plugins.get(name) and not granted(name)
    )
    if plugins:
        what = {
            name: "added" if name not in before.plugins else "removed" if name not in now.plugins else "changed"
            for name in plugins
        }
        problems.append("pytest plugins changed: " + named([f"{name} ({what[name]})" for name in plugins]))
    return problems


def named(tests: list[str]) -> str:
    shown = ", ".join(tests[:SHOWN])
    return shown + (f" and {len(tests) - SHOWN} more" if len(tests) > SHOWN else "")
