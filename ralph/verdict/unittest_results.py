"""Per-test outcomes of `python -m unittest -v`, read from the check's whole output, in pytest's
`TestResults`.

At verbosity 2 (`-v`) unittest writes, on stderr, a test's description as the test starts,
` ... `, and its outcome when it ends: `ok`, `FAIL`, `ERROR`, `skipped 'why'`, `expected failure`
or `unexpected success`. A description is `test_x (pkg.mod.Class.test_x)` from Python 3.11 on,
`test_x (pkg.mod.Class)` before; a docstring's first line, when the test has one, comes on a line
of its own after it, and what the code under test prints lands between the ` ... ` and the
outcome, on the same line or on lines of its own. A failing subtest adds a line of its own
(3.11+). Then come one block per failure or error, headed by a line of 70 `=` and
`FAIL: <description>`, `ERROR: <description>` or `UNEXPECTED SUCCESS: <description>` (3.11+),
then `Ran N tests in Xs` and `OK` or `FAILED (failures=1, errors=2, skipped=3, ...)`.

`read(output, root)` gives None when no `Ran N tests` line is there (no evidence unittest ran),
else every test's outcome by id. A test's id is `<file>::<Class>::<method>`, the file being its
module's, relative to `root` (found at `root` or under `root/src`; the module's dotted name where
no file is); a doctest's is `<file>::<function>`. A module that failed to import
(`unittest.loader._FailedTest`) or whose setUpModule/tearDownModule failed is one failing id
`<file>::<collection>`; a class whose setUpClass/tearDownClass failed, `<file>::<Class>::<collection>`.

Which outcome counts: a block's header fails its test whatever the progress lines said (it is
written from unittest's own lists of failures and errors); else the last outcome written after
the test's description (the code under test may print a word like `ok` before it); a failing or
skipped subtest is an outcome of its test. A bare `ERROR` line after a test that already has its
outcome is a module's or class's fixture failing (unittest writes no description for it), whose
block names it. A test that started and reported nothing is failing (not_run). Ids found more
than once are folded: failing if any is, else skipped, else expected failure, else passed.

Run without `-v`, unittest names no test that passes: the counts then come from its summary
lines and only failing tests have ids.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ralph.facts.pytest_results import COLLECTION, TestCounts, TestResults, fold

SEPARATOR = "=" * 70  # what opens a failure's block
STATUS = " ... "  # between a test's description and its outcome
ENDINGS = (
    ("unexpected success", "failed"),
    ("expected failure", "xfailed"),
    ("FAIL", "failed"),
    ("ERROR", "error"),
    ("ok", "passed"),
)
MODULE_FIXTURES = ("setUpModule", "tearDownModule")
CLASS_FIXTURES = ("setUpClass", "tearDownClass")
MAX_PARTS = 32  # dotted names longer than this are no module path worth looking up
UNNAMED_MAX = 200  # characters of a failure's header kept as its id when it names no test

_DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
_DESCRIPTION = re.compile(rf"(\s*)([^\s()]+) \(({_DOTTED})\)(.*)", re.DOTALL)
_HEADER = re.compile(r"(FAIL|ERROR|UNEXPECTED SUCCESS): (.*)", re.DOTALL)
_RAN = re.compile(r"Ran (\d+) tests? in \d+(?:\.\d+)?s")
_SUMMARY = re.compile(r"(?:OK|FAILED)(?: \((.*)\))?")
_HEADER_OUTCOMES = {"FAIL": "failed", "ERROR": "error", "UNEXPECTED SUCCESS": "failed"}


def read(output: str, root: Path) -> TestResults | None:
    """The outcomes in unittest's output; None when it holds no `Ran N tests` line."""
    reader = _Reader(_Names(root))
    lines = output.split("\n")  # not splitlines(): unittest ends lines with \n only
    for at, line in enumerate(lines):
        reader.feed(line.rstrip("\r"), lines[at + 1] if at + 1 < len(lines) else "")
    return reader.results()


def outcome_at_end(text: str) -> str | None:
    """The outcome unittest wrote at the end of `text`, if any: what the code under test printed
    before it may be glued to it (`hellook`)."""
    for ending, outcome in ENDINGS:
        if text.endswith(ending):
            return outcome
    quote = text[-1:]  # `skipped 'why'`: the reason as Python's repr, in either quote
    if quote in ("'", '"') and f"skipped {quote}" in text[:-1]:
        return "skipped"
    return None


class _Reader:
    """Reads the output line by line, once: progress lines until a failure's block opens, blocks
    until `Ran N tests`, and so on for every run of unittest the check made."""

    def __init__(self, names: _Names) -> None:
        self.names = names
        self.outcomes: dict[str, set[str]] = {}
        self.unreported: set[str] = set()  # tests that started and wrote no outcome
        self.current: str | None = None  # the test whose outcome is awaited
        self.status: str | None = None  # its last outcome written so far
        self.subtests = False  # a subtest of it wrote an outcome
        self.in_blocks = False
        self.described = False  # any test's description was seen: the output is verbose
        self.summaries: list[tuple[int, str]] = []  # each run's test count and summary line
        self.after_ran = False

    def feed(self, line: str, following: str) -> None:
        ran = _RAN.fullmatch(line)
        if ran:
            self._finish()
            self.in_blocks, self.after_ran = False, True
            self.summaries.append((int(ran.group(1)), ""))
        elif self.after_ran and line:
            self.after_ran = False
            if _SUMMARY.fullmatch(line):
                self.summaries[-1] = (self.summaries[-1][0], line)
        if ran or self.after_ran:
            return
        header = _HEADER.fullmatch(following) if line == SEPARATOR else None
        if header:
            self._finish()
            self.in_blocks = True
            self._add(self._header_id(header.group(2)), _HEADER_OUTCOMES[header.group(1)])
        elif not self.in_blocks:  # a block holds tracebacks and captured output, never progress
            self._progress(line, following)

    def _progress(self, line: str, following: str) -> None:
        segments = line.split(STATUS)
        tail_from, subtest = 0, False
        for index, segment in enumerate(segments):
            started = self._started(segment, index, segments, following)
            if started is not None:
                tail_from, subtest = index + 1, started
        if tail_from == 0 and self.current is None:
            return
        tail = STATUS.join(segments[tail_from:])
        outcome = outcome_at_end(tail)
        if outcome is None or self.current is None:
            return
        if subtest:
            self.subtests = True
            self._add(self.current, outcome)
        elif not (line == "ERROR" and self.status is not None):  # a fixture's, see the docstring
            self.status = outcome

    def _started(self, segment: str, index: int, segments: list[str], following: str) -> bool | None:
        """If `segment` describes a test starting, start it: whether it is a subtest's line
        (of the test already started); None for a segment that describes no test."""
        found = _DESCRIPTION.fullmatch(segment)
        if not found:
            return None
        indent, name, where, rest = found.groups()
        last = index == len(segments) - 1
        if index == 0 and indent and rest.startswith((" (", " [")):
            return True if self.current == self.names.test_id(name, where) else None
        if indent or rest:
            return None
        # A description that ends its line awaits its docstring's line, which holds the ` ... `.
        # One further on a line follows a test that wrote no outcome (a failing subtest, <3.11).
        if last and STATUS not in following:
            return None
        self._finish()
        self.current, self.described = self.names.test_id(name, where), True
        return False

    def _finish(self) -> None:
        if self.current is not None:
            if self.status is not None:
                self._add(self.current, self.status)
            elif not self.subtests:
                self.unreported.add(self.current)
        self.current, self.status, self.subtests = None, None, False

    def _add(self, test: str, outcome: str) -> None:
        self.outcomes.setdefault(test, set()).add(outcome)

    def _header_id(self, description: str) -> str:
        found = _DESCRIPTION.fullmatch(description)
        if found and not found.group(1):
            return self.names.test_id(found.group(2), found.group(3))
        return description[:UNNAMED_MAX]  # a test named in a way unittest's ids never are

    def results(self) -> TestResults | None:
        self._finish()
        if not self.summaries:
            return None
        for test in self.unreported:
            if not self.outcomes.get(test, set()) & {"failed", "error"}:
                self._add(test, "not_run")
        results = fold(self.outcomes)
        if not self.described:
            results.counts = _summary_counts(self.summaries, results.counts)
        return results


def _summary_counts(summaries: list[tuple[int, str]], named: TestCounts) -> TestCounts:
    """The counts of unittest's own summary lines, for output that names no passing test (no -v)."""
    counts = TestCounts(not_run=named.not_run)
    ran = 0
    for tests, line in summaries:
        ran += tests
        found = _SUMMARY.fullmatch(line)
        for item in (found.group(1) or "").split(", ") if found else ():
            key, _, value = item.partition("=")
            kind = {"failures": "failed", "unexpected successes": "failed", "errors": "errors"}.get(key, key)
            kind = {"expected failures": "xfailed"}.get(kind, kind)
            if kind in ("failed", "errors", "skipped", "xfailed") and value.isdigit():
                setattr(counts, kind, getattr(counts, kind) + int(value))
    counts.passed = max(0, ran - counts.failed - counts.errors - counts.skipped - counts.xfailed)
    return counts


class _Names:
    """Test ids from unittest's descriptions, each module looked up in the tree once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, str | None] = {}

    def test_id(self, name: str, where: str) -> str:
        if where.startswith("unittest.loader."):  # _FailedTest, ModuleSkipped: `name` is the module's
            return f"{self._module(name)}::{COLLECTION}"
        if name in MODULE_FIXTURES:
            return f"{self._module(where)}::{COLLECTION}"
        if name in CLASS_FIXTURES:
            return "::".join([*self._split(where), COLLECTION])
        parts = where.split(".")
        if len(parts) >= 3 and parts[-1] == name:  # 3.11+: the method's name ends the dotted path
            where = where[: -len(name) - 1]
        return "::".join([*self._split(where), name])

    def _module(self, dotted: str) -> str:
        """A module's file, a package's folder; its dotted name where neither is found."""
        found = self._file(dotted) if _is_dotted(dotted) else None
        return found.removesuffix("/__init__.py") if found else dotted

    def _split(self, dotted: str) -> list[str]:
        """The file of the longest leading part of `dotted` that is a module, then the rest."""
        parts = dotted.split(".")
        if len(parts) <= MAX_PARTS:
            for end in range(len(parts), 0, -1):
                found = self._file(".".join(parts[:end]))
                if found:
                    return [found, *parts[end:]]
        end = max(1, len(parts) - 1)  # no file: the last part is the class
        return [".".join(parts[:end]), *parts[end:]]

    def _file(self, module: str) -> str | None:
        if module not in self.files:
            self.files[module] = self._look_up(module)
        return self.files[module]

    def _look_up(self, module: str) -> str | None:
        parts = module.split(".")
        for top in ("", "src"):
            for tail in (f"{parts[-1]}.py", f"{parts[-1]}/__init__.py"):
                relative = "/".join(part for part in (top, *parts[:-1], tail) if part)
                if os.path.isfile(os.path.join(self.root, relative)):
                    return relative
        return None


def _is_dotted(name: str) -> bool:
    return re.fullmatch(_DOTTED, name) is not None and name.count(".") < MAX_PARTS
