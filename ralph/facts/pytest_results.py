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
    counts = TestCounts()
    passed, failing = [], []
    for test, found in outcomes.items():
        outcome = min(found, key=OUTCOMES.index)
        if outcome == "passed":
            counts.passed += 1
            passed.append(test)
        elif outcome in _FAILING:
            setattr(counts, _FAILING[outcome], getattr(counts, _FAILING[outcome]) + 1)
            failing.append(test)
        else:
            setattr(counts, outcome, getattr(counts, outcome) + 1)
    return TestResults(counts=counts, passed_ids=sorted(passed), failing_ids=sorted(failing))


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
        lines = [_line(text) for text in _regular_file(report).splitlines()]
    except (OSError, ValueError):
        return None
    # A failure of ralph's own plugin in any session, the check's or not, leaves nothing to trust.
    plugin_errors = sorted({str(line["plugin_error"]) for line in lines if "plugin_error" in line})
    counted = _counted_sessions(lines)
    outcomes: dict[str, dict[str, set[str]]] = {}  # test -> phase -> every outcome reported
    xfail, collect_errors, skipped_modules, deselected, collected, setups = set(), set(), set(), set(), set(), []
    for line in (line for line in lines if isinstance(line.get("session"), str) and line["session"] in counted):
        if isinstance(line.get("test"), str):
            outcomes.setdefault(line["test"], {}).setdefault(str(line.get("when")), set()).add(str(line.get("outcome")))
            if line.get("xfail"):
                xfail.add(line["test"])
        elif isinstance(line.get("collect_error"), str):
            collect_errors.add(line["collect_error"])
        elif isinstance(line.get("collect_skip"), str):
            skipped_modules.add(line["collect_skip"])
        elif isinstance(line.get("deselected"), str):
            deselected.add(line["deselected"])
        elif isinstance(line.get("collected"), str):
            collected.add(line["collected"])
        elif isinstance(line.get("setup"), dict):
            setups.append(line["setup"])
    if not (outcomes or collect_errors or skipped_modules or setups):
        return TestResults(counts=TestCounts(), plugin_errors=plugin_errors[:5]) if plugin_errors else None
    results = _fold(outcomes, xfail, collect_errors, len(deselected), setups)
    results.counts.skipped += len(skipped_modules)
    never_ran = sorted(collected - outcomes.keys())  # the session ended before them: no verdict
    results.counts.not_run = len(never_ran)
    results.failing_ids = sorted({*results.failing_ids, *never_ran})
    return results.model_copy(update={"skipped_modules": sorted(skipped_modules), "plugin_errors": plugin_errors[:5]})


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


def _fold(
    outcomes: dict[str, dict[str, set[str]]],
    xfail: set[str],
    collect_errors: set[str],
    deselected: int,
    setups: list[dict],
) -> TestResults:
    """One outcome per test from every report of its phases: a failure anywhere fails it (in
    setup or teardown, an error), and so does a collection error of its module; a skip is an
    xfail when pytest says the test was expected to fail."""
    counts = TestCounts(errors=len(collect_errors), deselected=deselected)
    in_errored = _errored(collect_errors)
    passed, failing = [], [f"{node}::{COLLECTION}" for node in collect_errors]
    for test, phases in outcomes.items():
        if "failed" in phases.get("call", ()):
            counts.failed += 1
            failing.append(test)
        elif any("failed" in found for found in phases.values()) or in_errored(test):
            counts.errors += 1
            failing.append(test)
        elif any("skipped" in found for found in phases.values()):
            counts.xfailed += test in xfail
            counts.skipped += test not in xfail
        elif "passed" in phases.get("call", ()):
            counts.passed += 1
            passed.append(test)
    return TestResults(counts=counts, passed_ids=sorted(passed), failing_ids=sorted(failing), setup=_merged(setups))


def _errored(collect_errors: set[str]) -> Callable[[str], bool]:
    """Is a test inside a module or folder that failed to collect? Its outcome cannot be. Each
    test is looked up by its own prefixes (before a `::`, before a `/`) of an error's length, so
    the cost grows with the tests, never with tests × errors."""
    modules = {node for node in collect_errors if node}
    folders = {node.rstrip("/") for node in modules}
    lengths = {len(node) for node in modules | folders}

    def inside(test: str) -> bool:
        if not lengths:
            return False
        prefixes = [(at.start(), modules) for at in _BEFORE_COLONS.finditer(test)]
        prefixes += [(at.start(), folders) for at in _BEFORE_SLASH.finditer(test)]
        return any(at in lengths and test[:at] in found for at, found in prefixes)

    return inside


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


def _line(text: bytes) -> dict:
    try:
        line = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: a line nested deep on purpose
        return {}  # a line the lap's own code wrote there, half a line from a killed session
    return line if isinstance(line, dict) else {}


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
    return test_id.split("::", 1)[0]
