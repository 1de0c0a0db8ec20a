"""Did a check run at all? A check that could not run is never a verdict on the code.

A check *ran* when its command started and, where ralph reads per-test results, those results
exist: pytest's session reached its end, collected something and wrote ralph's report; a
declared JUnit report was written. A report that shows tests ran settles it: what the tests
print is theirs. Otherwise it *could not run* when the shell could not find or execute the
command (exit 127, 126, or the shell's, make's, env's, python's or npm's own words for it), the
runner itself is missing (`No module named pytest`), pytest stopped on an internal or usage
error (its exit 3 or 4), ralph's plugin failed or was not loaded where pytest is run by name,
pytest collected no test, or a declared JUnit report is missing or unreadable. A test module
that fails to import is not among them: pytest ran and reported it, and the ratchet judges it
like a failing test."""

from __future__ import annotations

import re

from ralph.isolation.sandbox import words
from ralph.verdict.pytest_results import PLUGIN, TestResults

# What shells, make, env, python and npm say, each in its own words, when the program or script
# a check runs is missing or not executable (exit 127/126 when the shell is the check itself; a
# shell script's own name before the line number when it is a script: a git hook).
_NOT_FOUND = re.compile(
    r"^\S+: (?:line )?\d+: (?:exec: )?.+: (?:command not found|not found|Permission denied)$"
    r"|^(?:/\S+/)?(?:ba|z)?sh: \S+: (?:command not found|No such file or directory|Permission denied)$"
    r"|^(?:/\S+/)?(?:ba|da)?sh: \d+: cannot open .*: No such file$"
    r"|^make(?:\[\d+\])?: \*\*\* .*Error 12[67]$"
    r"|^(?:/usr/bin/)?env: .*: No such file or directory$"
    r"|can't open file .*: \[Errno 2\] No such file or directory$"
    r"|^npm (?:ERR!|error) [Mm]issing script"
)
_NO_RUNNER = re.compile(r"No module named '?(pytest|_pytest|py\.test)\b(?![\w.])'?")
# pytest's words when it stops before running tests: an internal error (exit 3), a usage error or
# a conftest that cannot be imported (exit 4).
_PYTEST_STOPPED = re.compile(
    r"^(INTERNALERROR>|ERROR: usage:|ERROR: file or directory not found|ImportError while loading conftest)"
)
_INTERNAL = re.compile(r"^INTERNALERROR>")
_PYTEST_SAID = re.compile(
    r"pytest: error: |^ERROR: file or directory not found|^INTERNALERROR> \w*(Error|Exception)\b|^E +\w+"
)
_ERROR_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|Exit)\b.*:|^(bwrap|error|fatal|ERROR): ", re.IGNORECASE)


def reason(
    command: str, exit_code: int, output: str, tests: TestResults | None, junit_problem: str | None = None
) -> str | None:
    """Why the check could not run, as one line with the first line of the real cause; None when it ran."""
    if exit_code in (126, 127):
        return f"{'not found' if exit_code == 127 else 'not executable'} (exit {exit_code}): {cause(output)}"
    if junit_problem:  # a declared JUnit report: none written, or one that cannot be read
        return junit_problem
    if tests is not None and tests.plugin_errors:
        return f"ralph's pytest plugin failed: {tests.plugin_errors[0]}"
    lines = [line.strip() for line in output.splitlines()]
    if tests is not None and tests.counts.not_run and (exit_code == 3 or any(_INTERNAL.match(line) for line in lines)):
        # pytest itself broke before it reached them (a lap that broke pluggy breaks pytest too)
        said = [line for line in lines if _PYTEST_SAID.search(line)]
        return f"pytest stopped on an internal error: {(said[-1] if said else cause(output))[:200]}"
    if tests is not None and tests.counts.ran:
        return None  # its report shows tests ran: whatever they printed is theirs, not the shell's
    missing = _NO_RUNNER.search(output)
    if missing and exit_code != 0:
        return f"the test runner is missing: No module named {missing.group(1)}"
    if f"No module named '{PLUGIN}'" in output:
        return "pytest could not import ralph's plugin: the check sets PYTHONPATH without keeping ralph's"
    if exit_code != 0 and any(_NOT_FOUND.search(line) for line in lines):
        return f"a program it runs is missing: {cause(output)}"
    if any(_PYTEST_STOPPED.match(line) for line in lines):
        said = [line for line in lines if _PYTEST_SAID.search(line)]
        return f"pytest stopped before running tests: {(said[-1] if said else cause(output))[:200]}"
    if tests is None:
        if exit_code in (3, 4) and runs_pytest(command):
            return f"pytest ended with exit {exit_code} (internal or usage error): {cause(output)}"
        if runs_pytest(command):
            return f"pytest wrote no report (its session did not reach its end): {cause(output)}"
        return None
    if {"--co", "--collect-only"} & set(words(command)):
        return None  # a check that only collects: judged by its exit code
    return "pytest collected no tests (or deselected them all)"


def runs_pytest(command: str) -> bool:
    """Does the command run pytest by name (`pytest`, `py.test`, `python -m pytest`, a venv's)?"""
    return any(word.rsplit("/", 1)[-1] in ("pytest", "py.test") for word in words(command))


def cause(output: str) -> str:
    """The first line of the real cause in a command's output: the last exception or error line
    (a traceback ends with it), else the last line that says something; 200 characters at most."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith("[ralph:")]
    errors = [line for line in lines if _ERROR_LINE.search(line) or _NOT_FOUND.search(line)]
    found = errors[-1] if errors else lines[-1] if lines else "no output"
    return found[:200]


_FIXES = (
    (
        "the test runner is missing",
        "install the project's test dependencies where the check runs, with `setup:` (`pip install -e '.[test]'`, "
        "`pip install --group test`, `uv sync`): pip only warns when an extra does not exist",
    ),
    ("could not import ralph's plugin", "where the check sets PYTHONPATH, keep ralph's: PYTHONPATH=src:$PYTHONPATH"),
    ("plugin failed", "a bug in ralph: please report it with the check's output"),
    (
        "JUnit",
        "make the runner write its report where `junit:` says, inside the workspace "
        "(docs/trust.md: Per-test results from other runners)",
    ),
    ("collected no tests", "point the command at the tests (`ralph doctor` runs each check once)"),
    ("not found", "install it with `setup:`, or fix the command in ralph.yaml"),
    ("not executable", "make it executable in the commit, or fix the command in ralph.yaml"),
    ("is missing", "install it with `setup:`, or fix the command in ralph.yaml"),
)


def fix(why: str) -> str:
    """The likely fix for a check that could not run for `why`."""
    return next(
        (advice for words, advice in _FIXES if words in why),
        "run the command by hand in a fresh clone to see why (`ralph doctor` runs each check as a lap would)",
    )
