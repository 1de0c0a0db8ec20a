"""Could not run, decided by evidence before phrases: a runner's closing line means it ran, whatever
the code under test printed; without one, a launcher's or toolchain manager's failure to start the
program means the check could not run. Each line a user would read is asserted whole.

The outputs below were produced by the real tools (versions in the ids); the tests further down run
each tool that is installed here again, so a tool that changes its words fails a test, not a user."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ralph.verdict.could_not_run import fix, reason, runner_closed

MISSING = "was not found where the check runs (misspelled, or not installed)"
VERSION = "the toolchain version it needs is not installed"
UNSET = "a version manager has no version set for it"

# (command, exit code, output, the reason line)
CAPTURED = [
    pytest.param(
        "uv run --frozen pytets -q",
        2,
        "error: Failed to spawn: pytets\n  cause: No such file or directory (os error 2)\n",
        f"`pytets` {MISSING}: error: Failed to spawn: pytets",
        id="uv-0.13",
    ),
    pytest.param(
        "uv run pytets",
        2,
        "warning: `VIRTUAL_ENV=/x/.venv` does not match the project environment path `.venv`\n"
        "error: Failed to spawn: `pytets`\n  Caused by: No such file or directory (os error 2)\n",
        f"`pytets` {MISSING}: error: Failed to spawn: `pytets`",
        id="uv-0.4-backticks",
    ),
    pytest.param(
        "uv run --python 3.99 pytest",
        2,
        "error: No interpreter found for Python 3.99 in managed installations or search path\n\n"
        "hint: uv embeds available Python downloads and may require an update to install new versions.\n",
        f"{VERSION}: error: No interpreter found for Python 3.99 in managed installations or search path",
        id="uv-python-version",
    ),
    pytest.param(
        "uvx pytetsq",
        1,
        "error: No solution found when resolving tool dependencies\n  cause: Because pytetsq was not found in the "
        "package registry and you require pytetsq, we can conclude that your requirements are unsatisfiable.\n",
        f"`pytetsq` {MISSING}: cause: Because pytetsq was not found in the package registry and you require "
        "pytetsq, we can conclude that your requirements are unsatisfiable.",
        id="uvx-0.13",
    ),
    pytest.param(
        "pnpm exec vitst run",
        1,
        'Error: ERR_PNPM_RECURSIVE_EXEC_FIRST_FAIL\n\n  × Command "vitst" not found\n\n',
        f'`vitst` {MISSING}: × Command "vitst" not found',
        id="pnpm-12",
    ),
    pytest.param(
        "yarn vitst run",
        1,
        'yarn run v1.22.22\nwarning package.json: No license field\nerror Command "vitst" not found.\n'
        "info Visit https://yarnpkg.com/en/docs/cli/run for documentation about this command.\n",
        f'`vitst` {MISSING}: error Command "vitst" not found.',
        id="yarn-1.22",
    ),
    pytest.param(
        "npx vitst run",
        1,
        "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/vitst\nnpm error 404\n"
        "npm error 404  The requested resource 'vitst@*' could not be found or you do not have permission to "
        "access it.\nnpm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log\n",
        f"what it names {MISSING}: npm error code E404",
        id="npx-npm-11-404",
    ),
    pytest.param(
        "npx --offline vitst",
        1,
        "npm error code ENOTCACHED\nnpm error request to https://registry.npmjs.org/vitst failed: cache mode is "
        "'only-if-cached' but no cached response is available.\n",
        f"what it names {MISSING}: npm error code ENOTCACHED",
        id="npx-npm-11-offline",
    ),
    pytest.param(
        "poetry run pytets -q",
        1,
        "Command not found: pytets\n",
        f"`pytets` {MISSING}: Command not found: pytets",
        id="poetry-2.5",
    ),
    pytest.param(
        "pdm run pytets -q",
        1,
        "INFO: Virtualenv /tmp/p/.venv is reused.\n[PdmUsageError]: Command 'pytets' is not found in your PATH.\n",
        f"`pytets` {MISSING}: [PdmUsageError]: Command 'pytets' is not found in your PATH.",
        id="pdm-2.29",
    ),
    pytest.param(
        "hatch run tests:pytest",
        1,
        "Unknown environment: tests\n",
        f"`tests` {MISSING}: Unknown environment: tests",
        id="hatch-1.18-environment",
    ),
    pytest.param(
        "pipx run --spec six sixer",
        1,
        "creating virtual environment...\ninstalling six...\n'sixer' executable script not found in package "
        "'six'.\nAvailable executable scripts:\n    \n",
        f"`sixer` {MISSING}: 'sixer' executable script not found in package 'six'.",
        id="pipx-1.18",
    ),
    pytest.param(
        "python3 -m pytets",
        1,
        "/usr/bin/python3: No module named pytets\n",
        f"`pytets` {MISSING}: /usr/bin/python3: No module named pytets",
        id="python-m",
    ),
    pytest.param(
        "make tset",
        2,
        "make: *** No rule to make target 'tset'.  Stop.\n",
        f"`tset` {MISSING}: make: *** No rule to make target 'tset'.  Stop.",
        id="make-4.3",
    ),
    pytest.param(
        "make test",
        2,
        "uv run pytets -q\nerror: Failed to spawn: pytets\n  cause: No such file or directory (os error 2)\n"
        "make: *** [Makefile:2: test] Error 2\n",
        f"`pytets` {MISSING}: error: Failed to spawn: pytets",
        id="uv-behind-make",
    ),
    pytest.param(
        "node test/nope.js",
        1,
        "node:internal/modules/cjs/loader:1210\n  throw err;\n  ^\n\n"
        "Error: Cannot find module '/w/test/nope.js'\n    at Module._resolveFilename "
        "(node:internal/modules/cjs/loader:1207:15)\n    at node:internal/main/run_main_module:28:49 {\n"
        "  code: 'MODULE_NOT_FOUND',\n  requireStack: []\n}\n\nNode.js v20.20.2\n",
        f"`/w/test/nope.js` {MISSING}: Error: Cannot find module '/w/test/nope.js'",
        id="node-20-entry-script",
    ),
    pytest.param(
        "node --test test/nope.js",
        1,
        "Could not find '/w/test/nope.js'\n",
        f"`/w/test/nope.js` {MISSING}: Could not find '/w/test/nope.js'",
        id="node-20-test-file",
    ),
    pytest.param(
        "docker compose run app pytets",
        1,
        'Error response from daemon: failed to create task: exec: "pytets": executable file not found in $PATH: '
        "unknown\n",
        f'`pytets` {MISSING}: Error response from daemon: failed to create task: exec: "pytets": executable file '
        "not found in $PATH: unknown",
        id="go-os-exec",
    ),
    pytest.param(
        "java -cp build Main",
        1,
        "Error: Could not find or load main class Main\nCaused by: java.lang.ClassNotFoundException: Main\n",
        f"`Main` {MISSING}: Error: Could not find or load main class Main",
        id="java-17",
    ),
    pytest.param(
        "cargo test",
        1,
        "error: toolchain '1.70.0-x86_64-unknown-linux-gnu' is not installed\n"
        "help: run `rustup toolchain install` to install it\n",
        f"{VERSION}: error: toolchain '1.70.0-x86_64-unknown-linux-gnu' is not installed",
        id="rustup-1.29-pinned",
    ),
    pytest.param(
        "cargo test",
        1,
        "info: syncing channel updates for 1.70.0-x86_64-unknown-linux-gnu\nerror: could not download file from "
        "'http://127.0.0.1:9/dist/channel-rust-1.70.0.toml.sha256' to '/r/.rustup/tmp/x_file'\n\nCaused by:\n"
        "    0: error downloading file\n",
        f"{VERSION}: error: could not download file from 'http://127.0.0.1:9/dist/channel-rust-1.70.0.toml.sha256' "
        "to '/r/.rustup/tmp/x_file'",
        id="rustup-1.29-auto-install-offline",
    ),
    pytest.param(
        "cargo test",
        1,
        "error: rustup could not choose a version of cargo to run, because one wasn't specified explicitly, and no "
        "default is configured.\nhelp: run 'rustup default stable' to download the latest stable release of Rust "
        "and set it as your default toolchain.\n",
        f"{UNSET}: error: rustup could not choose a version of cargo to run, because one wasn't specified "
        "explicitly, and no default is configured.",
        id="rustup-1.29-home-hidden",
    ),
    pytest.param(
        "pytest -q",
        1,
        "pyenv: version `3.5.1' is not installed (set by /w/.python-version)\n",
        f"{VERSION}: pyenv: version `3.5.1' is not installed (set by /w/.python-version)",
        id="pyenv-2-version",
    ),
    pytest.param(
        "tox -e py",
        127,
        "pyenv: tox: command not found\n\nThe `tox' command exists in these Python versions:\n  3.9.18\n\n"
        "Note: See 'pyenv help global' for tips on allowing both\n",
        f"`tox` {MISSING}: pyenv: tox: command not found",
        id="pyenv-2-command-of-another-version",
    ),
    pytest.param(
        "make test",
        2,
        "tox -e py\npyenv: tox: command not found\n\nThe `tox' command exists in these Python versions:\n"
        "  3.9.18\nmake: *** [Makefile:2: test] Error 1\n",
        f"`tox` {MISSING}: pyenv: tox: command not found",
        id="pyenv-behind-make",
    ),
    pytest.param(
        "node --test",
        126,
        "No version is set for command node\nConsider adding one of the following versions in your config file at "
        "/w/.tool-versions\nnodejs 20.11.0\n",
        f"{UNSET}: No version is set for command node",
        id="asdf-0.16-exit-126",
    ),
    pytest.param(
        "make test",
        2,
        "No version is set for command node\nConsider adding one of the following versions in your config file at "
        "/w/.tool-versions\nnodejs 20.11.0\nmake: *** [Makefile:2: test] Error 126\n",
        f"{UNSET}: No version is set for command node",
        id="asdf-0.16-behind-make",
    ),
    pytest.param(
        "npm test",
        1,
        "mise ERROR No version is set for shim: node\nSet a global default version with one of the following:\n",
        f"{UNSET}: mise ERROR No version is set for shim: node",
        id="mise",
    ),
    pytest.param(
        "go test ./...",
        1,
        "go: downloading go1.22.0 (linux/amd64)\ngo: download go1.22.0 for linux/amd64: toolchain not available\n",
        f"{VERSION}: go: download go1.22.0 for linux/amd64: toolchain not available",
        id="go-toolchain-refused",
    ),
    pytest.param(
        "go test ./...",
        1,
        "go: go.mod requires go >= 1.22.0 (running go 1.21.0; GOTOOLCHAIN=local)\n",
        f"{VERSION}: go: go.mod requires go >= 1.22.0 (running go 1.21.0; GOTOOLCHAIN=local)",
        id="go-toolchain-local",
    ),
    # The next launcher, by what these have in common: it names the command's own word.
    pytest.param(
        "just tset",
        1,
        "error: Justfile does not contain recipe `tset`.\n",
        f"`tset` {MISSING}: error: Justfile does not contain recipe `tset`.",
        id="just-unlisted",
    ),
    pytest.param(
        "./gradlew tset",
        1,
        "FAILURE: Build failed with an exception.\n\n* What went wrong:\n"
        "Task 'tset' not found in root project 'demo'.\n",
        f"`tset` {MISSING}: Task 'tset' not found in root project 'demo'.",
        id="gradle-unlisted",
    ),
    pytest.param(
        "cargo tset",
        101,
        "error: no such command: `tset`\n\n\tDid you mean `test`?\n",
        f"`tset` {MISSING}: error: no such command: `tset`",
        id="cargo-subcommand-unlisted",
    ),
]


@pytest.mark.parametrize("command, exit_code, output, line", CAPTURED)
def test_a_launcher_that_could_not_start_the_program_is_could_not_run(command, exit_code, output, line):
    assert reason(command, exit_code, output, None) == line


@pytest.mark.parametrize(
    "why, advice",
    [
        (f"`pytets` {MISSING}: error: Failed to spawn: pytets", "check the name in ralph.yaml's command"),
        (f"{VERSION}: error: toolchain '1.70.0' is not installed", "`rustup toolchain install`"),
        (f"{UNSET}: error: rustup could not choose a version of cargo to run", "`rustup default stable`"),
        ("`vitest` is at /opt/x/vitest outside the sandbox, but /opt/x/lib is not there inside it", "readable"),
        # Advice is read from ralph's own words, not from the output it quotes.
        ("not found (exit 127): sh: 1: vitest is outside the sandbox: not found", "install it with"),
    ],
)
def test_each_cause_gets_its_own_advice(why, advice):
    assert advice in fix(why)


# Honest outputs: the runner printed its closing line, so it ran, whatever the tests printed.
HONEST = [
    pytest.param("bats test", "not ok 1 lookup\n# /bin/sh: 1: gojq: not found\n\n1 test, 1 failure\n", id="bats"),
    pytest.param("./run-tests.sh", "sh: 1: gojq: not found\nFAIL lookup\n1 test, 1 failed\n", id="shell-suite"),
    pytest.param(
        "cargo test",
        "running 1 test\ntest tool ... FAILED\n\nfailures:\n\n---- tool stdout ----\nerror: Failed to spawn: gojq\n"
        "\nfailures:\n    tool\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; "
        "finished in 0.00s\n\nerror: test failed, to rerun pass `--lib`\n",
        id="libtest",
    ),
    pytest.param(
        "npx jest",
        'FAIL src/a.test.js\n  ● tool\n    Command "gojq" not found\n\nTest Suites: 1 failed, 1 total\n'
        "Tests:       1 failed, 1 total\nTime:        0.5 s\n",
        id="jest",
    ),
    pytest.param(
        "npx vitest run",
        " FAIL  a.test.ts > tool\nError: Command not found: gojq\n\n Test Files  1 failed (1)\n"
        "      Tests  1 failed (1)\n",
        id="vitest",
    ),
    pytest.param(
        "npx mocha",
        "  0 passing (4ms)\n  1 failing\n\n  1) tool:\n     Error: pyenv: version `3.5.1' is not installed\n",
        id="mocha",
    ),
    pytest.param(
        "npm test",
        "TAP version 13\nnot ok 1 - tool\n  ---\n  error: 'make: *** No rule to make target ''x''.  Stop.'\n"
        "  ...\n1..1\n",
        id="tap",
    ),
    pytest.param(
        "python -m unittest",
        "E\n===\nERROR: test_tool\n---\nFileNotFoundError: x\nerror: Failed to spawn: gojq\n---\n"
        "Ran 1 test in 0.001s\n\nFAILED (errors=1)\n",
        id="unittest",
    ),
    pytest.param("make check", "error: Failed to spawn: gojq\nchecks: 3 passed, 1 failed\n", id="plain-line"),
    pytest.param(
        "tox",
        "py: commands[0]> pytest\nFAILED tests/test_a.py::test_tool - Command not found: gojq\n"
        "1 failed, 2 passed in 0.12s\npy: exit 1\n",
        id="pytest-behind-tox",
    ),
]


@pytest.mark.parametrize("command, output", HONEST)
def test_what_the_code_under_test_printed_never_outvotes_the_runners_closing_line(command, output):
    assert runner_closed(output)
    assert reason(command, 1, output, None) is None


# Odd inputs: never a crash, never a launcher's verdict from words that are not a launcher's.
@pytest.mark.parametrize(
    "command, exit_code, output, line",
    [
        pytest.param("true", 0, "", None, id="nothing-said"),
        pytest.param("uv run pytets", 0, "error: Failed to spawn: pytets\n", None, id="exit-0-is-no-failure-to-start"),
        pytest.param("./check.sh", 1, "\x00\xff\ufffd error: \x1b[31m", None, id="binary-junk"),
        pytest.param("sh -c 'unbalanced", 1, "command not found\n", None, id="unbalanced-quotes"),
        pytest.param("make c++", 2, "make: *** No rule to make target 'c++'.  Stop.\r\n", None, id="crlf-and-regex"),
        pytest.param(
            "./lint docs",
            1,
            "error: link target docs/x.md not found\n",
            None,
            id="the-check-own-failure-naming-a-path-under-a-word",
        ),
        pytest.param(
            "npm test",
            1,
            "Error: the fixture for the test was not found\n",
            None,
            id="a-failure-that-names-no-command-word",
        ),
    ],
)
def test_odd_inputs(command, exit_code, output, line):
    expected = line
    if "c++" in command:
        expected = f"`c++` {MISSING}: make: *** No rule to make target 'c++'.  Stop."
    assert reason(command, exit_code, output, None) == expected


def test_a_long_output_is_read_quickly():
    output = "ok line that says nothing\n" * 200_000 + "error: Failed to spawn: pytets\n"
    started = time.monotonic()
    assert reason("uv run pytets", 2, output, None) == f"`pytets` {MISSING}: error: Failed to spawn: pytets"
    assert time.monotonic() - started < 5


def test_a_launchers_words_in_the_middle_of_a_long_output_are_the_programs_own():
    # A launcher fails before the program prints anything, and the check ends there.
    output = "checking\n" * 100 + "error: Failed to spawn: gojq\n" + "checking\n" * 100
    assert reason("./check.sh", 1, output, None) is None
    assert reason("./check.sh", 1, "checking\n" * 100 + "error: Failed to spawn: gojq\n", None) == (
        f"`gojq` {MISSING}: error: Failed to spawn: gojq"
    )


# The real tools, where they are installed here: their words today, not as remembered.
def run(command: str, cwd: Path, **env: str) -> tuple[int, str]:
    """The command's exit code and output; a variable set to "" is left out."""
    environ = {key: value for key, value in os.environ.items() if key not in ("RUST_BACKTRACE", "VIRTUAL_ENV")}
    environ = {key: value for key, value in {**environ, **env}.items() if value}
    done = subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        env={**environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def needs(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"not installed here: {', '.join(missing)}")


PYPROJECT = '[project]\nname = "x"\nversion = "0.1"\nrequires-python = ">=3.8"\n[tool.poetry]\npackage-mode = false\n'
PACKAGE_JSON = '{"name": "x", "version": "1.0.0", "private": true}\n'


@pytest.mark.parametrize(
    "tool, command, files, line",
    [
        ("uv", "uv run --no-project pytets -q", {}, f"`pytets` {MISSING}: error: Failed to spawn: pytets"),
        ("poetry", "poetry run pytets -q", {"pyproject.toml": PYPROJECT}, f"`pytets` {MISSING}: Command not found"),
        ("pdm", "pdm run pytets -q", {"pyproject.toml": PYPROJECT}, f"`pytets` {MISSING}: [PdmUsageError]"),
        ("hatch", "hatch run nosuchenv:pytest", {"pyproject.toml": PYPROJECT}, f"`nosuchenv` {MISSING}"),
        ("pnpm", "pnpm exec vitst run", {"package.json": PACKAGE_JSON}, f"`vitst` {MISSING}"),
        ("yarn", "yarn vitst run", {"package.json": PACKAGE_JSON}, f'`vitst` {MISSING}: error Command "vitst"'),
        ("make", "make tset", {"Makefile": "test:\n\ttrue\n"}, f"`tset` {MISSING}: make: *** No rule"),
        ("node", "node test/nope.js", {}, "`/"),
        ("node", "node --test test/nope.js", {}, "`/"),
        ("java", "java -cp . NoSuchMain", {}, f"`NoSuchMain` {MISSING}: Error: Could not find or load main class"),
        ("cargo", "cargo tset", {}, f"`tset` {MISSING}: error: no such command: `tset`"),
    ],
)
def test_the_real_launcher_says_it_could_not_start_the_program(tmp_path: Path, tool, command, files, line):
    needs(tool)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    rustup_home = str(real_rustup_home() or "")
    exit_code, output = run(command, tmp_path, POETRY_VIRTUALENVS_IN_PROJECT="true", RUSTUP_HOME=rustup_home)
    said = reason(command, exit_code, output, None)
    assert said is not None and said.startswith(line), output
    if tool == "node":
        assert said.endswith(f"{tmp_path / 'test' / 'nope.js'}'"), said


def real_rustup_home() -> Path | None:
    """The machine's rustup home (HOME is a test's own here): next to the cargo on PATH."""
    cargo = shutil.which("cargo")
    home = Path(os.path.realpath(cargo)).parents[2] / ".rustup" if cargo else None
    return home if home and (home / "toolchains").is_dir() else None


def test_real_rustup_with_a_pinned_toolchain_that_is_not_installed(tmp_path: Path):
    needs("rustup", "cargo")
    home = real_rustup_home()
    if home is None:
        pytest.skip("no rustup home with toolchains next to cargo")
    (tmp_path / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.60.0"\n')
    exit_code, output = run("cargo test", tmp_path, RUSTUP_HOME=str(home), RUSTUP_AUTO_INSTALL="0")
    said = reason("cargo test", exit_code, output, None)
    assert said == f"{VERSION}: error: toolchain '1.60.0-x86_64-unknown-linux-gnu' is not installed", output
    assert "`rustup toolchain install`" in fix(said)


def test_real_rustup_whose_home_the_sandbox_hid(tmp_path: Path):
    needs("rustup", "cargo")
    exit_code, output = run("cargo test", tmp_path, RUSTUP_HOME=str(tmp_path / "empty"), RUSTUP_TOOLCHAIN="")
    said = reason("cargo test", exit_code, output, None)
    assert said is not None and said.startswith(f"{UNSET}: error: rustup could not choose a version of cargo"), output


def test_real_pyenv_with_a_version_that_is_not_installed(tmp_path: Path):
    needs("pyenv")
    root = Path(os.path.realpath(shutil.which("pyenv") or "")).parents[1]
    if not (root / "shims" / "python").exists():
        pytest.skip("pyenv has no shims here")
    (tmp_path / ".python-version").write_text("3.5.1\n")
    command = f"{root / 'shims' / 'python'} -m pytest -q"
    # pyenv runs a python that comes before its shims on PATH (a venv's): keep only its own
    path = f"{root / 'shims'}:{root / 'bin'}:/usr/bin:/bin"
    exit_code, output = run(command, tmp_path, PYENV_ROOT=str(root), PYENV_VERSION="", PATH=path)
    said = reason(command, exit_code, output, None)
    assert said == f"{VERSION}: pyenv: version `3.5.1' is not installed (set by {tmp_path}/.python-version)", output


# Real runners whose tests print a launcher's words: their closing line says they ran.
def test_real_go_test_whose_test_cannot_find_a_program_ran(tmp_path: Path):
    needs("go")
    (tmp_path / "go.mod").write_text("module example.com/x\n\ngo 1.19\n")
    (tmp_path / "x_test.go").write_text(
        'package x\n\nimport (\n\t"os/exec"\n\t"testing"\n)\n\n'
        'func TestTool(t *testing.T) {\n\tif err := exec.Command("gojq-not-here").Run(); err != nil {\n'
        "\t\tt.Fatal(err)\n\t}\n}\n"
    )
    exit_code, output = run("go test ./...", tmp_path, GOFLAGS="-mod=mod", GOCACHE=str(tmp_path / "cache"))
    assert exit_code == 1 and 'exec: "gojq-not-here": executable file not found in $PATH' in output, output
    assert reason("go test ./...", exit_code, output, None) is None


def test_real_node_test_whose_test_prints_command_not_found_ran(tmp_path: Path):
    needs("node")
    (tmp_path / "a.test.js").write_text(
        "const { test } = require('node:test');\nconst { execSync } = require('node:child_process');\n"
        "test('tool', () => { execSync('gojq-not-here .', { stdio: 'inherit' }); });\n"
    )
    for command in ("node --test", "node --test --test-reporter=spec"):
        exit_code, output = run(command, tmp_path)
        assert exit_code == 1 and "gojq-not-here: not found" in output, output
        assert reason(command, exit_code, output, None) is None, output


def test_real_unittest_whose_test_prints_a_launchers_words_ran(tmp_path: Path):
    (tmp_path / "test_a.py").write_text(
        "import subprocess, unittest\n\nclass T(unittest.TestCase):\n    def test_tool(self):\n"
        "        print('error: Failed to spawn: gojq')\n"
        "        subprocess.run('gojq-not-here', shell=True)\n        self.fail('no gojq')\n"
    )
    command = "python3 -m unittest -v"
    exit_code, output = run(command, tmp_path)
    assert exit_code == 1 and "gojq-not-here: not found" in output, output
    assert reason(command, exit_code, output, None) is None
