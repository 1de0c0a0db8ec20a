"""Per-test outcomes of a pytest session, and how it was set up, from ralph's own plugin.

ralph sets PYTEST_ADDOPTS, PYTHONPATH and RALPH_PYTEST_REPORT for every check, so any check
that runs pytest (directly, through make, a script) loads `_ralph_pytest` (ralph/pytest_plugin)
and writes a report; checks that do not run pytest ignore them. Test ids are pytest's node ids.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from pydantic import BaseModel

REPORT_MAX_BYTES = 256 << 20  # a report is read whole or not at all
COLLECTION = "<collection>"  # the id suffix of a module that failed to import: not a test
PLUGIN = "_ralph_pytest"
PLUGIN_DIR = Path(__file__).parent / "pytest_plugin"


class TestCounts(BaseModel):
    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    deselected: int = 0


class PytestSetup(BaseModel):
    """What decides how pytest judges: its configuration file and values, and the plugins it
    registered (by file or class, each with a digest of its code and hooks)."""

    config: str | None = None
    values: dict[str, str] = {}
    plugins: dict[str, str] = {}


class TestResults(BaseModel):
    __test__ = False

    counts: TestCounts
    passed_ids: list[str] = []  # sorted; kept in the note only where the ratchet needs it
    failing_ids: list[str] = []
    setup: PytestSetup | None = None  # None: an older note's, or a session that died before its end


def check_env(env: dict[str, str], report: Path) -> dict[str, str]:
    """The variables that make pytest load ralph's plugin and report to `report`, keeping the
    user's own PYTEST_ADDOPTS and PYTHONPATH."""
    def joined(name: str, ours: str, separator: str) -> str:
        return f"{ours}{separator}{env[name]}" if env.get(name) else ours
    return dict(env, RALPH_PYTEST_REPORT=str(report), PYTEST_ADDOPTS=joined("PYTEST_ADDOPTS", f"-p {PLUGIN}", " "),
                PYTHONPATH=joined("PYTHONPATH", str(PLUGIN_DIR), os.pathsep))


def plugin_missing(output: str) -> bool:
    """Did pytest fail to import ralph's plugin (a check that sets PYTHONPATH over ralph's)?"""
    return f"No module named '{PLUGIN}'" in output


def read(report: Path) -> TestResults | None:
    """The outcomes in `report`, None when pytest did not run (or wrote nothing readable)."""
    try:
        lines = [_line(text) for text in _regular_file(report).splitlines()]
    except (OSError, ValueError):
        return None
    phases: dict[str, dict[str, tuple[str, bool]]] = {}
    collect_errors, deselected, setups = set(), set(), []
    for line in lines:
        if isinstance(line.get("test"), str):
            phases.setdefault(line["test"], {})[str(line.get("when"))] = (str(line.get("outcome")),
                                                                          bool(line.get("xfail")))
        elif isinstance(line.get("collect_error"), str):
            collect_errors.add(f"{line['collect_error']}::{COLLECTION}")
        elif isinstance(line.get("deselected"), str):
            deselected.add(line["deselected"])
        elif isinstance(line.get("setup"), dict):
            setups.append(line["setup"])
    if not (phases or collect_errors or setups):
        return None
    return _fold(phases, collect_errors, len(deselected), setups)


def _fold(phases: dict[str, dict[str, tuple[str, bool]]], collect_errors: set[str], deselected: int,
          setups: list[dict]) -> TestResults:
    """One outcome per test from its phases: a failure in any phase fails it (in setup or
    teardown, an error); a skip is an xfail when pytest says the test was expected to fail."""
    counts = TestCounts(errors=len(collect_errors), deselected=deselected)
    passed, failing = [], list(collect_errors)
    for test, by_phase in phases.items():
        outcomes = {phase: outcome for phase, (outcome, _) in by_phase.items()}
        xfail = any(flag for _, flag in by_phase.values())
        if outcomes.get("call") == "failed":
            counts.failed += 1
            failing.append(test)
        elif "failed" in outcomes.values():
            counts.errors += 1
            failing.append(test)
        elif "skipped" in outcomes.values():
            counts.xfailed += xfail
            counts.skipped += not xfail
        elif outcomes.get("call") == "passed":
            counts.passed += 1
            passed.append(test)
    return TestResults(counts=counts, passed_ids=sorted(passed), failing_ids=sorted(failing),
                       setup=_merged(setups))


def _merged(setups: list[dict]) -> PytestSetup | None:
    """xdist's processes each write theirs: the session's set-up is all of them together."""
    if not setups:
        return None
    merged, digests = PytestSetup(), {}
    for setup in setups:
        config, values, plugins = setup.get("config"), setup.get("values"), setup.get("plugins")
        merged.config = merged.config or (config if isinstance(config, str) else None)
        merged.values.update({str(key): str(value) for key, value in (values or {}).items()}
                             if isinstance(values, dict) else {})
        for name, found in (plugins.items() if isinstance(plugins, dict) else ()):
            digests.setdefault(str(name), set()).update(map(str, found if isinstance(found, list) else [found]))
    merged.plugins = {name: _one_digest(found) for name, found in sorted(digests.items())}
    return merged


def _one_digest(digests: set[str]) -> str:
    if len(digests) < 2:
        return "".join(digests)
    return hashlib.sha256(" ".join(sorted(digests)).encode()).hexdigest()[:16]


def _line(text: bytes) -> dict:
    try:
        line = json.loads(text)
    except ValueError:
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
