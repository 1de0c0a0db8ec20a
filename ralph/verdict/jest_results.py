"""Per-test outcomes from jest's own report (`jest --json --outputFile=PATH`), in pytest's
`TestResults`.

A check names its report, `{run: "npx jest --ci --json --outputFile=reports/jest.json", jest:
"reports/jest.json"}`; `read(files, root)` reads it as junit.read reads JUnit reports (each file
whole, no link followed, regular files only, REPORT_MAX_BYTES at most): None for no file, and
`junit.ReportUnreadable` for a file that is not jest's report, or holds anything of a shape
other than jest writes, rather than give part of the outcomes.

The report's `testResults` hold one entry per test file: its absolute `name`, its `status`, and
its `assertionResults`, each with `ancestorTitles` (the describe blocks around it), `title` and
`status`. A test's id is `<file relative to root>::<describe> > <describe> > <title>`. Its outcome:
`passed` passes it (or, with `failing: true`, a `test.failing` whose body failed as it should, an
expected failure), `failed` fails it, `pending`, `skipped`, `todo` and `disabled` skip it, and any
other (jest-circus writes no other) fails it. A file whose entry failed while none of its tests
did (it threw as it loaded, held no test, or an afterAll hook failed) is one failing id
`<file>::<collection>`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ralph.facts import junit
from ralph.facts.junit import ReportUnreadable
from ralph.facts.pytest_results import COLLECTION, REPORT_MAX_BYTES, TestResults, fold

ANCESTORS = " > "  # between the describe blocks and the title in an id
SKIPPED = ("pending", "skipped", "todo", "disabled")
_Kind = TypeVar("_Kind")


def read(files: list[Path], root: Path) -> TestResults | None:
    """The outcomes in every report of `files`; None for no files. Raises ReportUnreadable
    (one line naming the file and the cause) rather than give part of them."""
    if not files:
        return None
    paths = junit._Report(root)  # cuts `root` off the absolute paths jest writes
    outcomes: dict[str, set[str]] = {}
    size = 0
    for path in files:
        shown = paths.shown(path)
        data = junit._contents(path, shown)
        size += len(data)
        if size > REPORT_MAX_BYTES:
            raise ReportUnreadable(f"{shown}: the reports add up to over {REPORT_MAX_BYTES} bytes")
        try:
            _add_report(_json(data, shown), paths.relative, outcomes)
        except _Shape as error:
            raise ReportUnreadable(f"{shown}: not jest's --json report ({error})") from None
    return fold(outcomes)


def _json(data: bytes, shown: str) -> object:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ReportUnreadable(f"{shown}: not UTF-8 (at byte {error.start})") from None
    del data
    try:
        return json.loads(text)
    except RecursionError:  # arrays inside arrays, thousands deep: jest writes no such thing
        raise ReportUnreadable(f"{shown}: not jest's --json report (nested too deep)") from None
    except ValueError as error:  # not JSON, or a number too long to convert
        raise ReportUnreadable(f"{shown}: not JSON ({str(error).splitlines()[0][:200]})") from None


class _Shape(Exception):
    """A part of the report not of the shape jest writes; str() says which."""


def _add_report(report: object, relative: Callable[[str], str], outcomes: dict[str, set[str]]) -> None:
    suites = _field(report, "testResults", list, "the report")
    for suite in suites:
        name = _field(suite, "name", str, "a testResults entry")
        file = relative(name)
        tests = _field(suite, "assertionResults", list, file)
        failed = False
        for test in tests:
            outcome = _outcome(test, file)
            failed = failed or outcome == "failed"
            _add(outcomes, _test_id(test, file), outcome)
        if _field(suite, "status", str, file) == "failed" and not failed:
            _add(outcomes, f"{file}::{COLLECTION}", "error")


def _outcome(test: object, file: str) -> str:
    status = _field(test, "status", str, f"a test of {file}")
    if status == "passed":
        return "xfailed" if _dict(test, file).get("failing") is True else "passed"
    return "skipped" if status in SKIPPED else "failed"


def _test_id(test: object, file: str) -> str:
    ancestors = _field(test, "ancestorTitles", list, f"a test of {file}")
    title = _field(test, "title", str, f"a test of {file}")
    if not all(isinstance(part, str) for part in ancestors):
        raise _Shape(f"a test of {file} has ancestorTitles that are not all text")
    test_id = f"{file}::{ANCESTORS.join([*ancestors, title])}"
    if len(test_id) > junit.ID_MAX:
        raise _Shape(f"a test id over {junit.ID_MAX} characters in {file}")
    return test_id


def _add(outcomes: dict[str, set[str]], test: str, outcome: str) -> None:
    outcomes.setdefault(test, set()).add(outcome)


def _field(value: object, key: str, kind: type[_Kind], where: str) -> _Kind:
    found = _dict(value, where).get(key)
    if not isinstance(found, kind):
        raise _Shape(f"{where} has no {key} of the kind jest writes")
    return found


def _dict(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _Shape(f"{where} is not an object")
    return value
