"""Did a check run at all? A check that could not run is never a verdict on the code.

Evidence first, phrases second. A check *ran* when its runner left evidence that it did:
per-test results with tests that ran (ralph's pytest report, a JUnit file, go's events,
libtest's lines, ...), or, for a check judged by its exit code, a runner's own closing line in
its output (libtest's `test result:`, go's `ok  pkg`, node's `# tests N`, `Ran N tests`, ...).
What the tests printed is theirs then: a `not found` in it says nothing about the check.

Without such evidence it *could not run* when the shell could not find or execute the command
(exit 127, 126, or the shell's, make's, env's, python's or npm's own words for it); when a
launcher or a toolchain manager could not start the program it was asked for (uv run, npx,
pnpm, yarn, poetry, pdm, hatch, pipx, make, node, java, rustup, pyenv, asdf, mise, go's
toolchain switch: each names the program, target or version it could not find, before any
output of the program's own); when the runner itself is missing (`No module named pytest`);
when pytest stopped on an internal or usage error (its exit 3 or 4), ralph's plugin failed or
was not loaded where pytest is run by name; when no test ran; or when a declared JUnit report
is missing or unreadable. A test module that fails to import is not among them: pytest ran and
reported it, and the ratchet judges it like a failing test."""

from __future__ import annotations

import re
from typing import NamedTuple

from ralph.facts.pytest_results import PLUGIN, TestResults
from ralph.isolation.sandbox import words

# What shells, make, env, python and npm say, each in its own words, when the program or script
# a check runs is missing or not executable (exit 127/126 when the shell is the check itself; a
# shell script's own name before the line number when it is a script: a git hook).
_NOT_FOUND = re.compile(
    r"^\S+: (?:line )?\d+: (?:exec: )?.+: (?:command not found|not found|Permission denied)$"
    r"|^(?:/\S+/)?(?:ba|z)?sh: \S+: (?:command not found|No such file or directory|Permission denied)$"
    r"|^(?:/\S+/)?(?:ba|da)?sh: \d+: cannot open .*: No such file$"
    r"|^make(?:\[\d+\])?: \*\*\* .*Error 12[67]$"
    r"|^(?:/usr/bin/)?env: .*: No such file or directory$"
    r"|can't open file .*: \[Errno 2\] No such file or directory$"
    r"|^npm (?:ERR!|error) [Mm]issing script"
)
_NO_RUNNER = re.compile(r"No module named '?(pytest|_pytest|py\.test)\b(?![\w.])'?")
# pytest's words when it stops before running tests: an internal error (exit 3), a usage error or
# a conftest that cannot be imported (exit 4).
_PYTEST_STOPPED = re.compile(
    r"^(INTERNALERROR>|ERROR: usage:|ERROR: file or directory not found|ImportError while loading conftest)"
)
_INTERNAL = re.compile(r"^INTERNALERROR>")
_PYTEST_SAID = re.compile(
    r"pytest: error: |^ERROR: file or directory not found|^INTERNALERROR> \w*(Error|Exception)\b|^E +\w+"
)
_ERROR_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|Exit)\b.*:|^(bwrap|error|fatal|ERROR): ", re.IGNORECASE)

# The lines runners print once their tests have run, each a whole line: evidence that the
# runner ran, whatever the code under test printed before. A runner missing here is no false
# verdict: its check falls through to the rules below, which need a launcher's own words.
_CLOSING_LINES = (
    r"test result: (?:ok|FAILED)\. \d+ passed.*",  # libtest (cargo test)
    r"(?:ok|FAIL|\?)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[(?:no test files|build failed|setup failed)\]).*",  # go test
    r"--- (?:FAIL|PASS|SKIP): \S+.*",  # go test -v
    r"[#ℹ] tests \d+",  # node's test runner (TAP, spec)
    r"=*\s*(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?),? ?)+ in [\d.]+s.*",  # pytest
    r"Ran \d+ tests?(?: in [\d.]+s|\.)",  # unittest, shunit2
    r"Test(?:s| Suites):\s+.*\d+ total",  # jest
    r"Test Files\s+.*\(\d+\)",  # vitest
    r"\d+ passing \([\d.]+m?s\)",  # mocha
    r"1\.\.\d+",  # TAP's plan
    r"(?:\w+: )?\d+ passed, \d+ failed(?:, \d+ skipped)?",  # the plain closing line, any language
    r"\d+ tests?, \d+ (?:failures?|failed)(?:, \d+ (?:skipped|not run))?(?: in [\d.]+ seconds)?",  # bats, ExUnit
    r"Tests run: \d+, Failures: \d+.*",  # Maven Surefire
    r"\d+% tests passed, \d+ tests? failed out of \d+",  # ctest
    r"Files=\d+, Tests=\d+.*",  # prove
    r"\d+ examples?, \d+ failures?.*",  # RSpec
    r"\d+ runs, \d+ assertions, \d+ failures.*",  # minitest
    r"OK \(\d+ tests?, \d+ assertions?\)|Tests: \d+, Assertions: \d+.*",  # PHPUnit
    r"Summary \[\s*[\d.]+s\] \d+ tests? run.*",  # nextest
    r"DONE \d+ tests?.*",  # gotestsum
)
_RUNNER_CLOSED = re.compile("|".join(f"(?:{line})" for line in _CLOSING_LINES))

# Why a launcher could not start the program: the heads of the reason lines, which fix() reads.
_MISSING = "was not found where the check runs (misspelled, or not installed)"
_VERSION = "the toolchain version it needs is not installed"
_UNSET = "a version manager has no version set for it"
_HIDDEN = "outside the sandbox"  # sandbox.missing_inside's words for a program laps cannot see

# Each launcher's own words, whole lines, with the program, target or version they name. Looked
# up in each tool's sources and reproduced with the tools where they install (tests say which).
_LAUNCHERS = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        (_MISSING, r"error: Failed to spawn: `?(?P<name>[^`\s]+)`?"),  # uv run
        (_MISSING, r".*\bCommand \"(?P<name>[^\"]+)\" not found\.?"),  # pnpm exec, yarn
        (_MISSING, r"Command not found: (?P<name>\S+)"),  # poetry run
        (_MISSING, r".*\bCommand '(?P<name>[^']+)' is not found in your PATH\.?"),  # pdm run
        (_MISSING, r"Unknown environment: (?P<name>\S+)"),  # hatch run ENV:…
        (_MISSING, r"'(?P<name>[^']+)' executable script not found in package .*"),  # pipx run
        (_MISSING, r".*\bBecause (?P<name>\S+) was not found in the (?:package registry|cache)\b.*"),  # uvx, pipx
        (_MISSING, r"Error installing (?P<name>\S+)\."),  # pipx run (pip's backend)
        (_MISSING, r"npm (?:error|ERR!) (?:could not determine executable to run|code (?:E404|ENOTCACHED|EAI_AGAIN))"),
        (_MISSING, r"\S*python[\d.]*: No module named (?P<name>\S+)"),  # python -m NAME
        (_MISSING, r"make(?:\[\d+\])?: \*\*\* No rule to make target [`'‘](?P<name>[^'’]+)['’].*"),
        (_MISSING, r"Could not find '(?P<name>/[^']+)'"),  # node --test FILE
        (_MISSING, r".*\bexec: \"(?P<name>[^\"]+)\": executable file not found in \$PATH.*"),  # Go's os/exec
        (_MISSING, r"Error: (?:Could not find or load main class|Unable to access jarfile) (?P<name>\S+)"),  # java
        (_MISSING, r"pyenv: (?P<name>\S+): command not found"),  # a shim of another Python version
        (_MISSING, r".*\bunknown command: (?P<name>\S+)\. Perhaps you have to reshim\?"),  # asdf
        # rustup, pyenv, nvm, fnm, asdf: "toolchain '1.70.0-…' is not installed", "version `3.9' is not installed"
        (
            _VERSION,
            r".*\b(?:toolchain|version) [`'\"‘]?(?P<name>[\w.+-]*\d[\w.+-]*)[`'\"’]?(?: of \S+)?"
            r" is not (?:yet |currently )?installed\b.*",
        ),
        (_VERSION, r"error: No (?:interpreter|Python) found for Python (?P<name>\S+).*"),  # uv --python
        # rustup installing a pinned toolchain where it cannot download it (a sandbox without network)
        (_VERSION, r"error: could not download file from '\S*/channel-rust-(?P<name>[^']+?)\.toml(?:\.sha256)?' .*"),
        (_VERSION, r"go: download (?P<name>go\d\S*)(?: for \S+)?: .*"),  # go's toolchain switch, refused
        (_VERSION, r"go: cannot find \"(?P<name>go[^\"]+)\" in PATH"),  # GOTOOLCHAIN=path
        (_VERSION, r".*\brequires go >= (?P<name>\S+) \(running go \S+; GOTOOLCHAIN=.*"),  # GOTOOLCHAIN=local
        (_VERSION, r"No preset version installed for command (?P<name>\S+)"),  # asdf before 0.16
        (_UNSET, r"(?:\w+:? )*No version (?:is )?set for (?:command|shim):? (?P<name>\S+)"),  # asdf, mise
        (_UNSET, r"error: rustup could not choose a version of (?P<name>\S+) to run\b.*"),
    )
)
# A launcher fails before the program prints anything, and the check ends there: its words are
# among the first or the last lines of the output, never only in the middle.
_EDGE_LINES = 40
# node's words for an entry script that does not exist (a module the script requires has a stack).
_NODE_ENTRY = re.compile(r"Error: Cannot find module '(?P<name>/[^']+)'")

# The class these belong to, for the launcher not listed above: a line that says it could not
# find or start a command, program, script, task, target or environment, and names one of the
# check's own words (quoted or as a whole word), the thing the user asked for.
_CANNOT_START = re.compile(
    r"failed to (?:spawn|start|exec(?:ute)?|launch)\b"
    r"|could(?: not|n't) (?:start|spawn|exec(?:ute)?|launch|determine executable)\b"
    r"|\b(?:command|program|executable|binary|script|task|target|recipe|environment|shim|phase)\b.{0,60}"
    r"(?:not found|could not be found|cannot be found|does not exist|doesn't exist"
    r"|is not (?:installed|available|defined))"
    r"|\b(?:unknown|no such|missing)(?: \w+)? "
    r"(?:command|program|executable|script|task|target|recipe|environment|phase)\b"
    r"|does not contain (?:a )?(?:recipe|task|target|script)\b"
    r"|executable file not found|no rule to make target",
    re.IGNORECASE,
)
_SHELL_WORDS = {"&&", "||", ";", "|", "&", "!", "exec", "env", "then", "do", "done", "fi"}


def reason(
    command: str,
    exit_code: int,
    output: str,
    tests: TestResults | None,
    junit_problem: str | None = None,
) -> str | None:
    """Why the check could not run, as one line with the first line of the real cause; None when it ran."""
    lines = [line.strip() for line in output.splitlines()]
    if exit_code in (126, 127):  # the shell's own word for its last command, or a shim's (pyenv, asdf)
        launched = _launched(command, output, lines)
        if launched:
            return _launcher_reason(launched, lines)
        return f"{'not found' if exit_code == 127 else 'not executable'} (exit {exit_code}): {cause(output)}"
    if junit_problem:  # a declared JUnit report: none written, or one that cannot be read
        return junit_problem
    if tests is not None and tests.plugin_errors:
        return f"ralph's pytest plugin failed: {tests.plugin_errors[0]}"
    if tests is not None and tests.counts.not_run and (exit_code == 3 or any(_INTERNAL.match(line) for line in lines)):
        # pytest itself broke before it reached them (a lap that broke pluggy breaks pytest too)
        said = [line for line in lines if _PYTEST_SAID.search(line)]
        return f"pytest stopped on an internal error: {(said[-1] if said else cause(output))[:200]}"
    if tests is not None and tests.counts.ran:
        return None  # its report shows tests ran: whatever they printed is theirs, not the shell's
    if not runner_closed(output):
        could_not = _said_it_could_not(command, exit_code, output, lines)
        if could_not:
            return could_not
    return _no_tests(command, exit_code, output, tests)


def runner_closed(output: str) -> bool:
    """Did a test runner print its closing line (its summary) anywhere in `output`?"""
    return any(_RUNNER_CLOSED.fullmatch(line.strip()) for line in output.splitlines())


def _said_it_could_not(command: str, exit_code: int, output: str, lines: list[str]) -> str | None:
    """What the runner, a launcher or the shell said when it could not start the program: read
    only where no runner left evidence that it ran."""
    missing = _NO_RUNNER.search(output)
    if missing and exit_code != 0:
        return f"the test runner is missing: No module named {missing.group(1)}"
    if f"No module named '{PLUGIN}'" in output:
        return "pytest could not import ralph's plugin: the check sets PYTHONPATH without keeping ralph's"
    if exit_code != 0:
        launched = _launched(command, output, lines)
        shell = next((index for index, line in enumerate(lines) if _NOT_FOUND.search(line)), None)
        if launched and (shell is None or launched.line_at < shell):
            return _launcher_reason(launched, lines)
        if shell is not None:
            return f"a program it runs is missing: {cause(output)}"
    if any(_PYTEST_STOPPED.match(line) for line in lines):
        said = [line for line in lines if _PYTEST_SAID.search(line)]
        return f"pytest stopped before running tests: {(said[-1] if said else cause(output))[:200]}"
    return None


class _Launched(NamedTuple):
    """A launcher's failure to start the program: which kind, what it named, where it said so."""

    kind: str
    name: str
    line_at: int


def _launched(command: str, output: str, lines: list[str]) -> _Launched | None:
    return _launcher_failed(lines, node_entry="requireStack: []" in output) or _generic_launcher_failed(command, lines)


def _launcher_failed(lines: list[str], *, node_entry: bool) -> _Launched | None:
    """The first line in which a launcher or toolchain manager says, in its own words, that it
    could not start the program."""
    for index, line in _edges(lines):
        for kind, pattern in _LAUNCHERS:
            found = pattern.fullmatch(line)
            if found:
                return _Launched(kind, found.groupdict().get("name") or "", index)
        entry = _NODE_ENTRY.fullmatch(line) if node_entry else None
        if entry:
            return _Launched(_MISSING, entry["name"], index)
    return None


def _generic_launcher_failed(command: str, lines: list[str]) -> _Launched | None:
    """A launcher not listed: a line that says it could not find or start something, and names
    a word of the check's own command (the program, script, target or environment asked for)."""
    named = _command_names(command)
    for index, line in _edges(lines):
        if not _CANNOT_START.search(line):
            continue
        # The word named last: a launcher names itself first (`go tset: unknown command`).
        found = [
            (match.start(), name)
            for name in named
            if (match := re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w/-]|\.\w)", line))
        ]
        if found:
            return _Launched(_MISSING, max(found)[1], index)
    return None


def _edges(lines: list[str]) -> list[tuple[int, str]]:
    """The first and the last lines of an output, with their indexes, in order."""
    indexes = sorted({*range(min(_EDGE_LINES, len(lines))), *range(max(0, len(lines) - _EDGE_LINES), len(lines))})
    return [(index, lines[index]) for index in indexes]


def _command_names(command: str) -> list[str]:
    """The words of a command that can name a program, script, target or environment."""
    names = []
    for word in words(command):
        if word.startswith("-") or word in _SHELL_WORDS or any(space in word for space in " \t\n"):
            continue
        if re.fullmatch(r"[A-Za-z_]\w*=.*", word):
            continue  # a variable set for the command
        for part in (word, word.removeprefix("./"), *word.split(":")):
            if len(part) > 1 and re.search(r"[A-Za-z]", part) and part not in names:
                names.append(part)
    return names


def _launcher_reason(launched: _Launched, lines: list[str]) -> str:
    """A launcher's own words. What it names may be a target, a script or an environment, not a
    program: it is never looked up on PATH (`make tset` is no sign that /usr/bin/tset is hidden)."""
    line = lines[launched.line_at][:200]
    if launched.kind != _MISSING:
        return f"{launched.kind}: {line}"
    shown = f"`{launched.name[:80]}`" if launched.name else "what it names"
    return f"{shown} {_MISSING}: {line}"


def _no_tests(command: str, exit_code: int, output: str, tests: TestResults | None) -> str | None:
    """A check that gave no per-test results where pytest runs by name, or results with no test
    that ran: nothing was judged."""
    if tests is None:
        if exit_code in (3, 4) and runs_pytest(command):
            return f"pytest ended with exit {exit_code} (internal or usage error): {cause(output)}"
        if runs_pytest(command):
            return f"pytest wrote no report (its session did not reach its end): {cause(output)}"
        return None
    if {"--co", "--collect-only"} & set(words(command)):
        return None  # a check that only collects: judged by its exit code
    if runs_pytest(command) or tests.setup is not None:
        return "pytest collected no tests (or deselected them all)"
    return "its runner reported no tests that ran (or deselected them all)"


def runs_pytest(command: str) -> bool:
    """Does the command run pytest by name (`pytest`, `py.test`, `python -m pytest`, a venv's)?"""
    return any(word.rsplit("/", 1)[-1] in ("pytest", "py.test") for word in words(command))


def cause(output: str) -> str:
    """The first line of the real cause in a command's output: the last exception or error line
    (a traceback ends with it), else the last line that says something; 200 characters at most."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith("[ralph:")]
    errors = [line for line in lines if _ERROR_LINE.search(line) or _NOT_FOUND.search(line)]
    found = errors[-1] if errors else lines[-1] if lines else "no output"
    return found[:200]


_FIXES = (
    (
        _HIDDEN,
        "let laps see it: add the folder that holds it to `sandbox.readable` in ralph.yaml, "
        "or install it where the check runs, with `setup:`",
    ),
    (
        _MISSING,
        "check the name in ralph.yaml's command (a typo, a script, target or environment that does not exist); "
        "if it is right, install it where the check runs, with `setup:`",
    ),
    (
        _VERSION,
        "install that version where the check runs (`rustup toolchain install`, `pyenv install`, `asdf install`, "
        "`uv python install`), or pin the project to one that is installed (rust-toolchain.toml, .python-version, "
        ".tool-versions, go.mod's go and toolchain lines)",
    ),
    (
        _UNSET,
        "pin a version in the project (rust-toolchain.toml, .tool-versions, mise.toml, .python-version), or set a "
        "default (`rustup default stable`, `asdf set --home`, `mise use -g`, `pyenv global`); a default kept in your "
        "home is hidden from the sandbox unless ralph.yaml's `sandbox` lets laps read it",
    ),
    (
        "the test runner is missing",
        "install the project's test dependencies where the check runs, with `setup:` (`pip install -e '.[test]'`, "
        "`pip install --group test`, `uv sync`): pip only warns when an extra does not exist",
    ),
    ("could not import ralph's plugin", "where the check sets PYTHONPATH, keep ralph's: PYTHONPATH=src:$PYTHONPATH"),
    ("plugin failed", "a bug in ralph: please report it with the check's output"),
    (
        "JUnit",
        "make the runner write its report where `junit:` says, inside the workspace "
        "(docs/trust.md: Per-test results from other runners)",
    ),
    (
        "jest report",
        "make jest write its report where `jest:` says: `mkdir -p reports && npx jest --ci --json "
        "--outputFile=reports/jest.json` (jest makes no folder)",
    ),
    (
        "its output holds no",
        "check that the command runs the runner and prints its results (`go test -json`, `cargo test`, "
        "`python -m unittest -v`), or set `results:` to what it prints",
    ),
    ("collected no tests", "point the command at the tests (`ralph doctor` runs each check once)"),
    ("reported no tests", "point the command at the tests (`ralph doctor` runs each check once)"),
    ("not found", "install it with `setup:`, or fix the command in ralph.yaml"),
    ("not executable", "make it executable in the commit, or fix the command in ralph.yaml"),
    ("is missing", "install it with `setup:`, or fix the command in ralph.yaml"),
)


def fix(why: str) -> str:
    """The likely fix for a check that could not run for `why`, read from ralph's own words at
    its head (before the first ": "), never from the output quoted after them."""
    head = why.split(": ", 1)[0]
    return next(
        (advice for words, advice in _FIXES if words in head),
        "run the command by hand in a fresh clone to see why (`ralph doctor` runs each check as a lap would)",
    )
