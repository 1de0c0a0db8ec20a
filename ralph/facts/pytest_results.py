"""Per-test outcomes of a pytest session, and how it was set up, from ralph's own plugin.

ralph sets PYTEST_ADDOPTS, PYTHONPATH and RALPH_PYTEST_REPORT for every check, so any check
that runs pytest (directly, through make, a script) loads `_ralph_pytest` (ralph/facts/pytest_plugin)
and writes a report; checks that do not run pytest ignore them. Test ids are pytest's node ids.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

REPORT_MAX_BYTES = 256 << 20  # a report is read whole or not at all
COLLECTION = "<collection>"  # the id suffix of a module that failed to import: not a test
PLUGIN = "_ralph_pytest"
PLUGIN_DIR = Path(__file__).parent / "pytest_plugin"
_BEFORE_COLONS, _BEFORE_SLASH = re.compile(r"(?=::)"), re.compile("/")  # where a test id's parents end


class TestCounts(BaseModel):
    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    deselected: int = 0
    not_run: int = 0  # collected, but the session ended before them: failing, with no verdict of their own

    @property
    def ran(self) -> int:
        """Tests that ran, whatever their outcome (deselected ones did not)."""
        return self.passed + self.failed + self.errors + self.skipped + self.xfailed


class PytestSetup(BaseModel):
    """What decides how pytest judges: its configuration file and values, the plugins it
    registered (by file or class, each with a digest of its hook functions' code), and modules
    of the tree imported in front of others of the same name."""

    config: str | None = None
    values: dict[str, str] = {}  # key: a digest of its value (notes may travel further than the file)
    plugins: dict[str, str] = {}
    shadowing: dict[str, str] = {}  # module: "tree/path over what it hid"
    user_tree: list[str] = []  # files of modules imported from the user's own work tree, not the lap's


class TestResults(BaseModel):
    __test__ = False

    counts: TestCounts
    passed_ids: list[str] = []  # sorted; kept in the note only where the ratchet needs it
    failing_ids: list[str] = []
    skipped_modules: list[str] = []  # files whose collection was skipped (a module-level skip)
    plugin_errors: list[str] = []  # ralph's plugin failed inside the session: the results cannot be trusted
    setup: PytestSetup | None = None  # None: an older note's, or a session that died before its end
    # A JUnit report's files with a passing test, by its structure ("": a test it gives no file);
    # None for the readers whose ids start with the test's file.
    passing_files: list[str] | None = None


# The outcomes a runner's results give a test, worst first: an id found more than once (two
# tests claiming one id, a test that printed another's result line) takes the worst of them.
OUTCOMES = ("failure", "failed", "error", "not_run", "skipped", "xfailed", "passed")
_FAILING = {"failure": "failed", "failed": "failed", "error": "errors", "not_run": "not_run"}


def fold(outcomes: dict[str, set[str]]) -> TestResults:
    """One outcome per id, the worst it had, counted and listed: how every reader but pytest's
    own (which knows more) folds its ids, so that all of them judge alike."""
    counts = dict.fromkeys(TestCounts.model_fields, 0)  # counted here, set once: a model's field is slow to set
    passed, failing = [], []
    for test, found in outcomes.items():
        outcome = min(found, key=OUTCOMES.index)
        if outcome == "passed":
            passed.append(test)
        elif outcome in _FAILING:
            failing.append(test)
        counts[_FAILING.get(outcome, outcome)] += 1
    return TestResults(counts=TestCounts(**counts), passed_ids=sorted(passed), failing_ids=sorted(failing))


def check_env(env: dict[str, str], report: Path) -> dict[str, str]:
    """The variables that make pytest load ralph's plugin and report to `report`, and run every
    module that imports when another does not (pytest would otherwise run no test at all, and
    judge nothing), keeping the user's own PYTEST_ADDOPTS and PYTHONPATH."""

    def joined(name: str, ours: str, separator: str) -> str:
        return f"{ours}{separator}{env[name]}" if env.get(name) else ours

    return dict(
        env,
        RALPH_PYTEST_REPORT=str(report),
        # A module that fails to import must not stop the rest from running: each is judged.
        PYTEST_ADDOPTS=joined("PYTEST_ADDOPTS", f"-p {PLUGIN} --continue-on-collection-errors", " "),
        PYTHONPATH=joined("PYTHONPATH", str(PLUGIN_DIR), os.pathsep),
    )


def read(report: Path) -> TestResults | None:
    """The outcomes in `report`, None when pytest did not run (or wrote nothing readable)."""
    try:
        by_session, lines = _parsed(_regular_file(report))
    except (OSError, ValueError):
        return None
    # A failure of ralph's own plugin in any session, the check's or not, leaves nothing to trust.
    plugin_errors = sorted({str(line["plugin_error"]) for line in lines if "plugin_error" in line})
    counted = _counted_sessions(lines)
    found = _Found(_outcomes(by_session, counted))
    for line in (line for line in lines if isinstance(line.get("session"), str) and line["session"] in counted):
        found.add(line)
    if not (found.outcomes or found.collect_errors or found.skipped_modules or found.setups):
        return TestResults(counts=TestCounts(), plugin_errors=plugin_errors[:5]) if plugin_errors else None
    results = _fold(found)
    return results.model_copy(update={"plugin_errors": plugin_errors[:5]})


def _parsed(report: bytes) -> tuple[dict[str, dict[str, int]], list[dict]]:
    """The report in one pass: each session's tests with every outcome its lines gave them, as
    bits (a test reported more than once, by a rerun or a forged line, keeps all of them, so that
    a failure anywhere is sticky), and the other lines (objects). A line that is not one JSON
    value is skipped: the lap's own code may write there, and a killed session half a line."""
    by_session: dict[str, dict[str, int]] = {}
    lines: list[dict] = []
    decode = _DECODER.raw_decode
    known: dict[tuple, int] = {}  # the few combinations of outcomes a report's lines hold
    for text in report.decode("utf-8", "replace").split("\n"):
        try:
            line, end = decode(text)
        except (ValueError, RecursionError):  # RecursionError: a line nested deep on purpose
            continue
        if end != len(text) and text[end:].strip(" \t\r"):
            continue
        if isinstance(line, dict):
            lines.append(line)
        elif isinstance(line, list) and len(line) == 6 and isinstance(line[0], str) and isinstance(line[1], str):
            outcomes = (line[2], line[3], line[4], bool(line[5]))
            try:
                mask = known[outcomes]
            except KeyError:
                mask = known[outcomes] = _mask(outcomes)
            except TypeError:  # an outcome that is no string (a list, an object): it says nothing
                mask = _mask(outcomes)
            tests = by_session.get(line[0]) or by_session.setdefault(line[0], {})
            tests[line[1]] = tests.get(line[1], 0) | mask
    return by_session, lines


_DECODER = json.JSONDecoder()
# What each phase's outcome says of a test, as bits: a failed call, a failed setup or teardown
# (an error), a skip anywhere, a passed call, and pytest's word that it was expected to fail.
_CALL_FAILED, _ERRORED, _SKIPPED, _PASSED, _XFAIL = 1, 2, 4, 8, 16
_CALL = {"failed": _CALL_FAILED, "skipped": _SKIPPED, "passed": _PASSED}
_AROUND = {"failed": _ERRORED, "skipped": _SKIPPED}  # setup, teardown


def _outcomes(by_session: dict[str, dict[str, int]], counted: set[str]) -> dict[str, int]:
    """The tests of the counted sessions, each with the outcomes of all of them (an xdist
    session's controller and workers report the same tests)."""
    sessions = [tests for session, tests in by_session.items() if session in counted]
    if len(sessions) == 1:
        return sessions[0]
    bits: dict[str, int] = {}
    for tests in sessions:
        for test, mask in tests.items():
            bits[test] = bits.get(test, 0) | mask
    return bits


def _mask(outcomes: tuple[object, object, object, bool]) -> int:
    setup, call, teardown, xfail = outcomes
    mask = _CALL.get(call, 0) if isinstance(call, str) else 0
    for outcome in (setup, teardown):
        mask |= _AROUND.get(outcome, 0) if isinstance(outcome, str) else 0
    return mask | (_XFAIL if xfail else 0)


class _Found:
    """What the counted sessions' object lines say besides the tests' outcomes."""

    def __init__(self, outcomes: dict[str, int]) -> None:
        self.outcomes = outcomes
        self.collect_errors: set[str] = set()
        self.skipped_modules: set[str] = set()
        self.deselected: set[str] = set()
        self.collected: set[str] = set()
        self.setups: list[dict] = []

    def add(self, line: dict) -> None:
        if isinstance(line.get("collect_error"), str):
            self.collect_errors.add(line["collect_error"])
        elif isinstance(line.get("collect_skip"), str):
            self.skipped_modules.add(line["collect_skip"])
        elif isinstance(line.get("deselected"), list):
            self.deselected.update(test for test in line["deselected"] if isinstance(test, str))
        elif isinstance(line.get("collected"), list):
            self.collected.update(test for test in line["collected"] if isinstance(test, str))
        elif isinstance(line.get("setup"), dict):
            self.setups.append(line["setup"])


def _counted_sessions(lines: list[dict]) -> set[str]:
    """The check's own pytest sessions, and their xdist workers; not a session that started
    while another of the check's was still running (one a test started: pytester, or a lap's
    test running pytest on code of its choosing, however many processes lie between), and
    none at all if one of the check's sessions never reached its end (its set-up line)."""
    counted: set[str] = set()
    running: set[str] = set()
    for line in lines:
        session = line.get("session")
        if not isinstance(session, str):
            continue
        if "parent" in line:  # a session starts
            worker_of_ours = line.get("worker") is True and line.get("parent") in counted
            if worker_of_ours or not running:
                counted.add(session)
                running.add(session)
        elif "setup" in line:
            running.discard(session)
    return set() if running else counted


def _fold(found: _Found) -> TestResults:
    """One outcome per test from every report of its phases: a failure anywhere fails it (in
    setup or teardown, an error), and so does a collection error of its module; a skip is an
    xfail when pytest says the test was expected to fail. A test collected that never reported
    is failing too: the session ended before it (no verdict of its own)."""
    in_errored = _errored(found.collect_errors)
    passed, failing = [], [f"{node}::{COLLECTION}" for node in found.collect_errors]
    failed = errors = skipped = xfailed = 0
    for test, mask in found.outcomes.items():
        if mask & _CALL_FAILED:
            failed += 1
            failing.append(test)
        elif mask & _ERRORED or in_errored(test):
            errors += 1
            failing.append(test)
        elif mask & _SKIPPED:
            xfailed += bool(mask & _XFAIL)
            skipped += not mask & _XFAIL
        elif mask & _PASSED:
            passed.append(test)
    never_ran = found.collected.difference(found.outcomes)
    counts = TestCounts(
        passed=len(passed),
        failed=failed,
        errors=errors + len(found.collect_errors),
        skipped=skipped + len(found.skipped_modules),
        xfailed=xfailed,
        deselected=len(found.deselected),
        not_run=len(never_ran),
    )
    failing += never_ran
    return TestResults(
        counts=counts,
        passed_ids=sorted(passed),
        failing_ids=sorted(set(failing)),
        skipped_modules=sorted(found.skipped_modules),
        setup=_merged(found.setups),
    )


def _errored(collect_errors: set[str]) -> Callable[[str], bool]:
    """Is a test inside a module or folder that failed to collect? Its outcome cannot be. A test
    is inside one when its id, cut where a `::` or a `/` starts, is that module or folder: each
    test is looked up at the few lengths the errors have (or, when they have many, at its own
    `::` and `/`), so the cost grows with the tests, never with tests × errors."""
    modules = {node for node in collect_errors if node}
    folders = {node.rstrip("/") for node in modules}
    lengths = sorted({len(node) for node in modules | folders})

    def at_lengths(test: str) -> bool:
        for at in lengths:
            cut = test[at : at + 2]
            if (cut == "::" and test[:at] in modules) or (cut[:1] == "/" and test[:at] in folders):
                return True
        return False

    def at_separators(test: str) -> bool:
        prefixes = [(at.start(), modules) for at in _BEFORE_COLONS.finditer(test)]
        prefixes += [(at.start(), folders) for at in _BEFORE_SLASH.finditer(test)]
        return any(test[:at] in found for at, found in prefixes)

    if not lengths:
        return lambda test: False
    return at_lengths if len(lengths) <= _FEW_LENGTHS else at_separators


_FEW_LENGTHS = 4  # a test id has about as many `::` and `/`: past that, look at those instead


def _merged(setups: list[dict]) -> PytestSetup | None:
    """xdist's processes each write theirs: the session's set-up is all of them together."""
    if not setups:
        return None
    merged, digests = PytestSetup(), dict[str, set[str]]()
    for setup in setups:
        config, values, plugins = setup.get("config"), setup.get("values"), setup.get("plugins")
        merged.config = merged.config or (config if isinstance(config, str) else None)
        merged.values.update(_strings(values))
        merged.shadowing.update(_strings(setup.get("shadowing")))
        found = setup.get("user_tree")
        merged.user_tree = sorted({*merged.user_tree, *(map(str, found) if isinstance(found, list) else [])})[:10]
        for name, found in plugins.items() if isinstance(plugins, dict) else ():
            digests.setdefault(str(name), set()).update(map(str, found if isinstance(found, list) else [found]))
    merged.plugins = {name: _one_digest(found) for name, found in sorted(digests.items())}
    return merged


def _strings(mapping: object) -> dict[str, str]:
    return {str(key): str(value) for key, value in mapping.items()} if isinstance(mapping, dict) else {}


def _one_digest(digests: set[str]) -> str:
    if len(digests) < 2:
        return "".join(digests)
    return hashlib.sha256(" ".join(sorted(digests)).encode()).hexdigest()[:16]


def _regular_file(path: Path) -> bytes:
    """The whole file, read only if it is a regular file: the check that wrote it ran the lap's
    code, which may leave a link (never followed) or a FIFO (never waited on) there instead."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as report:
        info = os.fstat(report.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > REPORT_MAX_BYTES:
            raise ValueError(f"{path} is not a regular file of at most {REPORT_MAX_BYTES} bytes")
        return report.read()


def file_of(test_id: str) -> str:
    return test_id.partition("::")[0]
