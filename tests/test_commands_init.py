"""`ralph init`: the setup and the checks it writes, in the form that gives per-test results,
from what the repository holds (its manifest, its scripts, its Makefile, tox.ini, noxfile.py and
CI workflow). The look-alikes below have the shape of the repositories issue 37 tried (their
package.json scripts, CI workflows, Makefiles as their public sources show them), no code of theirs."""

from __future__ import annotations

import json
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import lap_notes, ralph

from ralph.commands.init_node import JUNIT_NODE
from ralph.config import load as load_config
from ralph.config import parse
from ralph.config.sections import CheckSpec

VITEST = "npx vitest run --reporter=default --reporter=junit --outputFile.junit=reports/junit.xml"
JEST = "mkdir -p reports && npx jest --ci --json --outputFile=reports/jest.json"
MOCHA = "npx mocha --reporter xunit --reporter-option output=reports/junit.xml"
# The lead's change to CheckSpec (jest:, results:, expect_red:) is on its way: until it lands, the
# text init writes is what is asserted; after, ralph's own parser reads it too.
NEW_KEYS = "jest" in CheckSpec.model_fields


def initialised(tmp_path: Path, files: dict[str, str]) -> tuple[list[Any], str, str]:
    """`ralph init` in a repository of these files: ralph.yaml's checks as YAML reads them, the
    file's text, and what init said on stderr."""
    repo = make_repo(tmp_path / "repo", files)
    result = ralph(repo, "init")
    assert result.returncode == 0 and "internal error" not in result.stderr, result.stderr
    written = (repo / "ralph.yaml").read_text()
    if NEW_KEYS:
        parse(written, "ralph.yaml")
    checks = yaml.safe_load(written)["checks"]
    assert isinstance(checks, list)
    return checks, written, result.stderr


def workflow(env: dict[str, str] | None, *runs: str, job_env: dict[str, str] | None = None) -> str:
    steps = [{"uses": "actions/checkout@v4"}] + [{"run": run} for run in runs]
    job = {"runs-on": "ubuntu-latest", "strategy": {"matrix": {"v": ["1", "2"]}}, "steps": steps}
    return json.dumps({"name": "CI", "env": env or {}, "jobs": {"test": {**job, "env": job_env or {}}}})


def package(scripts: dict[str, str], **dev: str) -> str:
    return json.dumps({"name": "p", "scripts": scripts, "devDependencies": dev})


# tj/commander.js: node:test, then type tests in the same `npm test`; CI runs it on a matrix.
def test_commander_js_gets_node_test_with_junit_and_a_note_of_what_else_npm_test_runs(tmp_path: Path):
    files = {
        "package.json": package(
            {"test": "node --test && npm run check:type:ts", "check:type:ts": "tsd && tsc -p tsconfig.ts.json"}
        ),
        ".github/workflows/tests.yml": workflow(None, "npm ci", "npm test", "npm run check"),
    }
    checks, written, said = initialised(tmp_path, files)
    assert checks == [{"run": JUNIT_NODE, "junit": "reports/junit.xml"}]
    assert "`npm test` also runs `tsd`, `tsc -p tsconfig.ts.json`" in written
    assert "no per-test results" not in said


# fb55/entities: `npm test` → `npm run test:vi` → `vitest run`, then lint; its CI runs test:vi with CI set.
ENTITIES = {
    "test": "npm run test:vi && npm run lint",
    "test:vi": "vitest run",
    "lint": "npm run lint:es && npm run lint:ts",
    "lint:es": "eslint .",
    "lint:ts": "tsc --noEmit",
}


def test_entities_gets_vitest_as_its_ci_runs_it(tmp_path: Path):
    files = {
        "package.json": package(ENTITIES, vitest="^3"),
        ".github/workflows/nodejs-test.yml": workflow(
            {"CI": "true", "FORCE_COLOR": "2"}, "npm ci", "npm run build --if-present", "npm run test:vi"
        ),
    }
    checks, written, _ = initialised(tmp_path, files)
    assert checks == [{"run": f"CI=true {VITEST}", "junit": "reports/junit.xml"}]
    assert "FORCE_COLOR" not in written  # colours only: ralph reads the output


def test_entities_without_its_workflow_follows_npm_test_two_hops(tmp_path: Path):
    checks, written, _ = initialised(tmp_path, {"package.json": package(ENTITIES, vitest="^3")})
    assert checks == [{"run": VITEST, "junit": "reports/junit.xml"}]
    assert "`npm test` also runs `eslint .`, `tsc --noEmit`" in written


# moment/luxon: `jest --coverage`, no jest-junit; its CI sets TZ (its tests need New York's time).
def test_luxon_gets_jest_s_own_report_and_the_ci_s_time_zone(tmp_path: Path):
    files = {
        "package.json": package({"test": "jest --coverage", "jest": "jest"}, jest="^29"),
        ".github/workflows/test.yml": workflow(
            None,
            "npm ci",
            "npm run build",
            "npm run test",
            job_env={"LANG": "en_US.utf8", "LIMIT_JEST": "yes", "TZ": "America/New_York"},
        ),
    }
    checks, _, _ = initialised(tmp_path, files)
    run = JEST.replace("npx", "LANG=en_US.utf8 LIMIT_JEST=yes TZ=America/New_York npx") + " --coverage"
    assert checks == [{"run": run, "jest": "reports/jest.json"}]


# google/uuid: CI runs `go test -v ./...` on a Go matrix.
def test_uuid_gets_go_test_json(tmp_path: Path):
    files = {"go.mod": "module example.com/uuid\n", ".github/workflows/tests.yaml": workflow(None, "go test -v ./...")}
    checks, written, _ = initialised(tmp_path, files)
    assert checks == ["go test -json ./..."]
    assert ".github/workflows/tests.yaml runs `go test -v ./...`" in written
    if NEW_KEYS:
        reader = "reader"  # the lead's CheckSpec property: by name until it lands
        assert getattr(load_config(tmp_path / "repo" / "ralph.yaml").checks[0], reader) == "go"


# bluss/scopeguard: `cargo test` and `cargo test --no-default-features`; CARGO_TERM_COLOR set.
def test_scopeguard_gets_cargo_test_that_runs_every_test_binary(tmp_path: Path):
    runs = ("cargo build", "cargo test", "cargo test --no-default-features", "cargo test --features ${{ matrix.f }}")
    files = {
        "Cargo.toml": '[package]\nname = "scopeguard"\n',
        ".github/workflows/ci.yaml": workflow({"CARGO_TERM_COLOR": "always"}, *runs),
    }
    checks, written, _ = initialised(tmp_path, files)
    assert checks == ["cargo test --no-fail-fast"]
    assert "the project also runs: cargo test --no-default-features" in written
    assert "runs `cargo test --features ${{ matrix.f }}` (not used" in written  # shown, never used


# more-itertools: unittest, run by tox, `make test` and CI's `make coverage`; no pytest anywhere.
MORE_ITERTOOLS = {
    "pyproject.toml": '[project]\nname = "more-itertools"\n[tool.flit.module]\nname = "more_itertools"\n',
    "requirements/testing.txt": "coverage\n",
    "tox.ini": "[tox]\nenvlist = py311\n[testenv]\ncommands = {envpython} -m unittest -v {posargs}\n",
    "Makefile": ".PHONY: test\ntest:\n\tpython -m unittest -v ${tests}\n"
    'coverage:\n\tpip install -r requirements/testing.txt\n\tcoverage run --include="m/*.py" -m unittest\n',
    "tests/__init__.py": "",
    "tests/test_more.py": "from unittest import TestCase\n",
}


def test_more_itertools_gets_unittest_and_no_pytest(tmp_path: Path):
    files = {**MORE_ITERTOOLS, ".github/workflows/python-app.yml": workflow(None, "make coverage")}
    checks, written, _ = initialised(tmp_path, files)
    assert checks == [".venv/bin/python -m unittest -v"]
    assert yaml.safe_load(written)["setup"] == [
        "python -m venv .venv && .venv/bin/pip install -q -e . -r requirements/testing.txt"
    ]
    assert "make coverage runs `coverage run" in written


@pytest.mark.parametrize(
    "files, check",
    [
        ({"tox.ini": "[testenv]\ncommands = python -m unittest discover -s tests -t .\n"}, "discover -v -s tests -t ."),
        (
            {"noxfile.py": 'def t(session):\n    session.run("python", "-m", "unittest", "discover", "-s", "src")\n'},
            "discover -v -s src",
        ),
        (
            {"tests/test_a.py": "import unittest\n"},
            "discover -v -s tests",
        ),  # no __init__.py: discovery from the top misses it
        ({"test_a.py": "import unittest\n"}, "-v"),
    ],
)
def test_unittest_projects_get_unittest_with_their_own_arguments(tmp_path: Path, files: dict[str, str], check: str):
    checks, written, _ = initialised(tmp_path, {"pyproject.toml": '[project]\nname = "p"\n', **files})
    assert checks == [f".venv/bin/python -m unittest {check}"]
    assert yaml.safe_load(written)["setup"] == ["python -m venv .venv && .venv/bin/pip install -q -e ."]


@pytest.mark.parametrize(
    "files",
    [
        {"tests/test_a.py": "import unittest\n", "requirements-dev.txt": "pytest\n"},  # pytest runs unittest's tests
        {"test_a.py": "def test_a(): pass\n"},
        {"tox.ini": "[testenv]\ncommands = pytest {posargs}\n", "test_a.py": "import unittest\n"},
    ],
)
def test_pytest_projects_keep_pytest(tmp_path: Path, files: dict[str, str]):
    checks, _, _ = initialised(tmp_path, {"pyproject.toml": '[project]\nname = "p"\n', **files})
    assert checks == [".venv/bin/python -m pytest -q"]


def test_a_uv_unittest_project_runs_unittest_through_uv(tmp_path: Path):
    files = {"pyproject.toml": '[project]\nname = "p"\n', "uv.lock": "", "test_a.py": "import unittest\n"}
    checks, _, _ = initialised(tmp_path, files)
    assert checks == ["uv run --frozen python -m unittest -v"]


@pytest.mark.parametrize(
    "scripts, dev, check",
    [
        ({"test": "node --test"}, {}, {"run": JUNIT_NODE, "junit": "reports/junit.xml"}),
        ({"test": "node --test test/"}, {}, {"run": f"{JUNIT_NODE} test/", "junit": "reports/junit.xml"}),
        ({"test": "vitest"}, {}, {"run": VITEST, "junit": "reports/junit.xml"}),
        (
            {"test": "pnpm run unit", "unit": "vitest run src"},
            {},
            {"run": f"{VITEST} src", "junit": "reports/junit.xml"},
        ),
        ({"test": "yarn unit", "unit": "jest"}, {}, {"run": JEST, "jest": "reports/jest.json"}),
        (
            {"test": "npm run unit -- --runInBand", "unit": "jest"},
            {},
            {"run": f"{JEST} --runInBand", "jest": "reports/jest.json"},
        ),
        ({"test": "TZ=UTC jest --ci"}, {}, {"run": JEST.replace("npx", "TZ=UTC npx"), "jest": "reports/jest.json"}),
        (
            {"test": "jest"},
            {"jest-junit": "^16"},
            {
                "run": "JEST_JUNIT_OUTPUT_DIR=reports JEST_JUNIT_OUTPUT_NAME=junit.xml JEST_JUNIT_SUITE_NAME='{filepath}' "
                "npx jest --ci --reporters=default --reporters=jest-junit",
                "junit": "reports/junit.xml",
            },
        ),
        ({"test": "mocha --recursive test/"}, {}, {"run": f"{MOCHA} --recursive test/", "junit": "reports/junit.xml"}),
        ({"test": "mocha -R spec test"}, {}, {"run": f"{MOCHA} test", "junit": "reports/junit.xml"}),
        (
            {"test": "nyc mocha"},
            {"mocha-junit-reporter": "^2"},
            {
                "run": "npx mocha --reporter mocha-junit-reporter --reporter-options mochaFile=reports/junit.xml",
                "junit": "reports/junit.xml",
            },
        ),
    ],
)
def test_node_scripts_are_followed_to_their_runner(
    tmp_path: Path, scripts: dict[str, str], dev: dict[str, str], check: Any
):
    checks, _, said = initialised(tmp_path, {"package.json": package(scripts, **dev)})
    assert checks == [check]
    assert "no per-test results" not in said


def test_two_runners_in_one_script_write_two_reports(tmp_path: Path):
    checks, _, _ = initialised(tmp_path, {"package.json": package({"test": "vitest run && mocha"})})
    assert checks == [
        {"run": VITEST, "junit": "reports/junit.xml"},
        {"run": MOCHA.replace("junit.xml", "junit-2.xml"), "junit": "reports/junit-2.xml"},
    ]


@pytest.mark.parametrize(
    "manifest, why",
    [
        (package({"test": "ava"}), "it runs `ava`"),
        (package({"build": "tsc"}), "package.json has no test script"),
        ("", "package.json has no test script"),
    ],
)
def test_a_check_with_no_per_test_results_is_said_in_the_file_and_on_the_terminal(
    tmp_path: Path, manifest: str, why: str
):
    checks, written, said = initialised(tmp_path, {"package.json": manifest})
    assert checks == ["npm test"]
    line = next(line for line in written.splitlines() if '- "npm test"' in line)
    assert f"# no per-test results: {why}, no runner ralph reads" in line
    assert said.count("gives no per-test results") == 1 and why in said


def test_the_ci_s_secrets_and_expressions_are_never_copied(tmp_path: Path):
    env = {"TZ": "UTC", "PUBLISH_KEY": "${{ secrets.PUBLISH_KEY }}", "NODE": "${{ matrix.node }}"}
    files = {"go.mod": "module m\n", ".github/workflows/ci.yml": workflow(env, "go test -race ./...")}
    checks, written, _ = initialised(tmp_path, files)
    assert checks == ["TZ=UTC go test -json -race ./..."]
    assert "PUBLISH_KEY" not in written and "matrix.node" not in written


def test_gitlab_ci_variables_and_script(tmp_path: Path):
    pipeline = {"variables": {"TZ": "Europe/Paris"}, "stages": ["test"], "unit": {"script": ["cargo test --all"]}}
    files = {"Cargo.toml": "[package]\n", ".gitlab-ci.yml": json.dumps(pipeline)}
    checks, _, _ = initialised(tmp_path, files)
    assert checks == ["TZ=Europe/Paris cargo test --no-fail-fast --all"]


def test_a_makefile_test_target_is_read(tmp_path: Path):
    files = {
        "go.mod": "module m\n",
        "Makefile": "GO ?= go\nbuild:\n\tgo build\ntest: build\n\t@go test -count=1 ./...\n",
    }
    checks, _, _ = initialised(tmp_path, files)
    assert checks == ["go test -json -count=1 ./..."]


HOSTILE = [
    {".github/workflows/ci.yml": "[1, 2]"},
    {".github/workflows/ci.yml": "jobs: [1]\n"},
    {".github/workflows/ci.yml": "jobs: {t: {steps: 3}}\n"},
    {".github/workflows/ci.yml": "jobs: {t: {env: [1], steps: [3, {run: 4}, {run: [x]}, {env: 5, run: 'go test'}]}}\n"},
    {".github/workflows/ci.yml": "{{{{: bad"},
    {".github/workflows/ci.yml": "a: &a [*a]\n"},
    {".github/workflows": "a file where a folder is"},
    {".github/workflows/ci.yml/x": "a folder where a file is"},
    {".gitlab-ci.yml": "variables: 3\nunit: {script: 5}\nother: [1]\n"},
    {"Makefile/x": ""},
    {"Makefile": "test:\n\tgo test 'unclosed\n\t$(GO) test\n"},
    {"tox.ini": "[testenv\ncommands = x\n"},
    {"tox.ini": "[testenv]\ncommands = python -m unittest 'unclosed\n"},
    {"noxfile.py": "session.run(" * 1000},
    {"package.json": '{"scripts": {"test": "npm run a", "a": "npm test"}}'},  # a loop
    {"package.json": '{"scripts": {"test": 5}, "devDependencies": []}'},
    {"package.json": '{"scripts": {"test": "mocha \'unclosed"}}'},
    {"package.json": "[" * 100000},
    {"package.json": '{"scripts": {"test": "jest"}, "pad": "' + "x" * 600_000 + '"}'},  # too big to be a manifest
    {"tests/test_a.py/x": "", "pyproject.toml": "[project]\n"},
]


@pytest.mark.parametrize("files", HOSTILE)
def test_init_reads_files_of_any_shape_without_crashing(tmp_path: Path, files: dict[str, str]):
    marker = {"package.json": "{}"} if "package.json" not in files and "pyproject.toml" not in files else {}
    checks, _, _ = initialised(tmp_path, {"go.mod": "module m\n", **marker, **files})
    assert checks  # a suggestion all the same


def test_a_fifo_where_a_workflow_should_be_is_not_read(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"go.mod": "module m\n", "Makefile": "test:\n\tgo test ./...\n"})
    (repo / ".github" / "workflows").mkdir(parents=True)
    os.mkfifo(repo / ".github" / "workflows" / "ci.yml")  # reading it would wait for ever
    os.mkfifo(repo / "tox.ini")
    assert ralph(repo, "init").returncode == 0
    assert yaml.safe_load((repo / "ralph.yaml").read_text())["checks"] == ["go test -json ./..."]


# What stays as it was, moved here from test_lap_environments.py.
@pytest.mark.parametrize(
    "marker, setup, check",
    [
        (
            "pyproject.toml",
            ["python -m venv .venv && .venv/bin/pip install -q -e . pytest"],
            ".venv/bin/python -m pytest -q",
        ),
        ("uv.lock", ["uv sync --frozen"], "uv run --frozen pytest -q"),
        ("package.json", ["npm install --no-audit --no-fund"], "npm test"),  # no lock file committed
        ("Cargo.toml", [], "cargo test --no-fail-fast"),
        ("go.mod", [], "go test -json ./..."),
        ("README.md", [], "python -m pytest -q"),
    ],
)
def test_init_suggests_setup_and_checks_for_what_the_repository_is(tmp_path: Path, marker, setup, check):
    repo = make_repo(tmp_path / "repo", {marker: "", "pyproject.toml" if marker == "uv.lock" else marker: ""})
    assert ralph(repo, "init").returncode == 0
    written = load_config(repo / "ralph.yaml")
    assert written.setup == setup and written.check_commands == [check]


def test_init_suggests_npm_ci_only_with_a_committed_lock_file(tmp_path: Path):
    """`npm ci` fails without the lock file it installs from; a library that keeps its lock file
    out of git (ignored, as jshttp/mime-types does) failed every run's first setup."""
    repo = make_repo(tmp_path / "repo", {"package.json": "{}", ".gitignore": "package-lock.json\n"})
    (repo / "package-lock.json").write_text("{}")  # there, as `npm install` left it, but in no commit
    assert ralph(repo, "init").returncode == 0
    assert load_config(repo / "ralph.yaml").setup == ["npm install --no-audit --no-fund"]
    locked = make_repo(tmp_path / "locked", {"package.json": "{}", "package-lock.json": "{}"})
    assert ralph(locked, "init").returncode == 0
    assert load_config(locked / "ralph.yaml").setup == ["npm ci"]


@pytest.mark.parametrize(
    "pyproject, installs",
    [
        ('[dependency-groups]\ntest = ["pytest"]\n', "-e . --group test"),  # PEP 735
        ('[project]\nname = "p"\n[project.optional-dependencies]\ntests = ["pytest"]\n', "-e '.[tests]'"),
        ('[project]\nname = "p"\n', "-e . pytest"),  # no extra: '.[dev]' would only warn, and pytest be missing
        ("REQUIREMENTS", "-e . -r requirements/tests.txt"),  # pip-tools' layout (itsdangerous, flask)
    ],
)
def test_init_installs_the_projects_test_dependencies_by_their_group_or_extra(tmp_path: Path, pyproject, installs):
    files = {"pyproject.toml": pyproject}
    if pyproject == "REQUIREMENTS":
        files = {"pyproject.toml": '[project]\nname = "p"\n', "requirements/tests.txt": "pytest==8.3.3\n"}
    repo = make_repo(tmp_path / "repo", files)
    assert ralph(repo, "init").returncode == 0
    (setup,) = load_config(repo / "ralph.yaml").setup
    assert setup.startswith("python -m venv .venv && .venv/bin/pip install -q") and setup.endswith(installs)


@pytest.mark.parametrize(
    "files",
    [
        {"pyproject.toml": 'project = "p"\ndependency-groups = ["test"]\n'},
        {"pyproject.toml": "[project\n"},
        {"package.json": '{"scripts": ["node --test"], "devDependencies": 3}'},
        {"package.json": "[1, 2]"},
    ],
)
def test_init_reads_a_manifest_of_any_shape_without_crashing(tmp_path: Path, files):
    repo = make_repo(tmp_path / "repo", files)
    result = ralph(repo, "init")
    assert result.returncode == 0 and "internal error" not in result.stderr, result.stderr
    assert load_config(repo / "ralph.yaml").check_commands  # a suggestion all the same


def test_init_asks_uv_for_a_test_group_that_is_not_dev(tmp_path: Path):
    # itsdangerous's layout: `dev` holds ruff and tox, `tests` holds pytest; uv sync brings dev alone.
    groups = '[dependency-groups]\ndev = ["ruff"]\ntests = ["pytest"]\n'
    repo = make_repo(tmp_path / "repo", {"pyproject.toml": groups, "uv.lock": ""})
    assert ralph(repo, "init").returncode == 0
    assert load_config(repo / "ralph.yaml").setup == ["uv sync --frozen --group tests"]


# The scope init proposes (issue 38), by layout: the package's sources, the test folders (new
# files: the tests there are protect's), the docs; README and CHANGELOG whatever the layout.
ALWAYS = ["README*", "CHANGELOG*"]
LAYOUTS = {
    "python src/": (
        {"pyproject.toml": "[project]\nname = 'calc'\n", "src/calc/__init__.py": "", "src/calc/core.py": "",
         "tests/test_core.py": "", "docs/index.rst": "", "README.md": "", "CHANGES.rst": ""},
        ["src/calc/", "tests/", "docs/", *ALWAYS, "CHANGES.rst"],  # globs are case-sensitive: named
    ),
    "python flat package": (
        {"setup.py": "", "more_itertools/__init__.py": "", "tests/__init__.py": "", "tests/test_more.py": "",
         "docs/conf.py": ""},
        ["more_itertools/", "tests/", "docs/", *ALWAYS],
    ),
    "python one module": (
        {"setup.py": "", "conftest.py": "", "six.py": "", "test_six.py": ""},
        ["*.py", *ALWAYS],
    ),
    "node": (
        {"package.json": json.dumps({"main": "./index.js", "types": "typings/index.d.ts", "scripts": {"test": "mocha"}}),
         "index.js": "", "lib/command.js": "", "typings/index.d.ts": "", "tests/a.test.js": "", "Readme.md": ""},
        ["lib/", "index.js", "typings/", "tests/", *ALWAYS, "Readme.md"],
    ),
    "go": (
        {"go.mod": "module example.com/uuid\n", "uuid.go": "", "uuid_test.go": "", "internal/x/x.go": "",
         "vendor/y/y.go": "", "testdata/a.txt": ""},
        ["*.go", "internal/", "testdata/", *ALWAYS],
    ),
    "rust workspace": (
        {"Cargo.toml": "[workspace]\n", "src/lib.rs": "", "tests/t.rs": "", "benches/b.rs": "",
         "crates/macros/Cargo.toml": "", "crates/macros/src/lib.rs": "", "target/debug/x": ""},
        ["src/", "tests/", "benches/", "crates/macros/src/", *ALWAYS],
    ),
}  # fmt: skip


@pytest.mark.parametrize("layout", LAYOUTS)
def test_init_proposes_a_scope_from_the_layout_and_says_it(tmp_path: Path, layout: str):
    files, scope = LAYOUTS[layout]
    repo = make_repo(tmp_path / "repo", files)
    result = ralph(repo, "init")
    assert result.returncode == 0, result.stderr
    assert load_config(repo / "ralph.yaml").scope == scope
    assert f"scope    {', '.join(scope)} (and TODO.md, PROGRESS.md)" in result.stdout
    written = (repo / "ralph.yaml").read_text()
    assert '"(may change: PATH, PATH)"' in written and "never in scope" in written


def test_init_proposes_no_scope_where_it_finds_no_sources(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"notes.txt": "", "docs/a.md": ""})
    result = ralph(repo, "init")
    assert result.returncode == 0 and "scope    none proposed (no source folder found)" in result.stdout
    assert load_config(repo / "ralph.yaml").scope is None and "\n# scope:\n" in (repo / "ralph.yaml").read_text()


# An honest lap of the job, in a repository set up as `ralph init` proposed: new code in the
# package, a new test file beside the old ones, both in the scope init wrote.
HONEST = r"""
import pathlib
pathlib.Path("src/calc/mul.py").write_text("def mul(a, b):\n    return a * b\n")
pathlib.Path("tests/test_mul.py").write_text("from calc.mul import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ] ", "- [x] ", 1))
"""


def as_init_proposed(tmp_path: Path, agent: str) -> Path:
    """A src/ layout with `ralph init`'s ralph.yaml (its scope), the laps' agent being `agent`."""
    files = {
        "pyproject.toml": "[project]\nname = 'calc'\n",
        "src/calc/__init__.py": "",
        "tests/test_calc.py": "def test_calc():\n    import calc\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    assert ralph(repo, "init").returncode == 0
    config = yaml.safe_load((repo / "ralph.yaml").read_text())
    assert config["scope"] == ["src/calc/", "tests/", *ALWAYS]
    config.update(goal="Add mul", agent=python_agent(tmp_path / "agent.py", agent), setup=[])
    # the venv init suggests, skipped: pytest as it is here
    config["checks"] = [f"PYTHONPATH=src:$PYTHONPATH {PY} -m pytest -q -p no:cacheprovider"]
    (repo / "ralph.yaml").write_text(json.dumps(config))
    (repo / "TODO.md").write_text("- [ ] Add calc.mul, with a test\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ralph init")
    return repo


def test_an_honest_lap_in_the_scope_init_proposed_is_green(tmp_path: Path):
    repo = as_init_proposed(tmp_path, HONEST)
    result = ralph(repo, "run", "--name", "mul", "--max-laps", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [note["status"] for note in lap_notes(repo, "mul")] == ["green"]
    assert git(repo, "show", "ralph/mul:src/calc/mul.py").startswith("def mul")


OUTSIDE = (
    HONEST
    + """pathlib.Path("tools").mkdir()
pathlib.Path("tools/fake_mul.py").write_text("def mul(a, b):\\n    return 6\\n")
"""
)


@pytest.mark.skipif(find_spec("ralph.verdict.scope") is None, reason="the guard reads scope: part B of issue 38")
def test_a_lap_beyond_the_scope_init_proposed_is_red(tmp_path: Path):
    repo = as_init_proposed(tmp_path, OUTSIDE)
    result = ralph(repo, "run", "--name", "mul", "--max-laps", "1")
    assert result.returncode == 3, result.stdout + result.stderr
    (note,) = lap_notes(repo, "mul")
    assert note["status"] == "red" and "outside the run's scope: tools/fake_mul.py (added)" in note["reason"]
