"""ralph's own judging work per lap, by the number of tests and TODO items (issue 26).

    python bench/judging_scale.py                           # 1,000 / 10,000 / 100,000, 3 reps
    python bench/judging_scale.py --against /tmp/old        # and an older ralph beside it

What a lap costs ralph beyond running the checks, piece by piece, in-process and without git:
n tests in n/10 files, n TODO items. The last green commit's tests: 1% failing, and the tests
of n/1000 files that failed to import. The lap's: those files collect and pass, 1% of the tests
that passed now fail, the tests of n/1000 files its ticked items name are gone (granted). Its
TODO: every item kept but in reverse order, one in ten ticked, each ticked item asking to
update a file the lap changed.

- pytest report: reading the lap's report of its pytest session (ralph/facts/pytest_results.py)
- JUnit report: reading a JUnit XML report of n testcases (ralph/facts/junit.py)
- ratchet: the lap's tests against the last green commit's (ralph/verdict/ratchet.py)
- note: the lap's check result written as JSON and read back (its note, the next lap's state)
- TODO read: the lap's TODO parsed (the base's and the green commit's are kept from earlier laps) (ralph/todo/)
- TODO rules: no item lost or reworded, which were ticked (ralph/verdict/guard.py, ralph/todo/)
- grants: does a ticked item grant each changed file's change, `(may change: PATH)` (ralph/verdict/grants.py)
- rebase: the lap's ticks and new items put onto a TODO that moved (laps side by side)
- go / libtest / unittest / jest: reading n tests' results from `go test -json`'s events, cargo's
  libtest lines, `python -m unittest -v`'s lines and jest's JSON report (ralph/verdict/go_test.py,
  libtest.py, unittest_results.py, jest_results.py; issue 37; "nan" for a ralph without them)
- failure lines: lifting the failure lines out of a failed check's whole output, 1% failing
  (ralph/verdict/failure_lines.py)
- pytest plugin writes: ralph's pytest plugin (ralph/facts/pytest_plugin/) writing the report
  the first row reads, its hooks called as pytest calls them; time inside the check's session,
  beside the lap's total (issue 41: one line a test, where it wrote four)

Each size is measured in the same run, and "growth" is the exponent k in time ∝ n^k between
two sizes: 1 is linear, 2 quadratic. With --against DIR, the same script runs in a process
whose PYTHONPATH starts with DIR (a folder holding another `ralph` package) for the sizes of
--against-sizes (an older ralph may take hours at 100,000).
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

from common import median, table, timed  # common isolates HOME first

from ralph import todo
from ralph.facts import junit, pytest_results
from ralph.verdict import guard, ratchet
from ralph.verdict.checks import CheckResult
from ralph.verdict.grants import all_of as grants_of

PIECES = ("pytest report", "JUnit report", "ratchet", "note", "TODO read", "TODO rules", "grants", "rebase")
READERS = ("go", "libtest", "unittest", "jest", "failure lines")
PLUGIN_WRITES = "pytest plugin writes"  # inside the check's pytest session, not ralph's own time


def test_ids(n: int) -> list[str]:
    return [f"tests/test_f{number // 10:06d}.py::test_{number}" for number in range(n)]


def file_of_test(number: int) -> str:
    return f"tests/test_f{number // 10:06d}.py"


def lap_tests(n: int) -> tuple[CheckResult, CheckResult, list[str]]:
    """The last green commit's check result, the lap's, and the files whose tests it removed."""
    ids = test_ids(n)
    files = n // 10
    broken_import = {f"tests/test_e{number:06d}.py" for number in range(max(1, n // 1000))}
    removed = {file_of_test(number * 10) for number in range(files - max(1, n // 1000), files)}
    failing_before = ids[: n // 100]
    before = _check(
        ids[n // 100 :], [*failing_before, *(f"{path}::{pytest_results.COLLECTION}" for path in broken_import)]
    )
    kept = [test for test in ids if test.split("::")[0] not in removed]
    newly_failing = set(kept[n // 100 : n // 50])
    passing = [test for test in kept if test not in newly_failing] + [f"{path}::test_now" for path in broken_import]
    return before, _check(passing, sorted(newly_failing)), sorted(removed)


def _check(passed: list[str], failing: list[str]) -> CheckResult:
    counts = pytest_results.TestCounts(passed=len(passed), failed=len(failing))
    tests = pytest_results.TestResults(counts=counts, passed_ids=sorted(passed), failing_ids=sorted(failing))
    return CheckResult(command="pytest", exit_code=1, duration_s=1.0, tests=tests)


def pytest_report(folder: Path, n: int) -> tuple[Path, float]:
    """What ralph's plugin writes for a session of n tests, written by the plugin itself (this
    ralph's, whatever its format), its hooks called as pytest calls them: each test collected,
    then its three phases reported. And the seconds that took, in the check's time, not ralph's."""
    report = folder / "report.jsonl"
    plugin = _plugin()
    config = SimpleNamespace(
        pluginmanager=SimpleNamespace(list_name_plugin=list), option=SimpleNamespace(collectonly=False), inipath=None
    )
    items = [SimpleNamespace(nodeid=test) for test in test_ids(n)]
    errors = [f"tests/test_e{number}.py" for number in range(max(1, n // 1000))]
    os.environ["RALPH_PYTEST_REPORT"] = str(report)
    try:
        started = time.perf_counter()
        plugin.pytest_configure(config)
        for error in errors:
            plugin.pytest_collectreport(SimpleNamespace(nodeid=error, failed=True, skipped=False))
        plugin.pytest_collection_finish(SimpleNamespace(config=config, items=items))
        for item in items:
            for when in PHASES:
                plugin.pytest_runtest_logreport(SimpleNamespace(nodeid=item.nodeid, when=when, outcome="passed"))
        plugin.pytest_sessionfinish(SimpleNamespace(config=config))
        plugin.pytest_unconfigure(config)
        seconds = time.perf_counter() - started
    finally:
        del os.environ["RALPH_PYTEST_REPORT"]
    return report, seconds


def _plugin() -> ModuleType:
    """The plugin of the ralph measured (an older one's with --against), imported as pytest would."""
    if str(pytest_results.PLUGIN_DIR) not in sys.path:
        sys.path.insert(0, str(pytest_results.PLUGIN_DIR))
    return importlib.import_module(pytest_results.PLUGIN)


PHASES = ("setup", "call", "teardown")


def junit_report(folder: Path, n: int) -> Path:
    cases = "".join(f'<testcase classname="c{number // 10}" name="t{number}" file="f.py"/>' for number in range(n))
    report = folder / "junit.xml"
    report.write_text(f'<testsuites><testsuite name="s">{cases}</testsuite></testsuites>')
    return report


def checklists(n: int, targets: list[str]) -> tuple[str, str, str]:
    """The base's TODO, the green commit's (the same items), and the lap's: reversed, one in ten
    ticked, each ticked item asking to update one of `targets`."""
    items = [
        f"Update to the new API (may change: {targets[number // 10]})" if number % 10 == 0 else f"Item {number}"
        for number in range(n)
    ]
    base = "# TODO\n\n" + "".join(f"- [ ] {item}\n" for item in items)
    lap = "# TODO\n\n" + "".join(
        f"- [{'x' if item.startswith('Update') else ' '}] {item}\n" for item in reversed(items)
    )
    return base, base + "\n", lap


def measure(n: int, reps: int) -> dict[str, float]:
    """Median seconds of each piece at size n."""
    folder = Path(tempfile.mkdtemp(prefix="ralph-bench-scale-"))
    before, now, removed = lap_tests(n)
    changed = [*removed, *(f"src/module_{number}.py" for number in range(n))][: math.ceil(n / 10)]
    base, green, lap = checklists(n, changed)
    xml = junit_report(folder, n)
    outputs = runner_outputs(folder, n)
    found: dict[str, list[float]] = {piece: [] for piece in (*PIECES, *READERS, PLUGIN_WRITES)}
    for _ in range(reps):
        (folder / "report.jsonl").unlink(missing_ok=True)
        report, found_seconds = pytest_report(folder, n)
        seconds = _one_lap(before, now, base, green, lap, report, xml, changed)
        seconds[PLUGIN_WRITES] = found_seconds
        seconds.update(_readers(folder, outputs, n))
        for piece in found:
            found[piece].append(seconds[piece])
    return {piece: median(values) for piece, values in found.items()}


def runner_outputs(folder: Path, n: int) -> dict[str, str]:
    """What each runner prints (or writes) for n tests in n/10 files, 1% of them failing."""
    (folder / "go.mod").write_text("module example.com/m\n")
    for package in range(math.ceil(n / 10)):  # go counts a pass only of a test a _test.go declares
        (folder / f"p{package}").mkdir(exist_ok=True)
        functions = range(package * 10, min(n, package * 10 + 10))
        (folder / f"p{package}" / "x_test.go").write_text(
            "".join(f"func Test{number}(t *testing.T) {{}}\n" for number in functions)
        )
    failing = set(range(0, n, 100))
    go = "".join(
        json.dumps({"Action": action, "Package": f"example.com/m/p{number // 10}", "Test": f"Test{number}"}) + "\n"
        for number in range(n)
        for action in ("run", "fail" if number in failing else "pass")
    )
    libtest = f"     Running unittests src/lib.rs (target/debug/deps/m-0123abcd)\n\nrunning {n} tests\n" + "".join(
        f"test tests::t{number} ... {'FAILED' if number in failing else 'ok'}\n" for number in range(n)
    )
    libtest += f"\ntest result: FAILED. {n - len(failing)} passed; {len(failing)} failed; 0 ignored\n"
    unittest = (
        "".join(
            f"test_{number} (tests.test_{number // 10}.C.test_{number}) ... {'FAIL' if number in failing else 'ok'}\n"
            for number in range(n)
        )
        + f"\n{'-' * 70}\nRan {n} tests in 1.000s\n\nFAILED (failures={len(failing)})\n"
    )
    jest = {
        "testResults": [
            {
                "name": str(folder / f"t{file}.test.js"),
                "status": "passed",
                "assertionResults": [
                    {"ancestorTitles": ["d"], "title": f"t{number}", "status": "passed"}
                    for number in range(file * 10, min(n, file * 10 + 10))
                ],
            }
            for file in range(math.ceil(n / 10))
        ]
    }
    (folder / "jest.json").write_text(json.dumps(jest))
    return {"go": go, "libtest": libtest, "unittest": unittest}


def _readers(folder: Path, outputs: dict[str, str], n: int) -> dict[str, float]:
    try:
        from ralph.verdict import failure_lines, go_test, jest_results, libtest, unittest_results
    except ImportError:  # a ralph from before issue 37
        return dict.fromkeys(READERS, math.nan)
    seconds: dict[str, float] = {}
    for name, read in (("go", go_test.read), ("libtest", libtest.read), ("unittest", unittest_results.read)):
        seconds[name], found = timed(read, outputs[name], folder)
        assert found is not None and found.counts.passed + len(found.failing_ids) >= n, name
    seconds["jest"], found = timed(jest_results.read, [folder / "jest.json"], folder)
    assert found is not None and found.counts.passed == n
    seconds["failure lines"], lifted = timed(failure_lines.lift, outputs["libtest"])
    assert lifted
    return seconds


def _one_lap(
    before: CheckResult,
    now: CheckResult,
    base: str,
    green: str,
    lap: str,
    report: Path,
    xml: Path,
    changed: list[str],
) -> dict[str, float]:
    seconds: dict[str, float] = {}  # and what each found, checked
    seconds["pytest report"], read = timed(pytest_results.read, report)
    seconds["JUnit report"], read_xml = timed(junit.read, [xml])
    assert read is not None and read_xml is not None and read_xml.counts.passed == read_xml.counts.ran
    cached = todo._scanned if hasattr(todo, "_scanned") else todo._parse  # an older ralph's cache
    cached.cache_clear()
    items_base, items_green = todo.parse(base), todo.parse(green)  # read by earlier laps, and kept
    seconds["TODO read"], items_lap = timed(todo.parse, lap)
    seconds["TODO rules"], (problems, ticked) = timed(
        lambda: (guard.todo_problems(items_green, items_lap), todo.newly_ticked(items_green, items_lap))
    )
    assert problems == [] and len(ticked) == len(changed) and len(items_base) == len(items_lap)
    grants = guard.GuardReport(grants=grants_of(ticked))
    seconds["grants"], allowed = timed(lambda: [grants.allows(path) or grants.allows_setup(path) for path in changed])
    assert all(allowed)
    seconds["ratchet"], comparison = timed(ratchet.compare, [before], [now], grants)
    assert comparison.newly_failing and not comparison.unrun, comparison.problems
    assert not any("gone" in problem for problem in comparison.problems), comparison.problems
    seconds["note"], _ = timed(lambda: CheckResult.model_validate_json(now.model_dump_json()))
    seconds["rebase"], rebased = timed(_rebase, green, lap, ticked)
    assert rebased.count("- [x]") == len(ticked)
    return seconds


def _rebase(onto: str, lap: str, ticked: list[str]) -> str:
    """The TODO half of rebase.rebase_lap: the lap's items found with their lines, its ticks put on."""
    todo.sources(lap)
    return todo.combined(onto, ticked, [])


def growth(sizes: list[int], times: list[float]) -> str:
    """k of time ∝ n^k from each size to the next."""
    pairs = itertools.pairwise(zip(sizes, times, strict=True))
    return " / ".join(f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}" for (n1, t1), (n2, t2) in pairs)


def measured(sizes: list[int], reps: int, against: str | None) -> dict[int, dict[str, float]]:
    """Seconds per piece per size: here, or in a process whose ralph is the one in `against`."""
    if against is None:
        return {n: measure(n, reps) for n in sizes}
    command = [sys.executable, __file__, "--sizes", ",".join(map(str, sizes)), "--reps", str(reps), "--json"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([against, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return {int(n): pieces for n, pieces in json.loads(done.stdout).items()}


def report(title: str, results: dict[int, dict[str, float]]) -> str:
    sizes = sorted(results)
    rows = [
        [piece, *(results[n][piece] * 1000 for n in sizes), growth(sizes, [results[n][piece] for n in sizes])]
        for piece in PIECES
    ]
    totals = [sum(results[n][piece] for piece in PIECES) for n in sizes]
    rows.append(["**per lap**", *(total * 1000 for total in totals), growth(sizes, totals)])
    # A check has one source of results: each reader beside the lap's total, not in it.
    rows += [
        [
            f"{piece} ({'a failed check' if piece == 'failure lines' else 'instead of the pytest report'})",
            *(results[n].get(piece, math.nan) * 1000 for n in sizes),
            growth(sizes, [results[n].get(piece, math.nan) for n in sizes]),
        ]
        for piece in READERS
    ]
    rows.append(
        [
            f"{PLUGIN_WRITES} (in the check's pytest session)",
            *(results[n].get(PLUGIN_WRITES, math.nan) * 1000 for n in sizes),
            growth(sizes, [results[n].get(PLUGIN_WRITES, math.nan) for n in sizes]),
        ]
    )
    return f"{title}\n\n" + table(["ms", *(f"{n:,}" for n in sizes), "growth"], [_shown(row) for row in rows])


def _shown(row: list) -> list:
    return [f"{cell:,.1f}" if isinstance(cell, float) else cell for cell in row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="tests and items, comma-separated")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--against", help="a folder holding another ralph package, measured beside this one")
    parser.add_argument("--against-sizes", default="1000,10000")
    parser.add_argument("--json", action="store_true", help="print the seconds as JSON (how --against reads them)")
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    if options.json:
        print(json.dumps(measured(sizes, options.reps, None)))
        return
    print(report("this ralph", measured(sizes, options.reps, None)))
    if options.against:
        against_sizes = [int(size) for size in options.against_sizes.split(",")]
        print()
        print(report(f"ralph from {options.against}", measured(against_sizes, options.reps, options.against)))


if __name__ == "__main__":
    main()
