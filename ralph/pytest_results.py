"""Per-test outcomes of a pytest run, read from the JUnit XML report ralph asks pytest for.

ralph sets PYTEST_ADDOPTS for every check, so any check that runs pytest (directly,
through make, tox, a script) writes a report; checks that do not run pytest ignore it.
xunit1 is asked for because its `file` attribute gives each test its path.
"""

from __future__ import annotations

import os
import re
import stat
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from pydantic import BaseModel

_DESELECTED = re.compile(r"\b(\d+) deselected\b")
REPORT_MAX_BYTES = 256 << 20  # a report is read whole or not at all
COLLECTION = "<collection>"  # the id suffix of a module that failed to import: not a test


class TestCounts(BaseModel):
    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    deselected: int = 0


class TestResults(BaseModel):
    __test__ = False

    counts: TestCounts
    passed_ids: list[str] = []  # sorted; kept in the note only where the ratchet needs it
    failing_ids: list[str] = []


def addopts(report: Path, existing: str | None) -> str:
    """PYTEST_ADDOPTS asking for a report at `report`, keeping whatever the user set."""
    ours = f"--junitxml={report} -o junit_family=xunit1"
    return f"{existing} {ours}" if existing else ours


def read(report: Path, output: str) -> TestResults | None:
    """The outcomes in `report`, None when pytest did not run (or wrote nothing readable)."""
    try:
        root = ElementTree.fromstring(_regular_file(report))
    except (OSError, ValueError, ElementTree.ParseError):
        return None
    counts = TestCounts()
    passed, failing = [], []
    for case in root.iter("testcase"):
        test_id = _test_id(case)
        kinds = {child.tag: child for child in case}
        if "failure" in kinds:
            counts.failed += 1
            failing.append(test_id)
        elif "error" in kinds:
            counts.errors += 1
            if kinds["error"].get("message") == "collection failure":
                test_id = f"{case.get('file') or test_id}::{COLLECTION}"
            failing.append(test_id)
        elif "skipped" in kinds:
            if kinds["skipped"].get("type") == "pytest.xfail":
                counts.xfailed += 1
            else:
                counts.skipped += 1
        else:
            counts.passed += 1
            passed.append(test_id)
    deselected = _DESELECTED.findall(output)
    counts.deselected = int(deselected[-1]) if deselected else 0
    return TestResults(counts=counts, passed_ids=sorted(passed), failing_ids=sorted(failing))


def _regular_file(path: Path) -> bytes:
    """The whole file, read only if it is a regular file: the check that wrote it ran the lap's
    code, which may leave a link (never followed) or a FIFO (never waited on) there instead."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as report:
        info = os.fstat(report.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > REPORT_MAX_BYTES:
            raise ValueError(f"{path} is not a regular file of at most {REPORT_MAX_BYTES} bytes")
        return report.read()


def _test_id(case: ElementTree.Element) -> str:
    """`path/test_x.py::Class::test_name`, as pytest prints node ids.

    `file` is where the test's code says it was written, `classname` where pytest collected it
    (its node id): when they disagree (code compiled under another file's name, to pass for a
    test of that file), the id is the collected one, `classname::name`, which no file's test has."""
    name, classname, file = case.get("name", "?"), case.get("classname", ""), case.get("file")
    module = (file or "").removesuffix(".py").replace("/", ".")
    if not file or not (classname == module or classname.startswith(module + ".")):
        return f"{classname}::{name}" if classname else name
    rest = classname[len(module) + 1:]
    return "::".join(part for part in (file, *rest.split("."), name) if part)


def file_of(test_id: str) -> str:
    return test_id.split("::", 1)[0]
