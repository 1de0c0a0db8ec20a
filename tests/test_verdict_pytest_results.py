"""Reading ralph's pytest report, which the check's own code can write to: whatever lies there
is read as data or skipped, never a crash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.repos import write as write_files

from ralph.facts import pytest_results


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_lines_nested_too_deep_or_with_odd_sessions_are_skipped(tmp_path: Path):
    report = write(
        tmp_path / "report.jsonl",
        {"session": "1.0", "parent": "0.0", "worker": False},
        "[" * 100_000,  # json.loads raises RecursionError on this, not ValueError
        [[], "t.py::test_forged", "passed", "passed", "passed", False],
        ["1.0", "t.py::test_forged_too", [], {}, "passed"],
        ["1.0", "t.py::test_a", "passed", "passed", "passed", False],
        {"session": "1.0", "setup": {"config": None, "values": {}, "plugins": {}}},
    )
    results = pytest_results.read(report)
    assert results is not None and results.passed_ids == ["t.py::test_a"]


def test_a_failure_anywhere_is_sticky_and_a_module_that_failed_to_collect_passes_nothing(tmp_path: Path):
    report = write(
        tmp_path / "report.jsonl",
        {"session": "1.0", "parent": "0.0", "worker": False},
        ["1.0", "t.py::test_a", "passed", "failed", "passed", False],
        ["1.0", "t.py::test_a", "passed", "passed", "passed", False],
        {"session": "1.0", "collect_error": "u.py"},
        ["1.0", "u.py::test_b", "passed", "passed", "passed", False],
        {"session": "1.0", "setup": {"config": None, "values": {}, "plugins": {}}},
    )
    results = pytest_results.read(report)
    assert results is not None and results.passed_ids == []
    assert results.failing_ids == ["t.py::test_a", "u.py::<collection>", "u.py::test_b"]


@pytest.mark.parametrize("ending", ["pytest.exit('done', returncode=0)", "raise KeyboardInterrupt"])
def test_tests_the_session_never_reached_have_no_verdict_and_count_as_failing(tmp_path: Path, ending: str):
    # The code under test ends the session early and cleanly: the tests after it never ran.
    write_files(
        tmp_path,
        {
            "calc.py": f"def div(a, b):\n    import pytest\n    {ending}\n",
            "test_calc.py": "from calc import div\n\ndef test_exists():\n    assert div\n\n"
            "def test_div():\n    assert div(6, 3) == 2\n\ndef test_neg():\n    assert div(-6, 3) == -2\n",
        },
    )
    report = tmp_path / "report.jsonl"
    env = pytest_results.check_env({"PATH": "/usr/bin:/bin"}, report)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tmp_path, env=env, capture_output=True
    )
    results = pytest_results.read(report)
    assert results is not None and results.passed_ids == ["test_calc.py::test_exists"]
    assert "test_calc.py::test_neg" in results.failing_ids  # never reached


def test_a_collect_only_session_runs_no_test_and_fails_none(tmp_path: Path):
    write_files(tmp_path, {"test_calc.py": "def test_a():\n    pass\n"})
    report = tmp_path / "report.jsonl"
    env = pytest_results.check_env({"PATH": "/usr/bin:/bin"}, report)
    args = [sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider"]
    assert subprocess.run(args, cwd=tmp_path, env=env, capture_output=True).returncode == 0
    results = pytest_results.read(report)
    assert results is not None and results.failing_ids == [] and results.counts.ran == 0


def session_lines(report: Path) -> list:
    return [json.loads(line) for line in report.read_text().splitlines()]


def test_a_killed_session_leaves_every_test_it_finished_and_judges_none(tmp_path: Path):
    """One line a test, written as it ends: a session killed in its third test has written the
    first two (what it knew), and ralph, seeing a session that never reached its end, reads none."""
    write_files(
        tmp_path,
        {
            "test_calc.py": "import os\n\ndef test_a():\n    pass\n\ndef test_b():\n    assert 1 == 2\n\n"
            "def test_c():\n    os._exit(0)\n\ndef test_d():\n    pass\n"
        },
    )
    report = tmp_path / "report.jsonl"
    env = pytest_results.check_env({"PATH": "/usr/bin:/bin"}, report)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tmp_path, env=env, capture_output=True
    )
    found = session_lines(report)
    assert [line[1:] for line in found if isinstance(line, list)] == [
        ["test_calc.py::test_a", "passed", "passed", "passed", False],
        ["test_calc.py::test_b", "passed", "failed", "passed", False],
    ]
    assert [line["collected"] for line in found if "collected" in line] == [[f"test_calc.py::test_{x}" for x in "abcd"]]
    assert not [line for line in found if "setup" in line]
    assert pytest_results.read(report) is None


def test_a_phase_reported_again_keeps_every_outcome(tmp_path: Path):
    """A subtest reports the call phase of its test once more: each report of a phase gives the
    test a line of its own, and a failure in any of them fails the test."""
    write_files(
        tmp_path,
        {
            "test_parts.py": "def test_parts(subtests):\n    with subtests.test(msg='one'):\n        assert False\n"
            "    with subtests.test(msg='two'):\n        pass\n\ndef test_ok():\n    pass\n"
        },
    )
    report = tmp_path / "report.jsonl"
    env = pytest_results.check_env({"PATH": "/usr/bin:/bin"}, report)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tmp_path, env=env, capture_output=True
    )
    parts = [
        line for line in session_lines(report) if isinstance(line, list) and line[1] == "test_parts.py::test_parts"
    ]
    assert len(parts) == 3  # the subtests' reports and the test's own
    results = pytest_results.read(report)
    assert results is not None
    assert (results.passed_ids, results.failing_ids) == (["test_parts.py::test_ok"], ["test_parts.py::test_parts"])
