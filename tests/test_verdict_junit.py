"""JUnit XML reports read into pytest's TestResults: node's own runner for real, the shapes other
runners write, and the files a lap's code could leave where a report should be."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.node_runners import node_runner_bin, skip_reason
from helpers.repos import git, make_repo
from helpers.running import lap_notes, ralph

from ralph.facts import junit
from ralph.facts.junit import ReportUnreadable
from ralph.facts.pytest_results import TestCounts
from ralph.verdict import ratchet
from ralph.verdict.checks import CheckResult
from ralph.verdict.guard import GuardReport


def _node_major() -> int:
    if not shutil.which("node"):
        return 0
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    found = re.match(r"v(\d+)", version)
    return int(found.group(1)) if found else 0


needs_node = pytest.mark.skipif(_node_major() < 20, reason="needs node 20 or later (its test runner's junit reporter)")

NODE_TESTS = """\
const { test, describe, it } = require('node:test');
const assert = require('node:assert');

test('passes', () => {});
test('fails', () => { assert.strictEqual(1, 2); });
test('skipped', { skip: 'not today' }, () => {});
test('todo', { todo: true }, () => {});
describe('outer', () => {
  it('works', () => {});
  describe('inner', () => {
    it('works', () => {});
    it('breaks', () => { throw new Error('boom <&> "quoted"'); });
  });
});
"""

# The checks of a node project: the junit report to a file, the spec report to stdout.
NODE = [
    "node",
    "--test",
    "--test-reporter=junit",
    "--test-reporter-destination=reports/junit.xml",
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
]


def run_node(project: Path, *files: str) -> subprocess.CompletedProcess:
    (project / "reports").mkdir(exist_ok=True)  # node 20 does not make the destination's folder
    junit.remove(project, "reports/*.xml")
    return subprocess.run([*NODE, *files], cwd=project, capture_output=True, text=True, timeout=60)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def report(tmp_path: Path, xml: str, name: str = "junit.xml") -> Path:
    path = tmp_path / name
    path.write_text(xml)
    return path


def unreadable(path: Path, root: Path | None = None) -> str:
    with pytest.raises(ReportUnreadable) as raised:
        junit.read([path], root=root)
    reason = str(raised.value)
    assert "\n" not in reason and path.name in reason
    return reason


# --- node's built-in runner, for real -----------------------------------------------------------


@needs_node
def test_node_runner_ids_and_outcomes(tmp_path: Path):
    project = write(tmp_path, {"test/a.test.js": NODE_TESTS})
    done = run_node(project, "test/a.test.js")
    assert done.returncode == 1, done.stderr
    assert "✔ passes" in done.stdout and "✖ fails" in done.stdout  # the spec report still reaches stdout
    xml = (project / "reports/junit.xml").read_text()
    # node 20 writes classname="test" on every testcase and no file; describe blocks are nested
    # testsuites. Later versions add file="…" to testcases, which then leads every id.
    first = "test/a.test.js::" if ' file="' in xml else ""

    results = junit.read(junit.matching(project, "reports/*.xml"), root=project)

    assert results is not None
    assert results.passed_ids == sorted(
        f"{first}{test}" for test in ["test::passes", "outer::test::works", "outer::inner::test::works"]
    )
    assert results.failing_ids == sorted(f"{first}{test}" for test in ["test::fails", "outer::inner::test::breaks"])
    assert results.counts.model_dump() == dict(
        passed=3, failed=2, errors=0, skipped=2, xfailed=0, deselected=0, not_run=0
    )


@needs_node
def test_node_runner_failures_outside_a_test_and_absolute_paths(tmp_path: Path):
    """A file that does not load is a testcase named by its absolute path, outside every
    testsuite: it stands for the file, `<file>::<collection>`, the work tree cut off its path (or
    the id would change with every lap's folder). A failing `before` hook fails the tests of its
    describe block."""
    project = write(
        tmp_path / "project",
        {
            "test/hooked.test.js": "const { describe, it, before } = require('node:test');\n"
            "describe('hooked', () => { before(() => { throw new Error('hook'); }); it('child', () => {}); });\n",
            "test/broken.test.js": "this is ( not javascript\n",
        },
    )
    assert run_node(project, "test/hooked.test.js", "test/broken.test.js").returncode == 1

    results = junit.read(junit.matching(project, "reports/*.xml"), root=project)

    assert results is not None and results.passed_ids == []
    first = "test/hooked.test.js::" if ' file="' in (project / "reports/junit.xml").read_text() else ""
    assert f"{first}hooked::test::child" in results.failing_ids
    assert "test/broken.test.js::<collection>" in results.failing_ids
    without_root = junit.read(junit.matching(project, "reports/*.xml"))
    assert without_root is not None and any(str(project) in test for test in without_root.failing_ids)


LIB = "exports.a = () => {a};\nexports.b = () => {b};\n"
LIB_TESTS = """\
const { test } = require('node:test');
const assert = require('node:assert');
const lib = require('../lib.js');
test('test_a', () => { assert.strictEqual(lib.a(), 1); });
test('test_b', () => { assert.strictEqual(lib.b(), 1); });
"""


@needs_node
def test_two_versions_differ_in_exactly_the_tests_that_changed(tmp_path: Path):
    """What the ratchet needs: version A (test_a passes, test_b fails), then version B (test_a
    fails, test_b passes), read in the same work tree; A's report is gone before B runs."""
    project = write(tmp_path, {"test/lib.test.js": LIB_TESTS, "lib.js": LIB.format(a=1, b=0)})
    run_node(project, "test/lib.test.js")
    version_a = junit.read(junit.matching(project, "reports/*.xml"), root=project)
    (project / "lib.js").write_text(LIB.format(a=0, b=1))
    run_node(project, "test/lib.test.js")
    version_b = junit.read(junit.matching(project, "reports/*.xml"), root=project)

    assert version_a is not None and version_b is not None
    first = "test/lib.test.js::" if ' file="' in (project / "reports/junit.xml").read_text() else ""
    assert (version_a.passed_ids, version_a.failing_ids) == ([f"{first}test::test_a"], [f"{first}test::test_b"])
    assert (version_b.passed_ids, version_b.failing_ids) == ([f"{first}test::test_b"], [f"{first}test::test_a"])

    check = " ".join(NODE)
    comparison = ratchet.compare(
        [CheckResult(command=check, exit_code=1, duration_s=0, tests=version_a)],
        [CheckResult(command=check, exit_code=1, duration_s=0, tests=version_b)],
        GuardReport(),
    )
    assert comparison.newly_failing == [f"{first}test::test_a"]
    assert comparison.newly_passing == [f"{first}test::test_b"]
    assert f"tests that passed now fail: {first}test::test_a" in comparison.problems


# --- the shapes other runners write (as their documentation and code show them) ------------------

SHAPES = {
    # Maven surefire: one file per class, a bare <testsuite>; retries as flakyFailure/rerunFailure.
    "surefire": (
        """<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" version="3.0" name="com.example.CalcTest" tests="6">
  <properties><property name="basedir" value="/somewhere/else"/></properties>
  <testcase name="adds" classname="com.example.CalcTest" time="0.001"/>
  <testcase name="divides" classname="com.example.CalcTest"><failure message="expected: &lt;2&gt;" type="AssertionFailedError"><![CDATA[expected: <2> but was: <3>
<!DOCTYPE html> is only text in here]]></failure></testcase>
  <testcase name="parses" classname="com.example.CalcTest"><error type="java.lang.NullPointerException"/></testcase>
  <testcase name="later" classname="com.example.CalcTest"><skipped message="disabled"/></testcase>
  <testcase name="flaky" classname="com.example.CalcTest"><flakyFailure type="x"/><system-out>retried</system-out></testcase>
  <testcase name="broken" classname="com.example.CalcTest"><failure/><rerunFailure/><rerunFailure/></testcase>
</testsuite>""",
        ["com.example.CalcTest::adds", "com.example.CalcTest::flaky"],
        ["com.example.CalcTest::broken", "com.example.CalcTest::divides", "com.example.CalcTest::parses"],
        1,
    ),
    # gotestsum: a testsuite per package; classname is the package; subtests are name/sub.
    "gotestsum": (
        """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="test" tests="4" failures="1" errors="0">
  <testsuite tests="0" name="example.com/mod/broken"><testcase classname="" name="TestMain"><failure message="Failed"/></testcase></testsuite>
  <testsuite tests="3" name="example.com/mod/calc">
    <properties><property name="go.version" value="go1.22"/></properties>
    <testcase classname="example.com/mod/calc" name="TestAdd/negative"/>
    <testcase classname="example.com/mod/calc" name="TestAdd"/>
    <testcase classname="example.com/mod/calc" name="TestSlow"><skipped message="--- SKIP"/></testcase>
  </testsuite>
</testsuites>""",
        ["example.com/mod/calc::TestAdd", "example.com/mod/calc::TestAdd/negative"],
        ["example.com/mod/broken::TestMain"],
        1,
    ),
    # cargo nextest: a testsuite per test binary, classname the binary id; skipped tests are left out.
    "nextest": (
        """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="0">
  <testsuite name="my-crate::integration" tests="3">
    <testcase name="tests::works" classname="my-crate::integration"/>
    <testcase name="tests::flaky" classname="my-crate::integration"><flakyFailure type="test failure"/></testcase>
    <testcase name="tests::panics" classname="my-crate::integration"><failure type="test failure"/><rerunFailure type="test failure"/></testcase>
  </testsuite>
</testsuites>""",
        ["my-crate::integration::tests::flaky", "my-crate::integration::tests::works"],
        ["my-crate::integration::tests::panics"],
        0,
    ),
    # jest-junit with JEST_JUNIT_SUITE_NAME="{filepath}" and JEST_JUNIT_ADD_FILE_ATTRIBUTE=true;
    # by default classname and name are both "<describe blocks> <title>".
    "jest-junit": (
        """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="jest tests" tests="4" failures="1" errors="1">
  <testsuite name="src/sum.test.js" errors="0" failures="1" skipped="1" tests="3">
    <testcase classname="sum adds" name="sum adds" file="src/sum.test.js"/>
    <testcase classname="sum subtracts" name="sum subtracts" file="src/sum.test.js"><failure>Error: expect(received)</failure></testcase>
    <testcase classname="sum later" name="sum later" file="src/sum.test.js"><skipped/></testcase>
  </testsuite>
  <testsuite name="src/bad.test.js" errors="1" failures="0" tests="1">
    <testcase classname="Test suite failed to run" name="src/bad.test.js" file="src/bad.test.js"><error>SyntaxError</error></testcase>
  </testsuite>
</testsuites>""",
        ["src/sum.test.js::sum adds"],
        ["src/bad.test.js::<collection>", "src/sum.test.js::sum subtracts"],
        1,
    ),
    # vitest: a testsuite per file, classname the file, name the describe path joined with " > ".
    "vitest": (
        """<?xml version="1.0" encoding="UTF-8" ?>
<testsuites name="vitest tests" tests="3" failures="1" errors="0">
    <testsuite name="test/sum.test.ts" tests="3" failures="1" errors="0" skipped="1">
        <testcase classname="test/sum.test.ts" name="sum &gt; adds" time="0.001">
        </testcase>
        <testcase classname="test/sum.test.ts" name="sum &gt; nested &gt; subtracts"><failure message="expected 1 to be 2" type="AssertionError">AssertionError</failure></testcase>
        <testcase classname="test/sum.test.ts" name="sum &gt; later"><skipped/></testcase>
    </testsuite>
</testsuites>""",
        ["test/sum.test.ts::sum > adds"],
        ["test/sum.test.ts::sum > nested > subtracts"],
        1,
    ),
    # mocha-junit-reporter: one flat testsuite per describe, its file absolute; name is the full
    # title, classname the test's own title; skipped tests only with includePending.
    "mocha": (
        """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="Mocha Tests" tests="2" failures="1">
  <testsuite name="Root Suite" tests="0"/>
  <testsuite name="sum" file="{root}/test/sum.spec.js" tests="2" failures="1">
    <testcase name="sum adds" classname="adds" time="0.001"/>
    <testcase name="sum subtracts" classname="subtracts"><failure message="1 == 2" type="AssertionError"><![CDATA[AssertionError]]></failure></testcase>
  </testsuite>
</testsuites>""",
        ["test/sum.spec.js::sum::adds::sum adds"],
        ["test/sum.spec.js::sum::subtracts::sum subtracts"],
        0,
    ),
    # PHPUnit: suites nested (the configured suite, a class, a data provider), absolute files,
    # incomplete and skipped tests both <skipped/>.
    "phpunit": (
        """<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="unit" tests="4">
    <testsuite name="App\\CalcTest" file="{root}/tests/CalcTest.php" tests="4">
      <testcase name="testAdds" file="{root}/tests/CalcTest.php" line="9" class="App\\CalcTest" classname="App.CalcTest" assertions="1"/>
      <testcase name="testLater" file="{root}/tests/CalcTest.php" line="14" class="App\\CalcTest" classname="App.CalcTest" assertions="0"><skipped/></testcase>
      <testsuite name="App\\CalcTest::testSums" tests="2">
        <testcase name="testSums with data set #0" file="{root}/tests/CalcTest.php" line="20" class="App\\CalcTest" classname="App.CalcTest" assertions="1"/>
        <testcase name="testSums with data set #1" file="{root}/tests/CalcTest.php" line="20" class="App\\CalcTest" classname="App.CalcTest" assertions="1"><failure type="ExpectationFailedException">Failed asserting</failure></testcase>
      </testsuite>
    </testsuite>
  </testsuite>
</testsuites>""",
        ["tests/CalcTest.php::unit::App\\CalcTest::App.CalcTest::testAdds"],
        ["tests/CalcTest.php::unit::App\\CalcTest::App\\CalcTest::testSums::App.CalcTest::testSums with data set #1"],
        1,
    ),
}


@pytest.mark.parametrize("runner", sorted(SHAPES))
def test_each_runners_shape(tmp_path: Path, runner: str):
    xml, passed, failing, skipped = SHAPES[runner]
    path = report(tmp_path, xml.replace("{root}", str(tmp_path)))
    results = junit.read([path], root=tmp_path)
    assert results is not None
    assert results.failing_ids == failing
    assert set(passed) <= set(results.passed_ids) and results.counts.skipped == skipped
    assert results.counts.passed == len(results.passed_ids) and not any(str(tmp_path) in t for t in results.passed_ids)


def test_ids_fold_as_pytests_do(tmp_path: Path):
    """One id twice: failing if either failed or erred, skipped over passed; each counted once."""
    a = report(
        tmp_path,
        '<testsuite name="s"><testcase name="a"/><testcase name="b"/><testcase name="c"/><testcase name="d"/></testsuite>',
        "a.xml",
    )
    b = report(
        tmp_path,
        '<testsuite name="s"><testcase name="a"><failure/></testcase><testcase name="b"><skipped/></testcase>'
        '<testcase name="c"/><testcase name="d"><error/></testcase></testsuite>',
        "b.xml",
    )
    results = junit.read([a, b])
    assert results is not None
    assert (results.passed_ids, results.failing_ids) == (["s::c"], ["s::a", "s::d"])
    assert results.counts.model_dump() == dict(
        passed=1, failed=1, errors=1, skipped=1, xfailed=0, deselected=0, not_run=0
    )


def test_a_namespace_and_a_byte_order_mark_change_nothing(tmp_path: Path):
    path = tmp_path / "junit.xml"
    path.write_bytes(
        b'\xef\xbb\xbf<testsuites xmlns="urn:x"><testsuite name="s"><testcase name="t"/></testsuite></testsuites>'
    )
    results = junit.read([path])
    assert results is not None and results.passed_ids == ["s::t"]


def test_no_files_and_an_empty_suite(tmp_path: Path):
    assert junit.read([]) is None
    results = junit.read([report(tmp_path, '<testsuite name="nothing" tests="0"/>')])
    assert results is not None and results.counts == TestCounts()


# --- hostile files: each makes the whole read "could not read", naming the file and why ----------

BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE t [<!ENTITY l0 "lol">'
    + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    + ']>\n<testsuite name="s"><testcase name="&l9;"/></testsuite>'
)


@pytest.mark.parametrize(
    "xml",
    [
        BILLION_LAUGHS,
        '<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&x;"/></testsuite>',
        '<?xml version="1.0"?><!-- a comment --><?pi first?>\n<!DOCTYPE testsuite><testsuite/>',
    ],
    ids=["billion-laughs", "external-entity", "after-a-comment"],
)
def test_a_dtd_is_refused_before_the_parser_sees_it(tmp_path: Path, xml: str):
    assert "DTD" in unreadable(report(tmp_path, xml))


def test_a_dtd_behind_another_encoding_is_not_missed(tmp_path: Path):
    path = tmp_path / "junit.xml"
    path.write_bytes('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE t><testsuite/>'.encode("utf-16"))
    assert "not UTF-8" in unreadable(path)
    path.write_bytes(b'<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE t><testsuite/>')
    assert "DTD" in unreadable(path)


def test_the_parser_refuses_a_dtd_too():
    """The second guard, behind the look at the prolog: the parser target's own."""
    with pytest.raises(ReportUnreadable, match="DTD"):
        junit._Report(None).parse("<!DOCTYPE t><testsuite/>", "junit.xml")


def test_a_link_is_never_followed(tmp_path: Path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/junit.xml").symlink_to("/etc/passwd")
    assert junit.matching(tmp_path, "reports/*.xml") == [tmp_path / "reports/junit.xml"]
    assert "a link, never followed" in unreadable(tmp_path / "reports/junit.xml", root=tmp_path)


def test_a_fifo_is_never_waited_on(tmp_path: Path):
    os.mkfifo(tmp_path / "junit.xml")
    assert "not a regular file" in unreadable(tmp_path / "junit.xml")


def test_a_report_over_the_cap_is_not_read_at_all(tmp_path: Path):
    path = tmp_path / "junit.xml"
    with path.open("wb") as sparse:
        sparse.truncate(300 << 20)  # 300 MB that take no room and no time
    assert "over the" in unreadable(path)


def test_reports_over_the_cap_together(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(junit, "REPORT_MAX_BYTES", 100)
    small = '<testsuite name="s"><testcase name="t"/></testsuite>'
    files = [report(tmp_path, small, "a.xml"), report(tmp_path, small + " " * 60, "b.xml")]
    with pytest.raises(ReportUnreadable, match="b.xml: the reports add up to over 100 bytes"):
        junit.read(files)


@pytest.mark.parametrize(
    "content, why",
    [
        (b"", "not well-formed XML"),
        (b'<testsuite name="s"><testcase name="t"></testsuite>', "not well-formed XML"),
        (b"not xml at all", "not well-formed XML"),
        (b'<testsuite name="\xff"/>', "not UTF-8"),
        (b"<html><testsuite/></html>", "not a JUnit report (its root element is <html>)"),
        (b"<testsuites><!-- tests 0 --></testsuites>", "holds no <testsuite> and no <testcase>"),
        (b"<testsuite>" * 65 + b"</testsuite>" * 65, "nested over 64 deep"),
        (b'<testsuite><testcase name="' + b"x" * 5000 + b'"/></testsuite>', "a test id over 4096 characters"),
        (b"<testsuite><testcase/></testsuite>", "no name, classname or file"),
    ],
    ids=["empty", "unclosed", "text", "latin-1", "html", "no-suites", "too-deep", "long-id", "unnamed"],
)
def test_what_is_not_a_report(tmp_path: Path, content: bytes, why: str):
    path = tmp_path / "junit.xml"
    path.write_bytes(content)
    assert why in unreadable(path)


def test_ids_cannot_add_up_to_more_than_the_report_could(tmp_path: Path, monkeypatch):
    """Suite names are repeated in every id below them: a small report could otherwise make
    ids without end."""
    monkeypatch.setattr(junit, "REPORT_MAX_BYTES", 200)
    cases = "".join(f'<testcase name="{n}"/>' for n in range(6))
    path = report(tmp_path, f'<testsuite name="{"s" * 40}">{cases}</testsuite>')
    assert path.stat().st_size < 200
    assert "its test ids add up to over 200 characters" in unreadable(path)


def test_one_unreadable_report_spoils_the_read(tmp_path: Path):
    good = report(tmp_path, '<testsuite name="s"><testcase name="t"/></testsuite>', "a.xml")
    bad = report(tmp_path, "<testsuite", "b.xml")
    with pytest.raises(ReportUnreadable, match=r"^b.xml: not well-formed XML"):
        junit.read([good, bad], root=tmp_path)


# --- finding the reports, and clearing them before a check --------------------------------------


@pytest.mark.parametrize(
    "pattern, plain",
    [
        ("reports/*.xml", "reports/*.xml"),
        ("./reports//junit.xml", "reports/junit.xml"),
        ("**/TEST-*.xml", "**/TEST-*.xml"),
    ],
)
def test_validate_pattern_accepts(pattern: str, plain: str):
    assert junit.validate_pattern(pattern) == plain


@pytest.mark.parametrize(
    "pattern, why",
    [
        ("/tmp/junit.xml", "inside the repository"),
        ("../reports/*.xml", "inside the repository"),
        ("reports/../../x.xml", "inside the repository"),
        ("~/junit.xml", "inside the repository"),
        (".git/junit.xml", "inside the repository"),
        ("", "names no file"),
        ("reports/**", "names no file"),
        # what a .gitignore line (pathspec matches them as one) would read otherwise
        ("!reports/*.xml", "not a glob as git reads one"),
        ("reports/*.xml ", "not a glob as git reads one"),
        ("reports /*.xml", "not a glob as git reads one"),
        ("reports/[a.xml", "not a glob as git reads one"),
        ("reports/[z-a].xml", "not a glob as git reads one"),
    ],
)
def test_validate_pattern_refuses(pattern: str, why: str):
    with pytest.raises(ValueError, match=why):
        junit.validate_pattern(pattern)


def test_matching_stays_in_the_work_tree(tmp_path: Path):
    outside = write(tmp_path / "outside", {"junit.xml": "<testsuite/>", "reports/junit.xml": "<testsuite/>"})
    tree = write(
        tmp_path / "tree",
        {
            "junit.xml": "",
            "reports/a.xml": "",
            "reports/notes.txt": "",
            "reports/sub/b.xml": "",
            "deep/er/junit.xml": "",
            ".git/junit.xml": "",
            "target/surefire-reports/TEST-com.example.CalcTest.xml": "",
            "mod/target/surefire-reports/TEST-Other.xml": "",
        },
    )
    (tree / "linked").symlink_to(outside, target_is_directory=True)
    (tree / "reports/linked.xml").symlink_to(outside / "junit.xml")
    (tree / "reports/folder.xml").mkdir()

    def found(pattern: str) -> list[str]:
        return [str(path.relative_to(tree)) for path in junit.matching(tree, pattern)]

    assert found("reports/*.xml") == ["reports/a.xml", "reports/linked.xml"]
    assert found("**/junit.xml") == ["deep/er/junit.xml", "junit.xml"]
    assert found("linked/*.xml") == [] and found("**/reports/junit.xml") == []
    assert found("**/target/surefire-reports/TEST-*.xml") == [
        "mod/target/surefire-reports/TEST-Other.xml",
        "target/surefire-reports/TEST-com.example.CalcTest.xml",
    ]
    assert found("reports/sub/b.xml") == ["reports/sub/b.xml"] and found("*") == ["junit.xml", "linked"]


@pytest.mark.parametrize(
    "pattern, matched",
    [
        # a pattern names files, never a folder's contents, as a .gitignore line would
        ("reports", ["reports"]),
        ("reports/*", ["reports/a.xml"]),
        ("**/sub", []),
        # `*` stays in its folder, `**` spans none or more, brackets, case as written
        ("*.xml", ["#x.xml", "top.xml"]),
        ("reports/**/*.xml", ["reports/a.xml", "reports/sub/b.xml", "reports/sub/deeper/c.xml"]),
        ("**/[!a].xml", ["reports/sub/b.xml", "reports/sub/deeper/c.xml"]),
        ("*.XML", ["A.XML"]),
        # where a .gitignore line would be a comment, this is a file's name
        ("#x.xml", ["#x.xml"]),
    ],
)
def test_what_a_pattern_matches(pattern: str, matched: list[str]):
    tracked = [
        "#x.xml",
        "A.XML",
        "reports",
        "top.xml",
        "reports/a.xml",
        "reports/sub/b.xml",
        "reports/sub/deeper/c.xml",
    ]
    assert junit.tracked_matches(tracked, pattern) == matched


def test_a_folder_named_by_the_pattern_gives_none_of_its_files(tmp_path: Path):
    tree = write(tmp_path, {"reports/x.xml": "", "out/reports/y.xml": "", "out/junit.xml/z.xml": ""})
    assert junit.matching(tree, "reports") == [] and junit.matching(tree, "**/reports") == []
    assert junit.matching(tree, "**/junit.xml") == []
    assert junit.matching(tree, "**/*.xml") == [
        tree / "out/junit.xml/z.xml",
        tree / "out/reports/y.xml",
        tree / "reports/x.xml",
    ]


def test_remove_deletes_files_and_links_never_what_they_point_to(tmp_path: Path):
    target = write(tmp_path / "outside", {"keep.xml": "mine"}) / "keep.xml"
    tree = write(tmp_path / "tree", {"reports/old.xml": "<testsuite/>", "reports/keep.txt": ""})
    (tree / "reports/link.xml").symlink_to(target)
    (tree / "reports/dir.xml").mkdir()
    os.mkfifo(tree / "reports/fifo.xml")

    removed = junit.remove(tree, "reports/*.xml")

    assert sorted(path.name for path in removed) == ["fifo.xml", "link.xml", "old.xml"]
    assert sorted(path.name for path in (tree / "reports").iterdir()) == ["dir.xml", "keep.txt"]
    assert target.read_text() == "mine"


# --- end to end: a ralph run whose check reports through junit -----------------------------------

AGENT = r"""
import os, pathlib
lap = int(os.environ["RALPH_LAP"])
lib = pathlib.Path("lib.js")
if lap == 1:  # fixes test_b, breaks test_a
    lib.write_text("exports.a = () => 0;\nexports.b = () => 1;\n")
else:
    lib.write_text("exports.a = () => 1;\nexports.b = () => 1;\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ] Make test_b pass", "- [x] Make test_b pass"))
"""


def node_job(tmp_path: Path, agent_source: str, files: dict[str, str], tests: str) -> Path:
    """A repository whose check runs node's test runner on `tests`, its JUnit report declared."""
    agent = tmp_path / "agent.py"
    agent.write_text(agent_source)
    config = {
        "goal": "Make every test pass",
        "agent": {"kind": "command", "command": f"{sys.executable} {agent}"},
        "checks": [{"run": "mkdir -p reports && " + " ".join(NODE[:4]) + f" {tests}", "junit": "reports/*.xml"}],
        "limits": {"max_laps": 2},
    }
    files = {**files, ".gitignore": "reports/\n", "ralph.yaml": json.dumps(config)}
    return make_repo(tmp_path / "repo", files)


@needs_node
def test_a_run_holds_junit_tests_to_the_ratchet(tmp_path: Path):
    files = {
        "lib.js": LIB.format(a=1, b=0),
        "test/lib.test.js": LIB_TESTS,
        "TODO.md": "# TODO\n- [ ] Make test_b pass\n",
    }
    repo = node_job(tmp_path, AGENT, files, "test/lib.test.js")

    result = ralph(repo, "run", "--name", "t")

    assert result.returncode == 0, result.stdout + result.stderr
    red, green = lap_notes(repo, "t")
    assert red["status"] == "red" and "tests that passed now fail: test::test_a" in red["reason"]
    assert green["status"] == "green" and green["checks"][0]["tests"]["counts"]["passed"] == 2


MORE_TESTS = """\
const { test } = require('node:test');
const assert = require('node:assert');
const more = require('../more.js');
test('test_c', () => { assert.strictEqual(more.c(), 1); });
"""

# The cheat of issue 38: the module under test exits as it loads (node then reports its test
# file as one passing testcase, none of its tests run), and a new smoke test passes.
EXIT_AND_SMOKE = (
    "pathlib.Path('more.js').write_text('process.exit(0);\\n')\n"
    "pathlib.Path('test/smoke.test.js').write_text(\"require('node:test').test('smoke', () => {});\\n\")\n"
)
WRITE_MORE = "pathlib.Path('more.js').write_text('exports.c = () => 1;\\n')\n"
TICK = "t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', '- [x]'))\n"


def more_job(tmp_path: Path, agent: str) -> Path:
    """A node job that starts with test/more.test.js unable to load (more.js is not written)."""
    files = {
        "lib.js": LIB.format(a=1, b=1),
        "test/lib.test.js": LIB_TESTS,
        "test/more.test.js": MORE_TESTS,
        "TODO.md": "- [ ] Write more.js\n",
    }
    return node_job(tmp_path, agent, files, "test/")


@needs_node
def test_a_test_file_that_could_not_load_goes_only_when_its_own_tests_run_not_for_a_smoke_test(tmp_path: Path):
    """The job starts with tests for a module not written yet: node reports the file as one
    failing testcase named by its path. Lap 1 cheats: more.js exits as it loads, plus a smoke
    test; lap 2 writes more.js for real, and the file's own test runs and passes."""
    agent = "import os, pathlib\nif os.environ['RALPH_LAP'] == '1':\n    "
    agent += EXIT_AND_SMOKE.replace("\n", "\n    ").rstrip() + "\nelse:\n    " + WRITE_MORE + TICK
    repo = more_job(tmp_path, agent)

    result = ralph(repo, "run", "--name", "t")

    baseline = json.loads(git(repo, "cat-file", "blob", "refs/ralph/t/run"))["baseline"][0]
    assert baseline["could_not_run"] == "" and "test/more.test.js::<collection>" in baseline["tests"]["failing_ids"]
    exited, written = lap_notes(repo, "t")
    assert exited["status"] == "red", exited["reason"]
    assert "failing tests are gone: test/more.test.js::<collection>" in exited["reason"]
    assert written["status"] == "green", written["reason"]
    assert result.returncode == 0 and written["done"] is True
    assert git(repo, "show", "ralph/t:more.js") == "exports.c = () => 1;"


NAMED_LIKE_FILES = """\
const { test, describe } = require('node:test');
const assert = require('node:assert');
const lib = require('../lib.js');
test('handles foo.test.js', () => { assert.strictEqual(lib.a(), 1); });
describe('parser', () => { test('reads spec/b.spec.ts', () => { assert.strictEqual(lib.a(), 1); }); });
test('test_b', () => { assert.strictEqual(lib.b(), 1); });
"""


@needs_node
def test_a_passing_test_named_like_a_test_file_may_not_start_failing(tmp_path: Path):
    """A test's name never makes it a file: the lap fixes test_b, breaks the two tests whose
    names end like test files and adds a passing test of its own, so that as many tests pass as
    before; both are tests that passed and now fail."""
    agent = "import pathlib\npathlib.Path('lib.js').write_text('exports.a = () => 0;\\nexports.b = () => 1;\\n')\n"
    agent += "pathlib.Path('test/pad.test.js').write_text(\"require('node:test').test('pads', () => {});\\n\")\n" + TICK
    files = {"lib.js": LIB.format(a=1, b=0), "test/lib.test.js": NAMED_LIKE_FILES, "TODO.md": "- [ ] Fix b\n"}
    repo = node_job(tmp_path, agent, files, "test/")

    ralph(repo, "run", "--name", "t")

    first = lap_notes(repo, "t")[0]
    assert first["status"] == "red", first["reason"]
    assert (
        "tests that passed now fail: parser::test::reads spec/b.spec.ts, test::handles foo.test.js" in first["reason"]
    )
    assert git(repo, "rev-parse", "ralph/t") == git(repo, "rev-parse", "refs/ralph/t/base")


# --- which file a test is in: the report's structure, never a name -----------------------------


def runner_check(project: Path, command: list[str]) -> CheckResult:
    """A node runner run for real in `project`, read as ralph reads a check with `junit: reports/*.xml`."""
    junit.remove(project, "reports/*.xml")
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300)
    results = junit.read(junit.matching(project, "reports/*.xml"), root=project)
    return CheckResult(command=Path(command[0]).name, exit_code=done.returncode, duration_s=0, tests=results)


def test_mocha_a_passing_test_named_like_a_file_that_fails_is_a_test_that_now_fails(tmp_path: Path):
    """mocha's xunit reporter, for real: the lap breaks `handles foo.test.js` and adds a test of
    its own, so that as many pass as before; main took the test for a file and saw nothing."""
    mocha = node_runner_bin("mocha")
    if mocha is None:
        pytest.skip(skip_reason("mocha"))
    spec = "const lib = require('../lib.js');\nconst assert = require('node:assert');\n"
    spec += "describe('parser', () => { it('handles foo.test.js', () => assert.strictEqual(lib.a(), 1)); });\n"
    project = write(tmp_path, {"test/lib.test.js": spec, "lib.js": "exports.a = () => 1;\n"})

    def run() -> CheckResult:
        return runner_check(
            project, [str(mocha), "--reporter", "xunit", "--reporter-option", "output=reports/junit.xml"]
        )

    (project / "reports").mkdir()
    green = run()
    (project / "lib.js").write_text("exports.a = () => 0;\n")
    (project / "test/pad.test.js").write_text("it('pads', () => {});\n")
    lap = run()

    test = "test/lib.test.js::Mocha Tests::parser::handles foo.test.js"
    assert green.tests is not None and green.tests.passed_ids == [test]
    comparison = ratchet.compare([green], [lap], GuardReport())
    assert comparison.newly_failing == [test] and f"tests that passed now fail: {test}" in comparison.problems


def test_vitest_a_file_that_did_not_load_goes_when_its_own_tests_pass(tmp_path: Path):
    """vitest, for real: a file that does not load is a testsuite of its own holding one failing
    testcase named by the file, `<file>::<collection>`; it goes when the file's own test passes
    (main took it for a failing test named `test/more.test.js` that vanished: red)."""
    vitest = node_runner_bin("vitest")
    if vitest is None:
        pytest.skip(skip_reason("vitest"))
    project = write(
        tmp_path,
        {
            "test/lib.test.js": "const lib = require('../lib.js');\nit('adds', () => expect(lib.a()).toBe(1));\n",
            "test/more.test.js": "const more = require('../more.js');\nit('test_c', () => expect(more.c()).toBe(1));\n",
            "lib.js": "exports.a = () => 1;\n",
        },
    )

    def run() -> CheckResult:
        return runner_check(
            project, [str(vitest), "run", "--globals", "--reporter=junit", "--outputFile.junit=reports/junit.xml"]
        )

    base = run()
    assert base.tests is not None and base.tests.failing_ids == ["test/more.test.js::<collection>"]
    (project / "more.js").write_text("exports.c = () => 1;\n")
    honest = run()

    comparison = ratchet.compare([base], [honest], GuardReport())
    assert comparison.problems == [] and comparison.newly_passing == ["test/more.test.js::test_c"]


# node 22 and later: every testcase carries its test file; a file that did not load, or ran no
# test, is a testcase named by that file.
NODE_22 = """<testsuites>
  <testcase name="test_a" classname="test" file="{root}/test/lib.test.js"/>
  {more}
  {smoke}
</testsuites>"""
MORE_FAILS = (
    '<testcase name="{root}/test/more.test.js" classname="test" file="{root}/test/more.test.js"><failure/></testcase>'
)
MORE_RAN_NOTHING = '<testcase name="{root}/test/more.test.js" classname="test" file="{root}/test/more.test.js"/>'
MORE_PASSES = '<testcase name="test_c" classname="test" file="{root}/test/more.test.js"/>'
SMOKE = '<testcase name="smoke" classname="test" file="{root}/test/smoke.test.js"/>'
# A describe named by the file, in a new test file: a suite's name is not a file.
NAMED_SUITE = (
    '<testsuite name="test/more.test.js" tests="1" failures="0">'
    '<testcase name="test_c" classname="test" file="{root}/test/smoke.test.js"/></testsuite>'
)


def node_22(tmp_path: Path, more: str, smoke: str = "") -> CheckResult:
    xml = NODE_22.format(more=more, smoke=smoke, root="{root}").replace("{root}", str(tmp_path))
    path = report(tmp_path, xml, f"{len(list(tmp_path.iterdir()))}.xml")
    results = junit.read([path], root=tmp_path)
    return CheckResult(command="node --test", exit_code=0, duration_s=0, tests=results)


@pytest.mark.parametrize(
    "lap, gone",
    [
        ((MORE_RAN_NOTHING, SMOKE), True),  # exits as it loads, plus a smoke test
        (("", SMOKE), True),  # not reported at all, plus a smoke test
        ((MORE_RAN_NOTHING, NAMED_SUITE), True),  # a new test in a describe named by the file
        ((MORE_PASSES, ""), False),  # its own test runs and passes
    ],
    ids=["exits-and-smoke", "unreported-and-smoke", "suite-named-by-the-file", "honest"],
)
def test_a_file_that_did_not_load_goes_only_when_a_test_of_that_file_passes(tmp_path: Path, lap, gone: bool):
    base = node_22(tmp_path, MORE_FAILS)
    assert base.tests is not None and base.tests.failing_ids == ["test/more.test.js::<collection>"]
    now = node_22(tmp_path, *lap)

    comparison = ratchet.compare([base], [now], GuardReport())

    assert ("failing tests are gone: test/more.test.js::<collection>" in comparison.problems) is gone
    assert comparison.problems == ([] if not gone else comparison.problems)
    assert "test/more.test.js::<collection>" not in comparison.newly_passing


def test_a_suite_whose_counts_say_it_failed_fails_though_its_testcases_pass(tmp_path: Path):
    """An error outside every testcase (a runner that counts it but writes no testcase for it):
    the suite's own `failures=`/`errors=` say so, and the suite fails at `<file>::<collection>`."""
    xml = (
        '<testsuites><testsuite name="test/a.test.ts" tests="2" failures="1" errors="1">'
        '<testcase classname="test/a.test.ts" name="adds"/>'
        '<testcase classname="test/a.test.ts" name="subtracts"><error/></testcase>'
        '</testsuite><testsuite name="test/b.test.ts" tests="1" failures="0" skipped="-1">'
        '<testcase classname="test/b.test.ts" name="works"/></testsuite></testsuites>'
    )
    results = junit.read([report(tmp_path, xml)], root=tmp_path)

    assert results is not None
    assert results.failing_ids == ["test/a.test.ts::<collection>", "test/a.test.ts::subtracts"]
    assert results.passed_ids == ["test/a.test.ts::adds", "test/b.test.ts::works"]
    assert results.passing_files == ["test/a.test.ts", "test/b.test.ts"]


def test_a_tests_name_never_makes_it_a_file(tmp_path: Path):
    """Tests named like files, in suites named like files, are tests: only the structure (a
    `file`, vitest's classname) says which file a test is in, and which testcase stands for one."""
    xml = """<testsuites>
  <testsuite name="test/a.test.js" tests="3">
    <testcase classname="test/a.test.js" name="handles foo.test.js"/>
    <testcase classname="test/a.test.js" name="test/b.test.js &gt; x"/>
    <testcase classname="test/b.test.js" name="test/b.test.js"/>
  </testsuite>
  <testsuite name="Mocha Tests" tests="1"><testcase classname="" name="y.spec.js" file="{root}/test/c.js"/></testsuite>
  <testcase name="test/d.test.js" classname="test"/>
</testsuites>""".replace("{root}", str(tmp_path))
    results = junit.read([report(tmp_path, xml)], root=tmp_path)

    assert results is not None and not any("<collection>" in test for test in results.passed_ids)
    assert "test/a.test.js::handles foo.test.js" in results.passed_ids
    assert "test/a.test.js::test/b.test.js" in results.passed_ids  # not vitest's file: another classname
    assert results.passing_files == ["", "test/a.test.js", "test/c.js"]
