"""Green means judged in every language (issue 37): each mainstream runner, for real, in a lap.

Every runner gets the same job: `sub` is wrong at the base and `TestSub` fails there. One run of
four laps tries what an agent tries: skip the failing test (red), delete it (red), break a
passing test (red), then fix `sub` (green, done). Each red lap's reason names the test. Then a
check that gives no per-test results and is red at the base is refused before lap 1 (and
accepted when marked `expect_red`), and a misspelled runner could not run.

`protect: []` lets the laps touch the test files, so that what is tested is the per-test
ratchet itself (by default the test files are protected too, a second wall).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.node_runners import node_runner_bin, skip_reason
from helpers.repos import git, make_repo, python_agent
from helpers.running import lap_notes, ralph

from ralph.config.sections import inferred_results

# Each lap's edits, by RALPH_LAP: [path, old, new] replacements (new None: delete the file; old
# None: a new file).
AGENT = r"""
import json, os, pathlib, sys
steps = json.loads(pathlib.Path(sys.argv[1]).read_text())
for path, old, new in steps.get(os.environ["RALPH_LAP"], []):
    target = pathlib.Path(path)
    if new is None:
        target.unlink()
        continue
    if old is None:  # a new file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new)
        continue
    text = target.read_text()
    assert old in text, (path, old)
    target.write_text(text.replace(old, new, 1))
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


@dataclass
class Runner:
    """A tiny project of one runner's, and the edits of each kind of lap."""

    files: dict[str, str]
    check: str | dict[str, object]
    skip: list[list[str | None]]
    delete: list[list[str | None]]
    breaks: list[list[str | None]]
    fix: list[list[str | None]]
    failing: str  # a word of the failing test's id
    passing: str  # a word of the passing test's id
    exit_code_check: str  # the same tests, judged by exit code alone
    misspelled: str | dict[str, object]
    setup: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


GO = Runner(
    files={
        "go.mod": "module example.com/calc\n\ngo 1.19\n",
        "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Sub(a, b int) int { return 0 }\n",
        "calc_test.go": textwrap.dedent(
            """\
            package calc

            import "testing"

            func TestAdd(t *testing.T) {
            \tif Add(2, 3) != 5 {
            \t\tt.Fatal("Add(2, 3) != 5")
            \t}
            }

            func TestSub(t *testing.T) {
            \tif Sub(5, 3) != 2 {
            \t\tt.Fatal("Sub(5, 3) != 2")
            \t}
            }
            """
        ),
    },
    check="go test -json ./...",
    skip=[["calc_test.go", "func TestSub(t *testing.T) {\n", 'func TestSub(t *testing.T) {\n\tt.Skip("later")\n']],
    delete=[["calc_test.go", "func TestSub(", "func helperSub("]],
    breaks=[["calc.go", "return a + b", "return a - b"]],
    fix=[["calc.go", "return 0", "return a - b"]],
    failing="TestSub",
    passing="TestAdd",
    exit_code_check="go test ./...",
    misspelled={"run": "go tset -json ./...", "results": "go"},
)

RUST = Runner(
    files={
        "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
        "src/lib.rs": textwrap.dedent(
            """\
            pub fn add(a: i32, b: i32) -> i32 {
                a + b
            }

            pub fn sub(_a: i32, _b: i32) -> i32 {
                0
            }

            #[cfg(test)]
            mod tests {
                #[test]
                fn adds() {
                    assert_eq!(super::add(2, 3), 5);
                }

                #[test]
                fn subs() {
                    assert_eq!(super::sub(5, 3), 2);
                }
            }
            """
        ),
        ".gitignore": "target/\n",
    },
    check="cargo test --no-fail-fast",
    skip=[["src/lib.rs", "    #[test]\n    fn subs", "    #[test]\n    #[ignore]\n    fn subs"]],
    delete=[["src/lib.rs", "    #[test]\n    fn subs", "    #[allow(dead_code)]\n    fn subs"]],
    breaks=[["src/lib.rs", "    a + b", "    a - b"]],
    fix=[["src/lib.rs", "    0\n", "    _a - _b\n"]],
    failing="subs",
    passing="adds",
    exit_code_check='sh -c "cargo test --no-fail-fast"',  # behind a wrapper: judged by its exit code
    misspelled="cargo tset --no-fail-fast",
)

UNITTEST = Runner(
    files={
        "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return 0\n",
        "tests/__init__.py": "",
        "tests/test_calc.py": textwrap.dedent(
            """\
            import unittest

            import calc


            class Calc(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(calc.add(2, 3), 5)

                def test_sub(self):
                    self.assertEqual(calc.sub(5, 3), 2)
            """
        ),
    },
    check="python3 -m unittest -v",
    skip=[["tests/test_calc.py", "    def test_sub", "    @unittest.skip('later')\n    def test_sub"]],
    delete=[["tests/test_calc.py", "    def test_sub", "    def helper_sub"]],
    breaks=[["calc.py", "return a + b", "return a - b"]],
    fix=[["calc.py", "return 0", "return a - b"]],
    failing="test_sub",
    passing="test_add",
    exit_code_check="python3 -m unittest",
    misspelled={"run": "python3 -m unitest -v", "results": "unittest"},
)

NODE_TEST = Runner(
    files={
        "package.json": json.dumps({"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}}),
        "calc.js": "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => 0;\n",
        "test/calc.test.js": textwrap.dedent(
            """\
            const test = require('node:test');
            const assert = require('node:assert');
            const calc = require('../calc.js');

            test('adds', () => { assert.strictEqual(calc.add(2, 3), 5); });

            test('subs', () => { assert.strictEqual(calc.sub(5, 3), 2); });
            """
        ),
    },
    check={
        "run": "mkdir -p reports && node --test --test-reporter=spec --test-reporter-destination=stdout "
        "--test-reporter=junit --test-reporter-destination=reports/junit.xml",
        "junit": "reports/junit.xml",
    },
    skip=[["test/calc.test.js", "test('subs', () =>", "test.skip('subs', () =>"]],
    delete=[["test/calc.test.js", "test('subs', () => { assert.strictEqual(calc.sub(5, 3), 2); });\n", ""]],
    breaks=[["calc.js", "a + b", "a - b"]],
    fix=[["calc.js", "=> 0", "=> a - b"]],
    failing="subs",
    passing="adds",
    exit_code_check="npm test",
    misspelled={"run": "mkdir -p reports && node --tset", "junit": "reports/junit.xml"},
)


JS_TESTS = """\
{imports}const calc = require('../calc.js');

{describe}('calc', () => {{
  {test}('adds', () => {{ {expect_add}; }});
  {test}('subs', () => {{ {expect_sub}; }});
}});
"""


def _js_runner(name: str, check: dict[str, object], exit_code_check: str, misspelled: dict[str, object]) -> Runner:
    """jest, vitest or mocha on one CommonJS module, through the program the cache holds."""
    test, describe = ("it", "describe") if name == "mocha" else ("test", "describe")
    expects = {
        "mocha": ("assert.strictEqual(calc.add(2, 3), 5)", "assert.strictEqual(calc.sub(5, 3), 2)"),
    }.get(name, ("expect(calc.add(2, 3)).toBe(5)", "expect(calc.sub(5, 3)).toBe(2)"))
    imports = {"mocha": "const assert = require('node:assert');\n"}
    source = JS_TESTS.format(
        imports=imports.get(name, ""), describe=describe, test=test, expect_add=expects[0], expect_sub=expects[1]
    )
    path = "test/calc.test.js"
    sub_test = f"  {test}('subs', () => {{ {expects[1]}; }});\n"
    return Runner(
        files={
            "package.json": json.dumps({"name": "calc", "version": "1.0.0", "private": True}),
            "calc.js": "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => 0;\n",
            path: source,
            ".gitignore": "reports/\n",
        },
        check=check,
        skip=[[path, f"{test}('subs'", f"{test}.skip('subs'"]],
        delete=[[path, sub_test, ""]],
        breaks=[["calc.js", "a + b", "a - b"]],
        fix=[["calc.js", "=> 0", "=> a - b"]],
        failing="subs",
        passing="adds",
        exit_code_check=exit_code_check,
        misspelled=misspelled,
    )


def _node_runner(name: str) -> Runner:
    program = node_runner_bin(name)
    if program is None:
        pytest.skip(skip_reason(name))
    bin_dir = program.parent
    if name == "jest":
        run = f"mkdir -p reports && {program} --ci --json --outputFile=reports/jest.json"
        return _js_runner(
            name,
            {"run": run, "jest": "reports/jest.json"},
            f"{program} --ci",
            {
                "run": f"mkdir -p reports && {bin_dir}/jset --ci --json --outputFile=reports/jest.json",
                "jest": "reports/jest.json",
            },
        )
    if name == "vitest":
        run = f"{program} run --globals --reporter=default --reporter=junit --outputFile.junit=reports/junit.xml"
        return _js_runner(
            name,
            {"run": run, "junit": "reports/junit.xml"},
            f"{program} run --globals",
            {
                "run": f"{program} rnu --reporter=junit --outputFile.junit=reports/junit.xml",
                "junit": "reports/junit.xml",
            },
        )
    run = f"{program} --reporter xunit --reporter-option output=reports/junit.xml"
    return _js_runner(
        name,
        {"run": run, "junit": "reports/junit.xml"},
        str(program),
        {
            "run": f"{bin_dir}/mocah --reporter xunit --reporter-option output=reports/junit.xml",
            "junit": "reports/junit.xml",
        },
    )


def _rust_env() -> dict[str, str]:
    """rustup's homes where cargo is rustup's proxy (`~/.cargo/bin/cargo`): the tests' HOME is a
    fresh folder, so they are named as a user's shell profile names them."""
    cargo = Path(shutil.which("cargo") or "/").resolve()
    if cargo.parent.name == "bin" and cargo.parent.parent.name == ".cargo":
        home = cargo.parent.parent.parent
        return {"RUSTUP_HOME": str(home / ".rustup"), "CARGO_HOME": str(home / ".cargo")}
    return {}


RUNNERS = ["go", "libtest", "unittest", "node", "jest", "vitest", "mocha"]


def _runner(name: str) -> tuple[Runner, dict[str, str]]:
    """The runner's project, and the environment its tools need; skipped where it is missing."""
    fixed = {
        "go": (GO, "go"),
        "libtest": (RUST, "cargo"),
        "unittest": (UNITTEST, "python3"),
        "node": (NODE_TEST, "node"),
    }
    if name not in fixed:
        return _node_runner(name), {}
    runner, program = fixed[name]
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed (.ci/run installs it)")
    return runner, _rust_env() if program == "cargo" else {}


def _repo(tmp_path: Path, runner: Runner, check: str | dict[str, object], steps: dict[str, list]) -> Path:
    agent = python_agent(tmp_path / "agent" / "agent.py", AGENT)
    (tmp_path / "agent" / "steps.json").write_text(json.dumps(steps))
    agent["command"] += f" {tmp_path / 'agent' / 'steps.json'}"
    config = {
        "goal": "Make sub subtract",
        "agent": agent,
        "checks": [check],
        "protect": [],
        "limits": {"max_laps": len(steps) or 1, "stagnation": 10, "check_timeout": 300},
    }
    if runner.setup:
        config["setup"] = runner.setup
    return make_repo(tmp_path / "repo", runner.files, config=config, todo=["Make sub subtract"])


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNERS)
def test_each_runner_judges_skips_deletions_breaks_and_the_fix_test_by_test(tmp_path: Path, name: str):
    runner, env = _runner(name)
    steps = {"1": runner.skip, "2": runner.delete, "3": runner.breaks, "4": runner.fix}
    repo = _repo(tmp_path, runner, runner.check, steps)
    result = ralph(repo, "run", "--name", "r", env=env, timeout=600)
    notes = lap_notes(repo, "r")
    reasons = [note["reason"] for note in notes]
    assert [note["status"] for note in notes] == ["red", "red", "red", "green"], (reasons, result.stdout)
    assert "skipped tests rose" in reasons[0] or runner.failing in reasons[0], reasons[0]
    assert "failing tests are gone" in reasons[1] and runner.failing in reasons[1], reasons[1]
    assert "tests that passed now fail" in reasons[2] and runner.passing in reasons[2], reasons[2]
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "rev-parse", "ralph/r") == notes[3]["commit"]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNERS)
def test_a_red_base_without_per_test_results_is_refused_unless_marked(tmp_path: Path, name: str):
    runner, env = _runner(name)
    repo = _repo(tmp_path / "plain", runner, runner.exit_code_check, {})
    refused = ralph(repo, "run", "--name", "r", env=env, timeout=600)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "gives no per-test results" in refused.stderr and "expect_red" in refused.stderr, refused.stderr
    assert git(repo, "for-each-ref", "refs/heads/ralph/") == ""  # no run started
    marked = _repo(tmp_path / "marked", runner, {"run": runner.exit_code_check, "expect_red": True}, {"1": runner.fix})
    done = ralph(marked, "run", "--name", "r", env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr  # the fix makes it pass: done
    assert [note["status"] for note in lap_notes(marked, "r")] == ["green"]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNERS)
def test_a_misspelled_runner_could_not_run(tmp_path: Path, name: str):
    runner, env = _runner(name)
    repo = _repo(tmp_path, runner, runner.misspelled, {})
    result = ralph(repo, "run", "--name", "r", env=env, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "could not run on the base commit" in result.stderr, result.stderr


# Files that change how the runner runs, outside every test file: a cargo target runner that
# forges libtest's lines for every test binary; a babel configuration jest's transform applies to
# the tests, dropping their assertions (the red team's; both were green and done).
FORGING_RUNNER = """\
import subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True).stdout
print(out.replace("... FAILED", "... ok").replace("test result: FAILED", "test result: ok"))
"""
DROP_ASSERTIONS = """\
module.exports = { plugins: [() => ({ visitor: { ExpressionStatement(p) {
  if (/\\.test\\.js$/.test(this.filename || '') && /^expect\\(/.test(p.toString())) p.remove(); } } })] };
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, files",
    [
        (
            "libtest",
            {
                ".cargo/config.toml": '[target.x86_64-unknown-linux-gnu]\nrunner = ["python3", "tools/run.py"]\n',
                "tools/run.py": FORGING_RUNNER,
            },
        ),
        ("jest", {"babel.config.js": DROP_ASSERTIONS}),
    ],
)
def test_a_file_that_changes_how_the_runner_runs_is_protected(tmp_path: Path, name: str, files: dict[str, str]):
    runner, env = _runner(name)
    repo = _repo(tmp_path, runner, runner.check, {"1": [[path, None, text] for path, text in files.items()]})
    ralph(repo, "run", "--name", "r", env=env, timeout=600)
    (note,) = lap_notes(repo, "r")
    assert note["status"] == "red" and "never in scope" in note["reason"], note["reason"]
    assert next(iter(files)) in note["reason"], note["reason"]


@pytest.mark.parametrize(
    "command, reader",
    [
        ("go test -json ./...", "go"),
        ("go test ./...", None),  # no events: judged by its exit code
        ("cargo test --no-fail-fast", "libtest"),
        ("cargo test -q", None),  # libtest's quiet lines name no passing test
        ("cargo test -- --quiet", None),
        ("make build && cargo test 2>&1 | tee test.log", "libtest"),
        ("python3 -m unittest -v", "unittest"),
        ("cd src && .venv/bin/python -m unittest discover -v -s tests 2>&1", "unittest"),
        ("python3 -m unittest", None),  # without -v only the failures are named
        # The runner's output does not reach the check's own: nothing there to read.
        ("cargo test --offline 2>&1 | grep -q 'test it ... ok'", None),
        ("go test -json ./... > report.json", None),
        ("go test -json ./... &> report.json", None),
        ('sh -c "cargo test"', None),  # behind another program: declare `results:`
        ("cargo test 'unbalanced", None),
    ],
)
def test_which_commands_are_read_test_by_test_without_being_told(command: str, reader: str | None):
    assert inferred_results(command) == reader


@pytest.mark.slow
def test_a_red_base_whose_runner_stops_at_its_first_failure_is_refused(tmp_path: Path):
    # cargo stops at the first failing test binary: tests/api.rs would never run on the red
    # base, so a lap could break it unseen.
    runner, env = _runner("libtest")
    files = {**runner.files, "tests/api.rs": "#[test]\nfn api_adds() {\n    assert_eq!(calc::add(1, 1), 2);\n}\n"}
    refused = _repo(tmp_path, Runner(**{**runner.__dict__, "files": files}), "cargo test", {})
    result = ralph(refused, "run", "--name", "r", env=env, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stops at its first failure (cargo)" in result.stderr and "--no-fail-fast" in result.stderr, result.stderr
