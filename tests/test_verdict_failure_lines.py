"""The failure lines lifted out of a check's whole output, read from what real runners printed
(tests/fixtures/failure_lines/README.md says how each was made)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from ralph.verdict.failure_lines import HEADING, LIFT_CHARS, LINE_CHARS, first, lift

FIXTURES = Path(__file__).parent / "fixtures" / "failure_lines"


def captured(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# Each runner's capture: lines the lift must show (in this order), and lines it must leave out.
SHOWN = {
    "node-test-tap.txt": (
        [
            "not ok 2 - multiplies",
            "  location: '/tmp/fl/node/math.test.js:4:1'",
            "  error: Expected values to be strictly equal: 6 !== 7",
            "not ok 3 - divides",
            "  error: 'division by zero'",
        ],
        ["ok 1 - adds", "duration_ms", "# fail 2", "stack"],
    ),
    "node-test-spec.txt": (
        [
            "✖ multiplies (26.56762ms)",
            "  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:",
            "  6 !== 7",
            "✖ divides (0.212181ms)",
            "  Error: division by zero",
        ],
        ["✔ adds", "ℹ fail 2"],
    ),
    "go-test.txt": (
        [
            "broken/b.go:3:23: undefined: undefined",
            "--- FAIL: TestMul (0.00s)",
            "    calc_test.go:7: Mul(2, 3) = 5, want 6",
            "    --- FAIL: TestDiv/by_zero (0.00s)",
            "panic: runtime error: integer divide by zero [recovered]",
            "FAIL\texample.com/calc/broken [build failed]",
        ],
        ["goroutine 9", "testing.tRunner"],
    ),
    "cargo-test.txt": (
        [
            "test tests::multiplies ... FAILED",
            "test tests::panics ... FAILED",
            "thread 'tests::multiplies' (12822) panicked at src/lib.rs:9:23:",
            "assertion `left == right` failed",
            "thread 'tests::panics' (12824) panicked at src/lib.rs:11:54:",
            "index out of bounds: the len is 0 but the index is 3",
        ],
        ["test tests::adds ... ok", "ignored", "test result:"],
    ),
    "cargo-build.txt": (
        ["error[E0425]: cannot find value `c` in this scope", " --> src/lib.rs:1:41"],
        ["For more information"],
    ),
    "unittest.txt": (
        [
            "ERROR: test_broken_import (unittest.loader._FailedTest.test_broken_import)",
            "ModuleNotFoundError: No module named 'no_such_module'",
            "ERROR: test_div (test_calc.TestCalc.test_div)",
            '  File "/tmp/fl/py/test_calc.py", line 16, in test_div',
            "ZeroDivisionError: division by zero",
            "FAIL: test_mul (test_calc.TestCalc.test_mul)",
            "AssertionError: 5 != 6",
        ],
        ["Ran 4 tests", "FAILED (failures=1, errors=2)", "-----", "Traceback"],
    ),
    "pytest.txt": (
        [
            "FAILED test_calc.py::TestCalc::test_div - ZeroDivisionError: division by zero",
            "FAILED test_calc.py::TestCalc::test_mul - AssertionError: 5 != 6",
        ],
        ["2 failed, 1 passed", "test session starts"],
    ),
    "jest.txt": (
        [
            "FAIL test/calc.test.js",
            "  ● calc › multiplies",
            "    assert.strictEqual(received, expected)",
            "  ● calc › divides",
            "    division by zero",
            "  ● Test suite failed to run",
            "    Cannot find module './no-such-module' from 'test/broken.test.js'",
        ],
        ["Tests:", "Test Suites:", "\x1b[", "Ran all test suites"],
    ),
    "mocha.txt": (
        [
            "  1) calc",
            "       multiplies:",
            "      AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:",
            "  2) calc",
            "     Error: division by zero",
            "      at Context.<anonymous> (test/calc.test.js:6:31)",
        ],
        ["✔ adds", "1 passing", "2 failing"],
    ),
}


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_each_runners_failures_are_lifted_and_its_counts_left_out(name: str):
    lifted = lift(captured(name))
    shown, left_out = SHOWN[name]
    lines = lifted.splitlines()
    assert lines[0] == HEADING and lifted.endswith("\n") and len(lifted) <= LIFT_CHARS
    at = [lines.index(line) for line in shown]  # each there, as the runner printed it
    assert at == sorted(at), lifted
    assert not [line for line in lines if any(noise in line for noise in left_out)], lifted


def test_a_failure_printed_twice_is_shown_once():
    lifted = lift(captured("node-test-spec.txt"))  # the spec reporter repeats the failures at the end
    assert lifted.count("✖ multiplies (26.56762ms)") == 1 and lifted.count("6 !== 7") == 1


def test_npm_tests_failure_far_above_the_tail_is_lifted():
    """`npm test` over node's runner: the one failure is the first test's, long before the
    tail, which holds only passing tests and the counts."""
    output = captured("npm-test-long.txt")
    assert "not ok" not in output[-4000:]
    assert lift(output).splitlines() == [
        HEADING,
        "not ok 1 - parses the header",
        "  location: '/home/dev/big/a.test.js:3:1'",
        "  error: Expected values to be strictly deep-equal: + actual - expected { + a: 1 - a: 2 }",
    ]


@pytest.mark.parametrize(
    "output",
    [
        captured("npm-test-exit.txt"),  # a failing script that printed no failure line
        "",
        "\n" * 1000,
        "ok 1 - adds\n1..1\n# tests 1\n# fail 0\n",
        "not ok 2 - later # TODO not written yet\nnot ok 3 - flaky # skip on CI\n",
        "FAILED (failures=1)\ntest result: FAILED. 1 passed; 1 failed\n2 failing\nFAIL\n",
    ],
)
def test_no_failure_line_lifts_nothing(output: str):
    assert lift(output) == ""


def test_many_failures_are_capped_and_counted():
    output = "".join(f"--- FAIL: TestCase{n} (0.00s)\n    case_test.go:{n}: got {n}, want 0\n" for n in range(500))
    lifted = lift(output)
    assert len(lifted) <= LIFT_CHARS and lifted.startswith(HEADING)
    shown = lifted.count("--- FAIL:")
    assert 20 < shown < 500 and "    case_test.go:0: got 0, want 0" in lifted
    assert lifted.endswith(f"[ralph: {500 - shown} more failure line(s) in the output, not shown]\n")
    assert len(lift(output, limit=300)) <= 300


def test_colours_carriage_returns_and_long_lines_are_made_plain():
    output = (
        "\x1b[1m\x1b[31m  ● \x1b[22m\x1b[1mcalc › mul\x1b[39m\x1b[22m\r\n\r\n"
        "    expected 6\r\n\r\n"
        "progress 10%\rprogress 100%\r--- FAIL: TestLong (0.00s)\n"
        "    long_test.go:1: " + "x" * 100_000 + "\n"
        "\x00not ok 1 - nul\x00led\n"
    )
    lines = lift(output).splitlines()
    assert lines[1:3] == ["  ● calc › mul", "    expected 6"]
    assert lines[3] == "--- FAIL: TestLong (0.00s)"
    assert lines[4].startswith("    long_test.go:1: xxx") and len(lines[4]) == LINE_CHARS and lines[4][-1] == "…"
    assert lines[5] == "not ok 1 - nulled"


def test_any_input_gives_a_text_never_an_error():
    randomly = random.Random(37)
    pieces = [
        "not ok", "--- FAIL", "FAIL\t", "FAILED ", " ... FAILED", "panicked at", "✕", "●", "  1) ",
        "Error: ", "error[E1]: ", "x.go:1: ", "\n", "\r", "\r\n", "\x1b[", "\x1b]", "\x00", "\udc80",
        "  error: |-", "    ", "...", "#", "|", "\u2028", "é", "\t",
    ]  # fmt: skip
    for _ in range(300):
        output = "".join(randomly.choice(pieces) for _ in range(randomly.randrange(60)))
        limit = randomly.randrange(-5, 3000)
        lifted = lift(output, limit=limit)
        assert isinstance(lifted, str) and len(lifted) <= max(limit, 0)


@pytest.mark.parametrize(
    "output",
    [
        "\n" * 1_000_000,  # blank lines: a pattern free to cross them would rescan each run
        " " * 1_000_000,  # one line of spaces
        "x ... " * 200_000,  # libtest's ` ... ` over and over on one line
        "panicked a" * 100_000,
        "not ok 1 - x\n  error: |-\n" * 40_000,  # TAP blocks that never end
        "--- FAIL: T (0.00s)\n" * 50_000,  # a failure line on every line
        "  1) " * 200_000,
    ],
)
def test_the_time_grows_with_the_output_not_faster(output: str):
    began = time.monotonic()
    lift(output)
    assert time.monotonic() - began < 5  # 1 MB: a quarter of a second on a quiet machine, hours if quadratic


def test_the_first_failure_line_alone_for_a_message_of_one_line():
    assert first(captured("npm-test-long.txt")) == "not ok 1 - parses the header"
    assert first(captured("go-test.txt")) == "broken/b.go:3:23: undefined: undefined"
    assert first(captured("jest.txt")) == "FAIL test/calc.test.js"
    assert first("not ok 1 - later # TODO\n\x1b[31m  ✕ adds (3 ms)\x1b[0m\n") == "✕ adds (3 ms)"
    assert first(captured("npm-test-exit.txt")) == "" and first("") == ""
