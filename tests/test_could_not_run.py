"""A check that could not run is never a verdict: not at the baseline, not in a lap, not in doctor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import lap_notes, ralph, snapshot

PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
CALC = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    raise NotImplementedError\n",
    "tests/test_calc.py": "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n",
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    "TODO.md": "- [ ] Make test_sub pass\n",
    ".gitignore": ".venv/\n",
}
TICK = "t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', '- [x]'))\n"


def repo_with(tmp_path: Path, checks: list, files: dict | None = None, setup=(), script: str = "", **more) -> Path:
    config = {
        "goal": "g",
        "agent": python_agent(tmp_path / "agent.py", "import os, pathlib\n" + script),
        "checks": checks,
        "setup": list(setup),
        "limits": {"max_laps": 1},
        **more,
    }
    return make_repo(tmp_path / "repo", {**CALC, **(files or {})}, config=config)


def one_line_error(result) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


# Each case: a check that cannot run on the base commit, and the words the one line must carry.
BASELINE_CASES = [
    pytest.param(
        [".venv/bin/python -m pytest -q"],
        {},
        ["python3 -m venv --without-pip .venv"],
        ["the test runner is missing: No module named pytest", "`setup:`", "pip only warns"],
        id="no-pytest-in-the-venv",
    ),
    pytest.param(["no-such-runner --all"], {}, [], ["not found (exit 127)", "no-such-runner"], id="exit-127"),
    pytest.param(
        ["./run-tests"], {"run-tests": "#!/bin/sh\necho hi\n"}, [], ["not executable (exit 126)"], id="exit-126"
    ),
    pytest.param(
        [f"{PYTEST} --no-such-option"],
        {},
        [],
        ["pytest stopped before running tests", "unrecognized arguments: --no-such-option"],
        id="pytest-usage-error",
    ),
    pytest.param(
        [PYTEST],
        {"conftest.py": "def pytest_sessionstart(session):\n    raise RuntimeError('broken hook')\n"},
        [],
        ["pytest stopped before running tests", "RuntimeError: broken hook"],
        id="pytest-internal-error",
    ),
    pytest.param(
        [PYTEST],
        # After collection: the tests it collected never ran, and are no red start to beat.
        {"conftest.py": "def pytest_runtest_protocol(item):\n    raise RuntimeError('broken runner')\n"},
        [],
        ["pytest stopped on an internal error", "RuntimeError: broken runner"],
        id="pytest-internal-error-after-collection",
    ),
    pytest.param(
        [PYTEST],
        {"conftest.py": "import no_such_module\n"},
        [],
        ["pytest stopped before running tests", "No module named 'no_such_module'"],
        id="conftest-that-cannot-import",
    ),
    pytest.param([f"{PYTEST} tests/none_here"], {}, [], ["pytest stopped before running tests"], id="no-such-path"),
    pytest.param([f"{PYTEST} -k nothing_matches"], {}, [], ["pytest collected no tests"], id="nothing-collected"),
    pytest.param(
        [f"PYTHONPATH=. {PYTEST}"],
        {},
        [],
        ["could not import ralph's plugin", "PYTHONPATH=src:$PYTHONPATH"],
        id="plugin-off-path",
    ),
    pytest.param(
        [{"run": "true", "junit": "reports/*.xml"}],
        {},
        [],
        ["it wrote no JUnit report at `reports/*.xml`"],
        id="no-junit",
    ),
    pytest.param(
        [{"run": "mkdir -p reports && echo '<testsuites>' > reports/a.xml", "junit": "reports/*.xml"}],
        {},
        [],
        ["its JUnit report cannot be read: reports/a.xml"],
        id="junit-unreadable",
    ),
    pytest.param(
        ["make test"],
        {"Makefile": "test:\n\tno-such-runner\n"},
        [],
        ["a program it runs is missing", "Error 127"],
        id="make-runs-a-missing-program",
    ),
    pytest.param(
        ["make tset"],
        {"Makefile": "test:\n\ttrue\n"},
        [],
        [
            "`tset` was not found where the check runs (misspelled, or not installed): make: *** No rule to make target",
            "check the name in ralph.yaml's command",
        ],
        id="make-target-misspelled",
    ),
    pytest.param(
        ["node tests/run.js"],
        {},
        [],
        ["was not found where the check runs (misspelled, or not installed): Error: Cannot find module '/"],
        id="node-entry-script-missing",
    ),
]


@pytest.mark.parametrize("checks, files, setup, words", BASELINE_CASES)
def test_a_check_that_cannot_run_on_the_base_commit_stops_the_run_before_lap_1(
    tmp_path: Path, checks, files, setup, words
):
    repo = repo_with(tmp_path, checks, files, setup)
    if "run-tests" in files:
        git(repo, "update-index", "--chmod=-x", "run-tests")
    before = snapshot(repo)
    line = one_line_error(ralph(repo, "run", "--name", "r"))
    command = checks[0]["run"] if isinstance(checks[0], dict) else checks[0]
    assert f"the check `{command}` could not run on the base commit: " in line
    for word in words:
        assert word in line
    assert "baseline/check-1.log" in line
    assert snapshot(repo) == before
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""  # nothing recorded as green


def test_a_module_that_fails_to_import_is_a_red_start_and_the_rest_is_still_judged(tmp_path: Path):
    # The job: tests for code that does not exist yet. pytest ran and reported the module, and
    # ran the other modules too (it would stop at collection and run nothing): the lap that
    # breaks `add` is red for it.
    repo = repo_with(
        tmp_path,
        [PYTEST],
        {"tests/test_new.py": "from newmod import f\n\ndef test_f():\n    assert f()\n"},
        script="c = pathlib.Path('calc.py'); c.write_text(c.read_text().replace('a + b', '0'))\n" + TICK,
    )
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 3, result.stderr  # max_laps: the run ran
    baseline = json.loads(git(repo, "cat-file", "blob", "refs/ralph/r/run"))["baseline"][0]
    assert baseline["could_not_run"] == "" and "tests/test_new.py::<collection>" in baseline["tests"]["failing_ids"]
    assert baseline["tests"]["passed_ids"] == ["tests/test_calc.py::test_add"]
    assert (
        "1 test file(s) fail to import on the base commit (tests/test_new.py: No module named 'newmod')"
        in result.stderr
    )
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red" and "tests that passed now fail: tests/test_calc.py::test_add" in lap["reason"]


def test_a_lap_that_breaks_how_its_check_runs_is_red_and_the_next_lap_is_told(tmp_path: Path):
    # The check is a script of the repository; the lap deletes it. Its cause is in the lap's own
    # commit: a red lap, whose reason the next lap reads, never green against it.
    repo = repo_with(
        tmp_path,
        ["sh ./run-tests.sh"],
        {"run-tests.sh": f"exec {PYTEST}\n"},
        script="os.remove('run-tests.sh')\n"
        "pathlib.Path('calc.py').write_text(pathlib.Path('calc.py').read_text().replace("
        "'raise NotImplementedError', 'return a - b'))\n" + TICK,
        limits={"max_laps": 2, "stagnation": 5},
    )
    result = ralph(repo, "run", "--name", "r")
    laps = lap_notes(repo, "r")
    assert [lap["status"] for lap in laps] == ["red", "red"], result.stdout
    assert laps[0]["reason"].startswith("check could not run: `sh ./run-tests.sh`: ")
    assert laps[0]["done"] is False
    assert git(repo, "rev-parse", "ralph/r") == git(repo, "rev-parse", "refs/ralph/r/base")
    assert "check could not run: `sh ./run-tests.sh`" in (repo / ".git/ralph/r/lap-2/prompt.md").read_text()
    # Its ticks are not the run's: status counts the TODO on the green line.
    assert "TODO        0 done, 1 open (on the green line)" in ralph(repo, "status").stdout


def test_a_check_red_at_the_base_without_per_test_results_is_refused_unless_marked_expect_red(tmp_path: Path):
    refused = repo_with(tmp_path / "plain", ["test -f DONE", PYTEST], limits={"max_laps": 1})
    error = one_line_error(ralph(refused, "run", "--name", "r"))
    assert "`test -f DONE` fails on the base commit and gives no per-test results: it could judge no lap" in error
    assert "mark it `expect_red: true`" in error and "check-1.log" in error
    assert git(refused, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""  # nothing started
    repo = repo_with(
        tmp_path,
        [{"run": "test -f DONE", "expect_red": True}, PYTEST],
        script="pathlib.Path('notes.txt').write_text('worked')\n",
        limits={"max_laps": 1},
    )
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 3
    out = result.stdout + result.stderr
    assert "`test -f DONE` fails on the base commit (expect_red): it judges no lap" in out
    assert "`" + PYTEST + "` fails on the base commit and gives no" not in out  # pytest gives per-test results
    assert "left: `test -f DONE` fails (since the base)" in out
    assert "left: 1 TODO item(s) open: Make test_sub pass" in out
    status = ralph(repo, "status")
    assert "left        `test -f DONE` fails (since the base)" in status.stdout
    land = ralph(repo, "land")
    assert land.returncode == 1
    assert "is not done: `test -f DONE` fails (since the base)" in land.stderr and "--partial" in land.stderr


def test_doctor_runs_setup_and_each_check_once_and_says_which_could_not_run(tmp_path: Path):
    repo = repo_with(
        tmp_path,
        [PYTEST, ".venv/bin/python -m pytest -q", "true"],
        setup=["python3 -m venv --without-pip .venv"],
    )
    before = snapshot(repo)
    result = ralph(repo, "doctor")
    out = result.stdout
    assert result.returncode == 1, out
    assert f"`{PYTEST}` ran, fails (exit 1); per-test results: 1 passing, 1 failing" in out
    assert "`.venv/bin/python -m pytest -q` could not run: the test runner is missing: No module named pytest" in out
    assert "`true` ran, passes; no per-test results (judged by its exit code alone: declare the JUnit" in out
    assert "first failure: tests/test_calc.py::test_sub" in out
    assert snapshot(repo) == before
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""


def test_what_tests_print_never_makes_a_check_that_ran_one_that_could_not(tmp_path: Path):
    # A red start whose failing tests say "not found", "Permission denied", or run a program the
    # job has not built yet: the tests ran, and the run must start (the red team's false stops).
    printing = (
        "import subprocess\n\ndef test_lookup():\n    raise LookupError('not found')\n\n"
        "def test_cli():\n    assert subprocess.run('mytool --version', shell=True).returncode == 0\n\n"
        "def test_perm():\n    assert False, '403: Permission denied'\n\n"
        "def test_says():\n    print('command not found')\n    assert False\n"
    )
    said = "echo 'command not found'; echo 'E: No module named pytest_foo'; exit 1"
    repo = repo_with(tmp_path, [PYTEST, said], {"tests/test_printing.py": printing})
    out = ralph(repo, "doctor").stdout
    assert f"`{PYTEST}` ran, fails (exit 1); per-test results: 1 passing, 5 failing" in out, out
    assert f"`{said}` ran, fails (exit 1); no per-test results" in out, out


def test_a_suite_that_printed_its_summary_ran_whatever_the_code_under_test_printed(tmp_path: Path):
    # The code under test runs a program that is not installed; the suite ran and said so in its
    # closing line. Not "could not run": a red check with no per-test results.
    suite = "echo 'sh: 1: gojq: not found'\necho 'not ok 1 lookup'\necho '1 test, 1 failed'\nexit 1\n"
    repo = repo_with(tmp_path, ["sh run-tests.sh"], {"run-tests.sh": suite})
    out = ralph(repo, "doctor").stdout
    assert "`sh run-tests.sh` ran, fails (exit 1)" in out, out


def test_doctor_says_a_runner_misspelled_behind_uv_could_not_run(tmp_path: Path):
    if shutil.which("uv") is None:
        pytest.skip("uv is not installed here")
    repo = repo_with(tmp_path, ["uv run --no-project pytets -q"])
    result = ralph(repo, "doctor")
    assert result.returncode == 1, result.stdout
    assert (
        "`uv run --no-project pytets -q` could not run: `pytets` was not found where the check runs "
        "(misspelled, or not installed): error: Failed to spawn: pytets" in result.stdout
    ), result.stdout


def test_doctor_fails_where_a_run_would_refuse_the_check_or_the_agent_cannot_start(tmp_path: Path):
    red = repo_with(tmp_path / "red", ["test -f DONE"])
    result = ralph(red, "doctor")
    assert result.returncode == 1, result.stdout
    assert "`test -f DONE` ran, fails (exit 1); no per-test results" in result.stdout
    assert "a run refuses it: it gives no per-test results (or mark it `expect_red: true`)" in result.stdout
    marked = repo_with(tmp_path / "marked", [{"run": "test -f DONE", "expect_red": True}])
    result = ralph(marked, "doctor")
    assert "marked expect_red: it judges no lap" in result.stdout
    assert result.returncode == (0 if "sandbox      works" in result.stdout else 1), result.stdout
    preset = make_repo(
        tmp_path / "preset",
        CALC,
        config={"goal": "g", "agent": {"kind": "command", "preset": "opencode"}, "checks": ["true"]},
    )
    env = {"PATH": f"{Path(PY).parent}:/usr/bin:/bin"}  # no opencode on it
    result = ralph(preset, "doctor", env=env)
    assert result.returncode == 1, result.stdout
    assert "agent        cannot start: `opencode` (preset opencode) is not on PATH" in result.stdout
