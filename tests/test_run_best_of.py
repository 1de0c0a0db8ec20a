"""`ralph run --best-of N`: N candidate laps on one item from one green commit, side by side;
the best green one lands, the others stay as lap refs for review, and only the winner counts."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace

from helpers.repos import PY, git, make_repo, needs_bwrap, python_agent
from helpers.running import lap_notes, ralph, ralph_workspaces

from ralph.facts.pytest_results import TestCounts, TestResults
from ralph.records import ledger
from ralph.run import best_of
from ralph.verdict.checks import CheckResult

# What each lap does, by its number (RALPH_LAP), to calc.py; every lap ticks its item.
AGENT = r"""
import json, os, pathlib, time
lap, slot = os.environ["RALPH_LAP"], os.environ["RALPH_SLOT"]
prompt = pathlib.Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
rivals = "told of its rivals" if "laps try this item at the same time" in prompt and "## Slot" not in prompt else ""
print("lap", lap, "slot", slot, "item", os.environ["RALPH_ITEMS"], "told red" if "was red" in prompt else "", rivals, flush=True)
calc = pathlib.Path("calc.py")
code = calc.read_text()
for action in json.loads(PLAN).get(lap, []):
    if action == "sleep":
        time.sleep(60)
    elif action == "break":
        code = code.replace("return a + b", "return a - b")
    elif action == "pad":  # tests of its own, which pass: they must not make it win
        pathlib.Path("tests/test_padding.py").write_text("".join(f"def test_{n}():\n    pass\n\n\n" for n in range(5)))
    elif action == "comment":
        code = "# A long comment that makes this lap's diff the larger one.\n" * 5 + code
    else:
        code = code.replace(f"def {action}(a, b):\n    raise NotImplementedError", f"def {action}(a, b):\n    return a {'*' if action == 'mul' else '-'} b")
calc.write_text(code)
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""
CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    raise NotImplementedError\n"
TESTS = "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


def calc_repo(tmp_path: Path, plan: dict[str, list[str]], sub: bool = False, **limits: object) -> Path:
    """calc.py with mul (and `sub`) to write, a pytest check, one TODO item; the agent does `plan`."""
    calc, tests = CALC, TESTS
    if sub:
        calc += "\n\ndef sub(a, b):\n    raise NotImplementedError\n"
        tests = tests.replace("add, mul", "add, mul, sub") + "\n\ndef test_sub():\n    assert sub(3, 2) == 1\n"
    config = {
        "goal": "Make every test pass",
        "agent": python_agent(tmp_path / "agent.py", AGENT.replace("PLAN", repr(json.dumps(plan)))),
        "checks": [f"{PY} -m pytest -q -p no:cacheprovider"],
        "limits": {"max_laps": 6, **limits},
    }
    files = {"calc.py": calc, "tests/test_calc.py": tests, "TODO.md": "# TODO\n- [ ] Make the tests pass\n"}
    return make_repo(tmp_path / "repo", files, config=config, progress="# Progress\n")


@needs_bwrap
def test_the_candidate_that_makes_the_most_tests_pass_lands_and_the_others_stay_for_review(tmp_path: Path):
    repo = calc_repo(tmp_path, {"1": ["mul", "pad"], "2": ["mul", "sub"], "3": ["mul", "sub", "break"]}, sub=True)
    result = ralph(repo, "run", "--name", "b", "--best-of", "3", "--events", str(tmp_path / "events.jsonl"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "lap 2 won best of 3: +2 tests (lap 1: +1); laps 1, 3 kept for review" in output
    assert output.count("told of its rivals") == 3  # the candidate's prompt: its rivals, no slot section
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    (decided,) = [event for event in events if event["type"] == "round_ended"]
    assert (decided["of"], decided["laps"], decided["chosen"]) == (3, [1, 2, 3], 2)
    assert decided["why"] == "+2 tests (lap 1: +1)"
    assert "slot 1 │" in output and "slot 3 │" in output
    # The green tip is the winner's commit, from the commit every candidate started from.
    assert git(repo, "rev-parse", "ralph/b") == git(repo, "rev-parse", "refs/ralph/b/laps/2")
    base = git(repo, "rev-parse", "refs/ralph/b/base")
    first, second, third = lap_notes(repo, "b")
    assert {first["parent"], second["parent"], third["parent"]} == {base}
    assert [lap["status"] for lap in (first, second, third)] == ["green", "green", "red"]
    assert second["best_of"] == {"first_lap": 1, "of": 3, "chosen": True, "progress": True, "done": True}
    assert (second["progress"], second["done"]) == (True, True)
    assert second["reason"].startswith("won best of 3: +2 tests (lap 1: +1) — ")
    # The green loser is kept, counts for nothing, and says which lap won.
    assert first["best_of"] == {"first_lap": 1, "of": 3, "chosen": False, "progress": True, "done": False}
    assert (first["progress"], first["done"]) == (False, False)
    assert first["reason"].startswith("not chosen: lap 2 won best of 3")
    assert third["best_of"]["chosen"] is False and third["items"] == ["Make the tests pass"]
    assert {lap["slot"] for lap in (first, second, third)} == {1, 2, 3}
    assert "3 (slot 3)" in ralph(repo, "log", "--run", "b").stdout
    assert "not chosen: lap 2 won best of 3" in ralph(repo, "show", "1", "--run", "b").stdout
    assert "a - b" in git(repo, "show", "refs/ralph/b/laps/3:calc.py")  # the red one, reviewable
    state = ledger.load(repo, "b")
    done = state.done_record() if state else None
    assert done is not None and done.lap == 2  # the winner ended the run, not a loser
    assert state is not None and state.laps_without_progress() == 0  # the round was the winner's progress
    assert json.loads(ralph(repo, "status", "--run", "b", "--json").stdout)["green_laps"] == 1  # lap 1 lost
    assert ledger.audit(repo, "b") == [] and ralph_workspaces(repo) == []
    assert git(repo, "status", "--porcelain") == ""


@needs_bwrap
def test_a_round_with_no_green_candidate_lands_nothing_and_a_tie_goes_to_the_smaller_diff(tmp_path: Path):
    plan = {"1": ["break"], "2": ["mul", "break"], "3": ["mul", "comment"], "4": ["mul"]}
    repo = calc_repo(tmp_path, plan)
    result = ralph(repo, "run", "--name", "b", "--best-of", "2")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "best of 2: no candidate was green; the next round is told why" in output
    assert "lap 4 won best of 2: the smallest diff, 4 lines (lap 3: 9); lap 3 kept for review" in output
    notes = lap_notes(repo, "b")
    assert [lap["status"] for lap in notes] == ["red", "red", "green", "green"]
    assert {lap["parent"] for lap in notes} == {git(repo, "rev-parse", "refs/ralph/b/base")}  # nothing moved in between
    assert [lap["best_of"]["first_lap"] for lap in notes] == [1, 1, 3, 3]
    assert [lap["best_of"]["chosen"] for lap in notes] == [False, False, False, True]
    assert git(repo, "rev-parse", "ralph/b") == git(repo, "rev-parse", "refs/ralph/b/laps/4")
    for lap in (3, 4):  # the second round's candidates were told why the first one was red
        assert "told red" in (repo / ".git" / "ralph" / "b" / f"lap-{lap}" / "agent.log").read_text()
    assert ledger.audit(repo, "b") == []


@needs_bwrap
def test_ctrl_c_during_a_round_stops_its_candidates_lands_nothing_and_the_same_command_resumes(tmp_path: Path):
    repo = calc_repo(tmp_path, {"1": ["sleep"], "2": ["mul"]})
    command = [PY, "-m", "ralph", "run", "--name", "b", "--best-of", "2"]
    run = subprocess.Popen(command, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert run.stdout is not None
    seen = ""
    while not ("lap 1 slot 1 item" in seen and "lap 2 green" in seen):  # one in its agent, one done and green
        line = run.stdout.readline().decode()
        assert line, seen  # (the process ended first)
        seen += line
    run.send_signal(signal.SIGINT)
    output = seen + run.communicate(timeout=90)[0].decode()
    assert run.returncode == 130, output
    assert git(repo, "rev-parse", "ralph/b") == git(repo, "rev-parse", "refs/ralph/b/base")  # nothing landed
    assert ralph_workspaces(repo) == [] and git(repo, "status", "--porcelain") == ""
    python_agent(tmp_path / "agent.py", AGENT.replace("PLAN", repr(json.dumps({str(n): ["mul"] for n in range(9)}))))
    resumed = ralph(repo, "run", "--name", "b", "--best-of", "2")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ledger.audit(repo, "b") == []
    laps = lap_notes(repo, "b")
    chosen = [lap for lap in laps if lap["best_of"]["chosen"]]
    assert len(chosen) == 1 and git(repo, "rev-parse", "ralph/b") == chosen[0]["commit"]
    # The green candidate of the round cut short was never chosen: no resume lands it.
    (cut_short,) = [lap for lap in laps if lap["lap"] == 2]
    told = [(lap["lap"], lap["reason"]) for lap in laps]
    assert cut_short["status"] == "green" and cut_short["reason"].startswith("not chosen: its round was interrupted"), (
        told
    )
    landed = subprocess.run(["git", "merge-base", "--is-ancestor", cut_short["commit"], "ralph/b"], cwd=repo)
    assert landed.returncode == 1, told


def test_best_of_refuses_parallel_remote_and_no_sandbox_before_anything_starts(tmp_path: Path):
    repo = calc_repo(tmp_path, {})
    result = ralph(repo, "run", "--name", "b", "--best-of", "2", "--parallel", "2")
    assert result.returncode == 1 and "use --best-of or --parallel, not both" in result.stderr
    result = ralph(repo, "run", "--name", "b", "--best-of", "2", "--remote", "origin")
    assert result.returncode == 1 and "use --best-of or --remote, not both" in result.stderr
    result = ralph(repo, "run", "--name", "b", "--best-of", "1")
    assert result.returncode == 2  # N >= 2: click's usage error
    config = json.loads((repo / "ralph.yaml").read_text())
    (repo / "ralph.yaml").write_text(json.dumps(dict(config, sandbox="off")))
    git(repo, "commit", "-qam", "no sandbox")
    result = ralph(repo, "run", "--name", "b", "--best-of", "2")
    assert result.returncode == 1 and "--best-of needs laps in the sandbox (bubblewrap)" in result.stderr
    assert git(repo, "for-each-ref", "refs/ralph/") == ""


MORE_TESTS = """\
const { test } = require('node:test');
const assert = require('node:assert');
const more = require('../more.js');
test('test_c', () => { assert.strictEqual(more.c(), 1); });
"""
# Lap 1 cheats as issue 38 saw it (the module exits as it loads, so node reports its test file as
# one passing testcase and runs none of its tests; plus a smoke test): a smaller diff than lap
# 2's, which writes the module for real.
NODE_AGENT = r"""
import os, pathlib
if os.environ["RALPH_LAP"] == "1":
    pathlib.Path("more.js").write_text("process.exit(0);\n")
    pathlib.Path("test/smoke.test.js").write_text("require('node:test').test('smoke', () => {});\n")
else:
    pathlib.Path("more.js").write_text("// more: what test/more.test.js asks of it.\n\nexports.c = () => 1;\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""


@needs_bwrap
def test_a_candidate_whose_gain_is_a_test_file_that_stopped_failing_without_its_tests_never_wins(tmp_path: Path):
    node = "mkdir -p reports && node --test --test-reporter=junit --test-reporter-destination=reports/junit.xml test/"
    config = {
        "goal": "Write more.js",
        "agent": python_agent(tmp_path / "agent.py", NODE_AGENT),
        "checks": [{"run": node, "junit": "reports/*.xml"}],
        "limits": {"max_laps": 2},
    }
    files = {"test/more.test.js": MORE_TESTS, ".gitignore": "reports/\n", "TODO.md": "# TODO\n- [ ] Write more.js\n"}
    repo = make_repo(tmp_path / "repo", files, config=config, progress="# Progress\n")

    result = ralph(repo, "run", "--name", "b", "--best-of", "2")

    output = result.stdout + result.stderr
    assert "lap 2 won best of 2: the only green candidate" in output, output
    cheat, honest = lap_notes(repo, "b")
    assert cheat["status"] == "red" and "failing tests are gone: test/more.test.js::<collection>" in cheat["reason"]
    assert honest["best_of"]["chosen"] is True and honest["done"] is True
    assert git(repo, "rev-parse", "ralph/b") == git(repo, "rev-parse", "refs/ralph/b/laps/2")
    assert result.returncode == 0, output


def test_a_failing_test_that_is_gone_is_no_gain_only_one_that_passes_is():
    """What ranks green candidates counts failing tests turned passing by the ratchet's own rule:
    one that is no longer reported (not run, or its file's entry passing with none of its tests
    run) counts for nothing, whatever else passes."""

    def check(passed: list[str], failing: list[str], files: list[str] | None = None) -> CheckResult:
        counts = TestCounts(passed=len(passed), failed=len(failing))
        tests = TestResults(counts=counts, passed_ids=passed, failing_ids=failing, passing_files=files)
        return CheckResult(command="node --test", exit_code=1 if failing else 0, duration_s=0, tests=tests)

    at_green = [check(["test/a.test.js::test::a"], ["test/a.test.js::test::b", "test/c.test.js::<collection>"], [""])]
    gone = check(["test/a.test.js::test::a", "test/c.test.js::<collection>", "smoke"], [], ["", "test/smoke.test.js"])
    fixed = check(["test/a.test.js::test::a", "test/a.test.js::test::b"], ["test/c.test.js::<collection>"], [""])
    loaded = check(
        ["test/a.test.js::test::a", "test/c.test.js::test::c"], ["test/a.test.js::test::b"], ["test/c.test.js"]
    )

    def gain(candidate: CheckResult) -> int:
        return best_of._fixed(at_green, SimpleNamespace(checks=[candidate]))  # type: ignore[arg-type]

    assert (gain(gone), gain(fixed), gain(loaded)) == (0, 1, 1)
