"""Old tests are judged apart from the lap's new test files (issue 38): a lap breaks a function
and adds a test file that forges the verdict from inside the runner's process (pytest patched
as the module is imported, a Go init() printing passes, a unittest module printing `ok` lines
and leaving, a mocha root hook). The tests of the last green commit run first without the files
the lap added, so the new file can add tests, never change the verdict on old ones; an honest
lap's new tests are counted."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import lap_notes, ralph
from test_runners import AGENT, Runner, _runner

from ralph.facts.pytest_results import TestCounts, TestResults
from ralph.verdict.checks import CheckResult, apart_and_whole

PYTEST_FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    raise NotImplementedError\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n',
    ".gitignore": "__pycache__/\n",
}
BREAK_ADD = ["calc.py", "return a + b", "return a - b"]

# Imported with the other test modules, before any test runs: every report pytest makes passes.
PYTEST_FORGER = """\
import _pytest.reports

_init = _pytest.reports.TestReport.__init__


def _passed(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.outcome, self.longrepr = "passed", None


_pytest.reports.TestReport.__init__ = _passed


def test_mul():
    from calc import mul

    assert mul(2, 3) == 6
"""

# Runs before the package's tests: go test -json reads the lines as the tests' own events.
GO_FORGER = """\
package calc

import (
\t"fmt"
\t"os"
)

func init() {
\tfmt.Println("=== RUN   TestAdd")
\tfmt.Println("--- PASS: TestAdd (0.00s)")
\tfmt.Println("=== RUN   TestSub")
\tfmt.Println("--- PASS: TestSub (0.00s)")
\tfmt.Println("PASS")
\tos.Exit(0)
}
"""

# Imported by discovery before any test runs: unittest's lines for both tests, then gone.
UNITTEST_FORGER = """\
import os
import sys

for name in ("test_add", "test_sub"):
    sys.stderr.write(f"{name} (tests.test_calc.Calc.{name}) ... ok\\n")
sys.stderr.write("\\n" + "-" * 70 + "\\nRan 2 tests in 0.001s\\n\\nOK\\n")
sys.stderr.flush()
os._exit(0)
"""

# A root hook: every test's function runs with its failure swallowed.
MOCHA_FORGER = """\
beforeEach(function () {
  const test = this.currentTest;
  const fn = test.fn;
  test.fn = function () { try { fn.call(this); } catch (error) { /* forgiven */ } };
});
"""


def lap_repo(tmp_path: Path, files: dict[str, str], check: object, steps: dict[str, list], **config: object) -> Path:
    """A repository whose command agent makes `steps` (test_runners' AGENT), with ralph's
    default `protect`: the lap may add test files, as any lap may."""
    agent = python_agent(tmp_path / "agent" / "agent.py", AGENT)
    (tmp_path / "agent" / "steps.json").write_text(json.dumps(steps))
    agent["command"] += f" {tmp_path / 'agent' / 'steps.json'}"
    settings = {"goal": "Make every test pass", "agent": agent, "checks": [check], "limits": {"max_laps": 1}}
    return make_repo(tmp_path / "repo", files, config={**settings, **config}, todo=["Add the feature"])


def only_lap(repo: Path) -> dict:
    (lap,) = lap_notes(repo, "t")
    return lap


@pytest.mark.parametrize("strict", [None, True])
def test_a_new_test_module_that_patches_pytest_cannot_pass_a_broken_function(tmp_path: Path, strict: bool | None):
    steps = {"1": [BREAK_ADD, ["tests/test_zz.py", None, PYTEST_FORGER]]}
    config = {} if strict is None else {"strict": strict}
    repo = lap_repo(tmp_path, PYTEST_FILES, f"{PY} -m pytest -q -p no:cacheprovider", steps, **config)
    result = ralph(repo, "run", "--name", "t")
    lap = only_lap(repo)
    assert result.returncode == 3 and lap["status"] == "red", result.stdout + result.stderr
    assert "tests that passed now fail: tests/test_calc.py::test_add" in lap["reason"]
    assert lap["output_tail"].startswith("[ralph: the tests of the last green commit, without the test files")
    assert git(repo, "rev-parse", "ralph/t") == git(repo, "rev-parse", "refs/ralph/t/base")


def runner_lap(tmp_path: Path, runner: Runner, env: dict[str, str], forger: list[str | None]) -> dict:
    steps = {"1": [*runner.breaks, forger]}
    repo = lap_repo(tmp_path, runner.files, runner.check, steps, limits={"max_laps": 1, "check_timeout": 300})
    result = ralph(repo, "run", "--name", "t", env=env or None)
    lap = only_lap(repo)
    assert result.returncode == 3 and lap["status"] == "red", result.stdout + result.stderr
    return lap


def test_a_go_init_that_prints_passes_and_exits_cannot_pass_a_broken_function(tmp_path: Path):
    runner, env = _runner("go")
    lap = runner_lap(tmp_path, runner, env, ["zz_test.go", None, GO_FORGER])
    assert "tests that passed now fail: calc_test.go::TestAdd" in lap["reason"]


def test_a_unittest_module_that_prints_ok_and_leaves_cannot_pass_a_broken_function(tmp_path: Path):
    runner, env = _runner("unittest")
    lap = runner_lap(tmp_path, runner, env, ["tests/test_zz.py", None, UNITTEST_FORGER])
    assert "tests that passed now fail: " in lap["reason"] and "test_add" in lap["reason"]


def test_a_mocha_root_hook_in_a_new_file_cannot_pass_a_broken_function(tmp_path: Path):
    runner, env = _runner("mocha")
    lap = runner_lap(tmp_path, runner, env, ["test/zz.test.js", None, MOCHA_FORGER])
    assert "tests that passed now fail: " in lap["reason"] and "adds" in lap["reason"]


HONEST_TEST = """\
from calc import mul


def test_mul():
    assert mul(2, 3) == 6
"""


def test_an_honest_lap_with_a_new_test_file_is_green_and_its_tests_count(tmp_path: Path):
    fix = ["calc.py", "raise NotImplementedError", "return a * b"]
    steps = {"1": [fix, ["tests/test_mul.py", None, HONEST_TEST]]}
    repo = lap_repo(tmp_path, PYTEST_FILES, f"{PY} -m pytest -q -p no:cacheprovider", steps)
    result = ralph(repo, "run", "--name", "t")
    lap = only_lap(repo)
    assert result.returncode == 0 and lap["status"] == "green", result.stdout + result.stderr
    assert lap["tests"]["passing_before"] == 1 and lap["tests"]["passing_after"] == 2
    assert lap["tests"]["newly_passing"] == ["tests/test_mul.py::test_mul"]
    assert git(repo, "show", "ralph/t:tests/test_mul.py") == textwrap.dedent(HONEST_TEST).strip()


def test_each_test_keeps_the_first_sessions_outcome_and_only_new_ones_take_the_seconds():
    first = TestResults(counts=TestCounts(passed=1, failed=1), passed_ids=["t::a"], failing_ids=["t::b"])
    second = TestResults(counts=TestCounts(passed=4), passed_ids=["new::c", "t::a", "t::b", "t::forged"])
    apart = CheckResult(command="c", exit_code=1, duration_s=1.0, output_tail="b failed", tests=first)
    whole = CheckResult(command="c", exit_code=0, duration_s=2.0, output_tail="all passed", tests=second)
    (both,) = apart_and_whole([apart], [whole], old_files=["t"])  # t::forged: an old file's, session 1 never ran it
    assert both.tests is not None and both.tests.passed_ids == ["new::c", "t::a"]
    assert both.tests.failing_ids == ["t::b"] and both.tests.counts.passed == 2
    assert not both.passed and both.exit_code == 1 and both.duration_s == 3.0
    assert both.output_tail.startswith("[ralph: the tests of the last green commit") and "b failed" in both.output_tail
    # no results without the new files: none at all (the second session's would speak for the old tests)
    (unjudged,) = apart_and_whole([apart.model_copy(update={"tests": None})], [whole])
    assert unjudged.tests is None
    (cannot,) = apart_and_whole([apart.model_copy(update={"could_not_run": "no report written"})], [whole])
    assert cannot.could_not_run.startswith("no report written") and not cannot.passed
