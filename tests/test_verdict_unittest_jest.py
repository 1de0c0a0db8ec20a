"""Per-test results of unittest (its -v output) and jest (its --json report), and mocha's own
xunit report read by the JUnit reader: from outputs the real tools wrote (tests/fixtures/runners/,
each saying how it was made), from the real tools run on small projects (the slow tests), and
from what a lap's code could leave instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.node_runners import node_runner_bin, skip_reason
from helpers.repos import write

from ralph.facts import junit
from ralph.facts.junit import ReportUnreadable
from ralph.facts.pytest_results import REPORT_MAX_BYTES, TestResults
from ralph.verdict import jest_results, unittest_results

FIXTURES = Path(__file__).parent / "fixtures" / "runners"

UNITTEST_PROJECT = {
    "tests/__init__.py": "",
    "tests/test_cases.py": """\
import unittest


class Cases(unittest.TestCase):
    def test_passes(self):
        pass

    def test_fails(self):
        self.assertEqual(1, 2)

    def test_errors(self):
        raise RuntimeError("boom")

    @unittest.skip("not today")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_unexpected_success(self):
        pass

    def test_documented(self):
        \"\"\"The first line of a docstring.

        More lines.\"\"\"

    def test_prints(self):
        print("hello", end="")

    def test_prints_newline(self):
        print("hello ... ok")

    def test_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertNotEqual(i, 1)


class BrokenClass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("class setup")

    def test_never(self):
        pass
""",
    "tests/test_module_setup.py": """\
import unittest


def setUpModule():
    raise RuntimeError("module setup")


class InBrokenModule(unittest.TestCase):
    def test_never(self):
        pass
""",
    "tests/test_broken_import.py": "import unittest\nimport no_such_module_here\n",
}
SUBTEST_PROJECT = {
    "test_sub.py": """\
import unittest

class S(unittest.TestCase):
    def test_skip_some(self):
        for i in range(3):
            with self.subTest(i=i):
                if i == 1:
                    self.skipTest("one")

    def test_error_sub(self):
        with self.subTest("msg here", i=2):
            raise ValueError("x")

    def test_after(self):
        pass

    def test_print_after_status(self):
        print("FAIL")

def load_tests(loader, tests, pattern):
    import doctest, docmod
    tests.addTests(doctest.DocTestSuite(docmod))
    return tests
""",
    "docmod.py": '''def f():\n    """\n    >>> 1 + 1\n    2\n    """\ndef g():\n    """\n    >>> 1 + 1\n    3\n    """\n''',
}
CASES = "tests/test_cases.py::Cases::"
UNITTEST_PASSED = [
    f"{CASES}test_documented",
    f"{CASES}test_passes",
    f"{CASES}test_prints",
    f"{CASES}test_prints_newline",
]
UNITTEST_FAILING = [
    "tests/test_broken_import.py::<collection>",
    "tests/test_cases.py::BrokenClass::<collection>",
    f"{CASES}test_errors",
    f"{CASES}test_fails",
    f"{CASES}test_subtests",
    f"{CASES}test_unexpected_success",
    "tests/test_module_setup.py::<collection>",
]

JEST_PROJECT = {
    "package.json": '{"name": "jp", "private": true}\n',
    "src/__tests__/math.test.js": """\
describe('math', () => {
  test('adds', () => { expect(1 + 1).toBe(2); });
  test('breaks', () => { expect(1 + 1).toBe(3); });
  test.skip('skipped one', () => {});
  test.todo('to do later');
  describe('inner > deep', () => {
    it('works', () => { console.log('hello'); });
  });
});
test('top level', () => {});
""",
    "src/__tests__/broken.test.js": "require('./no-such-module');\ntest('never', () => {});\n",
    "src/__tests__/throws.test.js": "throw new Error('boom at load');\n",
    "src/__tests__/empty.test.js": "// no tests\n",
}
JEST_PASSED = [
    "src/__tests__/math.test.js::math > adds",
    "src/__tests__/math.test.js::math > inner > deep > works",
    "src/__tests__/math.test.js::top level",
]
JEST_FAILING = [
    "src/__tests__/broken.test.js::<collection>",
    "src/__tests__/empty.test.js::<collection>",
    "src/__tests__/math.test.js::math > breaks",
    "src/__tests__/throws.test.js::<collection>",
]

MOCHA_PROJECT = {
    "package.json": '{"name": "mp", "private": true}\n',
    "test/math.test.js": """\
const assert = require('node:assert');
describe('math', () => {
  it('adds', () => { assert.strictEqual(1 + 1, 2); });
  it('breaks', () => { assert.strictEqual(1 + 1, 3); });
  it.skip('skipped one', () => {});
  it('pending without body');
  describe('inner', () => {
    it('works', () => { console.log('hello <&>'); });
  });
});
it('top level', () => {});
""",
    "test/hooks.test.js": """\
describe('setup breaks', () => {
  before(() => { throw new Error('setup'); });
  it('never', () => {});
  it('never either', () => {});
});
describe('teardown breaks', () => {
  after(() => { throw new Error('teardown'); });
  it('fine', () => {});
});
describe('skips itself', () => {
  it('at runtime', function () { this.skip(); });
});
""",
}
MOCHA = "Mocha Tests"  # the one testsuite's name mocha's xunit reporter writes
MOCHA_PASSED = [
    f"test/hooks.test.js::{MOCHA}::teardown breaks::fine",
    f"test/math.test.js::{MOCHA}::math inner::works",
    f"test/math.test.js::{MOCHA}::math::adds",
    f"test/math.test.js::{MOCHA}::top level",
]
MOCHA_FAILING = [
    f'test/hooks.test.js::{MOCHA}::setup breaks::"before all" hook for "never"',
    f'test/hooks.test.js::{MOCHA}::teardown breaks::"after all" hook for "fine"',
    f"test/math.test.js::{MOCHA}::math::breaks",
]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def ids(results: TestResults | None) -> tuple[list[str], list[str]]:
    assert results is not None
    return results.passed_ids, results.failing_ids


# unittest, from its real output


@pytest.mark.parametrize("python", ["py38", "py311"])
def test_unittest_output_of_old_and_new_pythons_gives_the_same_ids(tmp_path, python):
    write(tmp_path, UNITTEST_PROJECT)
    results = unittest_results.read(fixture(f"unittest_{python}.txt"), tmp_path)
    assert ids(results) == (UNITTEST_PASSED, UNITTEST_FAILING)
    assert results is not None
    counts = results.counts
    assert (counts.passed, counts.failed, counts.errors, counts.skipped, counts.xfailed) == (4, 3, 4, 1, 1)


def test_unittest_ids_fall_back_to_dotted_names_where_no_file_is_found(tmp_path):
    passed, failing = ids(unittest_results.read(fixture("unittest_py311.txt"), tmp_path))
    assert "tests.test_cases::Cases::test_passes" in passed
    assert "tests.test_broken_import::<collection>" in failing
    assert "tests.test_module_setup::<collection>" in failing


def test_unittest_modules_are_found_under_src(tmp_path):
    write(tmp_path, {"src/pkg/__init__.py": "", "src/pkg/test_it.py": ""})
    output = "test_a (pkg.test_it.T.test_a) ... ok\n\n" + "-" * 70 + "\nRan 1 test in 0.000s\n\nOK\n"
    assert ids(unittest_results.read(output, tmp_path)) == (["src/pkg/test_it.py::T::test_a"], [])


@pytest.mark.parametrize("python", ["py310", "py311"])
def test_unittest_subtests_doctests_and_printed_outcome_words(tmp_path, python):
    write(tmp_path, SUBTEST_PROJECT)
    results = unittest_results.read(fixture(f"unittest_subtests_{python}.txt"), tmp_path)
    passed = ["docmod.py::f", "test_sub.py::S::test_after", "test_sub.py::S::test_print_after_status"]
    assert ids(results) == (passed, ["docmod.py::g", "test_sub.py::S::test_error_sub"])
    assert results is not None and results.counts.skipped == 1  # test_skip_some: a subtest skipped


def test_unittest_output_without_its_closing_summary_is_no_evidence(tmp_path):
    output = fixture("unittest_py311.txt").split("Ran 11 tests")[0]
    assert unittest_results.read(output, tmp_path) is None
    assert unittest_results.read("", tmp_path) is None
    assert unittest_results.read("uv: Failed to spawn: `python`\n", tmp_path) is None


def test_a_unittest_test_that_started_and_never_ended_is_failing(tmp_path):
    """Two runs in one check (`make test` running two suites): the second died mid-test."""
    first = "test_a (m.T.test_a) ... ok\n\n" + "-" * 70 + "\nRan 1 test in 0.001s\n\nOK\n"
    second = "test_b (m.T.test_b) ... ok\ntest_c (m.T.test_c) ... Segmentation fault\n"
    results = unittest_results.read(first + second, tmp_path)
    assert ids(results) == (["m::T::test_a", "m::T::test_b"], ["m::T::test_c"])
    assert results is not None and results.counts.not_run == 1


def test_a_fixtures_bare_error_line_does_not_fail_the_test_before_it(tmp_path):
    output = fixture("unittest_py311.txt")
    # In the real output, setUpModule's bare ERROR follows test_unexpected_success: make that one pass.
    unexpected = "test_unexpected_success (tests.test_cases.Cases.test_unexpected_success) ... unexpected success"
    output = output.replace(f"{unexpected}\nERROR", "test_x (tests.test_cases.Cases.test_x) ... ok\nERROR")
    passed, failing = ids(unittest_results.read(output, tmp_path))
    assert "tests.test_cases::Cases::test_x" in passed


def test_unittest_without_v_counts_from_its_summary(tmp_path):
    output = "..F.s\n" + "=" * 70 + "\nFAIL: test_f (m.T.test_f)\n" + "-" * 70 + "\nTraceback...\n\n"
    output += "-" * 70 + "\nRan 5 tests in 0.001s\n\nFAILED (failures=1, skipped=1)\n"
    results = unittest_results.read(output, tmp_path)
    assert ids(results) == ([], ["m::T::test_f"])
    assert results is not None and (results.counts.passed, results.counts.failed, results.counts.skipped) == (3, 1, 1)


def test_a_failures_block_is_not_read_for_progress_lines(tmp_path):
    """Output the test printed, shown in its failure's block (-b), names no test."""
    output = "test_a (m.T.test_a) ... FAIL\n\n" + "=" * 70 + "\nFAIL: test_a (m.T.test_a)\n" + "-" * 70
    output += "\nStdout:\ntest_z (m.T.test_z) ... ok\n\n" + "-" * 70 + "\nRan 1 test in 0.001s\n\nFAILED (failures=1)\n"
    assert ids(unittest_results.read(output, tmp_path)) == ([], ["m::T::test_a"])


ODD_OUTPUTS = [
    "Ran 1 test in 0.1s\n" + "\x00\udcff\r\x0c" * 1000,
    "Ran 1 test in 0.1s\n" + " ... " * 100_000,
    "Ran 1 test in 0.1s\n" + "test_a (" + "a." * 50_000 + "b) ... ok\n",
    "Ran 1 test in 0.1s\n" + "skipped '" * 100_000 + "'",
    "Ran 1 test in 0.1s\n" + ("=" * 70 + "\n") * 1000 + "FAIL: \n" + "ERROR: x (" * 10_000,
    "Ran 1 test in 0.1s\n" + " " * 200_000 + "x (y) ... ok",
    "Ran 1 test in 0.1s\n" + "test_a (m.T.test_a) ... \n" * 10_000,
    "test_a (..) ... ok\nsetUpClass (.) ... ERROR\nRan 1 test in 0.1s\nFAILED (failures=x, =, errors=-1)\n",
]


@pytest.mark.parametrize("output", ODD_OUTPUTS, ids=range(len(ODD_OUTPUTS)))
def test_odd_unittest_output_never_crashes_the_reader(tmp_path, output):
    assert isinstance(unittest_results.read(output, tmp_path), TestResults)


def test_the_unittest_reader_is_linear_in_its_input(tmp_path):
    line = "test_a (m.T.test_a) ... hello ... skipped 'a ... b' ok\n"

    def seconds(copies: int) -> float:
        output = line * copies + "Ran 1 test in 0.1s\n"
        started = time.perf_counter()
        unittest_results.read(output, tmp_path)
        return time.perf_counter() - started

    small, large = seconds(5_000), seconds(50_000)
    assert large < 30 * max(small, 0.01)  # ten times the input: far from a hundred times the time


# jest, from its real report


def test_jest_report_gives_ids_by_file_and_describe():
    results = jest_results.read([FIXTURES / "jest_report.json"], Path("/tmp/rpj/jp"))
    assert ids(results) == (JEST_PASSED, JEST_FAILING)
    assert results is not None
    counts = results.counts
    assert (counts.passed, counts.failed, counts.errors, counts.skipped) == (3, 1, 3, 2)  # todo and skip: skipped


def test_jest_test_failing_and_hooks(tmp_path):
    """test.failing's body failing is an expected failure; an afterAll hook failing fails its file."""
    failing = [
        {"ancestorTitles": [], "title": "expected to fail", "status": "passed", "failing": True},
        {"ancestorTitles": [], "title": "wrongly passes", "status": "failed", "failing": True},
    ]
    passing = [{"ancestorTitles": ["d"], "title": "fine", "status": "passed"}]
    suites = [
        {"name": f"{tmp_path}/a.test.js", "status": "failed", "message": "", "assertionResults": failing},
        {"name": f"{tmp_path}/b.test.js", "status": "failed", "assertionResults": passing},
    ]
    report = tmp_path / "jest.json"
    report.write_text(json.dumps({"testResults": suites}))
    results = jest_results.read([report], tmp_path)
    assert ids(results) == (["b.test.js::d > fine"], ["a.test.js::wrongly passes", "b.test.js::<collection>"])
    assert results is not None and results.counts.xfailed == 1


def test_no_jest_report_is_none():
    assert jest_results.read([], Path("/")) is None


JEST_REFUSED = {
    "not JSON": b"<html>",
    "not UTF-8": b'{"testResults": [], "x": "\xff"}',
    "not an object": b"[]",
    "no testResults": b'{"numTotalTests": 0}',
    "a name that is not text": b'{"testResults": [{"name": 1, "status": "passed", "assertionResults": []}]}',
    "titles not text": b'{"testResults": [{"name": "a", "status": "passed", "assertionResults": '
    b'[{"ancestorTitles": [1], "title": "t", "status": "passed"}]}]}',
    "nested deep": b'{"testResults": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "a huge number": b'{"testResults": ' + b"9" * 100_000 + b"}",
    "an id too long": json.dumps(
        {
            "testResults": [
                {
                    "name": "a",
                    "status": "passed",
                    "assertionResults": [{"ancestorTitles": [], "title": "t" * 5000, "status": "passed"}],
                }
            ]
        }
    ).encode(),
}


@pytest.mark.parametrize("data", JEST_REFUSED.values(), ids=JEST_REFUSED.keys())
def test_what_is_not_jests_report_is_refused_in_one_line(tmp_path, data):
    report = tmp_path / "jest.json"
    report.write_bytes(data)
    with pytest.raises(ReportUnreadable) as refused:
        jest_results.read([report], tmp_path)
    assert str(refused.value).startswith("jest.json: ") and "\n" not in str(refused.value)


def test_a_link_or_fifo_where_the_jest_report_should_be_is_refused(tmp_path):
    (tmp_path / "real.json").write_text('{"testResults": []}')
    os.symlink(tmp_path / "real.json", tmp_path / "link.json")
    os.mkfifo(tmp_path / "fifo.json")
    for name, why in (("link.json", "a link"), ("fifo.json", "not a regular file")):
        with pytest.raises(ReportUnreadable, match=why):
            jest_results.read([tmp_path / name], tmp_path)


def test_jest_reports_over_the_size_cap_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(jest_results, "REPORT_MAX_BYTES", 100)
    report = tmp_path / "jest.json"
    report.write_text(json.dumps({"testResults": [], "pad": "x" * 60}))
    with pytest.raises(ReportUnreadable, match="over 100 bytes"):
        jest_results.read([report, report], tmp_path)
    assert REPORT_MAX_BYTES > 100


# mocha's built-in xunit reporter, read by the JUnit reader


def test_mochas_xunit_report_reads_through_junit():
    results = junit.read([FIXTURES / "mocha_xunit.xml"], Path("/tmp/rpj/mp"))
    assert ids(results) == (MOCHA_PASSED, MOCHA_FAILING)
    assert results is not None and results.counts.skipped == 3  # it.skip, a test with no body, this.skip()


def test_mochas_parallel_xunit_report_names_a_file_that_threw_as_it_loaded():
    passed, failing = ids(junit.read([FIXTURES / "mocha_xunit_parallel.xml"], Path("/tmp/rpj/mp")))
    assert passed == MOCHA_PASSED
    assert failing == sorted([*MOCHA_FAILING, f"test/throws.test.js::{MOCHA}::Uncaught error outside test suite"])


# The real tools on small projects: an honest pass, a failure, a skip, a deleted test, a file that fails to load


@pytest.mark.slow
def test_real_unittest(tmp_path):
    write(tmp_path, UNITTEST_PROJECT)

    def run() -> TestResults | None:
        done = subprocess.run([sys.executable, "-m", "unittest", "-v"], cwd=tmp_path, capture_output=True, text=True)
        return unittest_results.read(done.stdout + done.stderr, tmp_path)

    results = run()
    assert ids(results) == (UNITTEST_PASSED, UNITTEST_FAILING)
    source = tmp_path / "tests/test_cases.py"
    source.write_text(source.read_text().replace("    def test_passes(self):\n        pass\n", ""))
    passed, failing = ids(run())
    assert f"{CASES}test_passes" not in passed + failing and f"{CASES}test_documented" in passed


def node_runner(name: str) -> Path:
    program = node_runner_bin(name)
    if program is None:
        pytest.skip(skip_reason(name))
    return program


@pytest.mark.slow
def test_real_jest(tmp_path):
    jest = node_runner("jest")
    write(tmp_path, JEST_PROJECT)
    (tmp_path / "reports").mkdir()  # jest writes its report into a folder that must exist

    def run() -> TestResults | None:
        command = [str(jest), "--ci", "--json", "--outputFile=reports/jest.json"]
        subprocess.run(command, cwd=tmp_path, capture_output=True, timeout=300)
        return jest_results.read([tmp_path / "reports/jest.json"], tmp_path)

    results = run()
    assert ids(results) == (JEST_PASSED, JEST_FAILING)
    assert results is not None and results.counts.skipped == 2
    source = tmp_path / "src/__tests__/math.test.js"
    source.write_text(source.read_text().replace("  test('adds', () => { expect(1 + 1).toBe(2); });\n", ""))
    passed, failing = ids(run())
    assert "src/__tests__/math.test.js::math > adds" not in passed + failing
    assert "src/__tests__/math.test.js::top level" in passed


@pytest.mark.slow
def test_real_mocha_xunit_through_junit(tmp_path):
    mocha = node_runner("mocha")
    write(tmp_path, MOCHA_PROJECT)
    report = tmp_path / "reports/junit.xml"

    def run(*args: str) -> subprocess.CompletedProcess:
        report.unlink(missing_ok=True)
        command = [str(mocha), *args, "--reporter", "xunit", "--reporter-option", "output=reports/junit.xml"]
        return subprocess.run([*command, "test/*.test.js"], cwd=tmp_path, capture_output=True, text=True, timeout=300)

    run()
    assert ids(junit.read([report], tmp_path)) == (MOCHA_PASSED, MOCHA_FAILING)
    source = tmp_path / "test/math.test.js"
    source.write_text(source.read_text().replace("  it('adds', () => { assert.strictEqual(1 + 1, 2); });\n", ""))
    (tmp_path / "test/throws.test.js").write_text("throw new Error('boom at load');\n")
    # Serial mocha stops at a file that throws as it loads: no report, so the check could not run.
    done = run()
    assert not report.exists() and "boom at load" in done.stderr + done.stdout
    # In parallel, each file loads on its own: the file that threw is named, the rest ran.
    run("--parallel")
    passed, failing = ids(junit.read([report], tmp_path))
    assert f"test/math.test.js::{MOCHA}::math::adds" not in passed + failing
    assert f"test/throws.test.js::{MOCHA}::Uncaught error outside test suite" in failing
    assert f"test/math.test.js::{MOCHA}::top level" in passed
