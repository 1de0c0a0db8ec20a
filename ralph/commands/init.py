"""`ralph init`: a commented ralph.yaml, TODO.md and PROGRESS.md; never overwrites."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ralph import git, todo
from ralph.commands.init_checks import Check, cargo_check, go_check, runs_unittest, unittest_check
from ralph.commands.init_node import JUNIT_NODE as JUNIT_NODE  # where the docs' and tests' form is
from ralph.commands.init_node import node_checks
from ralph.commands.init_scope import proposed, yaml_lines
from ralph.commands.init_sources import json_mapping, own_commands
from ralph.commands.init_sources import text as read_text
from ralph.errors import Exit
from ralph.facts.presets import PRESETS
from ralph.show import ui

CONFIG_TEMPLATE = """\
# ralph.yaml — how `ralph run` works on this repository. Reference: ralph's docs/configuration.md.
goal: "{placeholder_goal}"      # required

agent:
  kind: command                  # command: any agent CLI; openai: the built-in agent
  preset: {preset:<22} # {presets} (docs/agents.md: Presets)
  # command: "my-agent --yes"    # or any command, run in the lap's work tree, prompt on stdin
  # args: "--model sonnet"       # appended to the preset's command
  # kind: openai
  # model: gpt-4o-mini           # any OpenAI-compatible endpoint (Ollama, vLLM, LM Studio, …)
  # base_url: http://127.0.0.1:11434/v1
  # api_key_env: OPENAI_API_KEY  # the NAME of the variable that holds the key

{environment}
{scope}
limits:
  max_laps: 10                   # the fuse
  stagnation: 3                  # stop after this many laps in a row without progress
  lap_timeout: 1800              # seconds for the agent part of one lap
  check_timeout: 900             # seconds for each check
  max_minutes: null              # wall clock for one `ralph run`

files:
  todo: TODO.md
  progress: PROGRESS.md

commit:
  verify: true                   # run this repository's git hooks on lap commits

sandbox: auto                    # agents, hooks and checks in bubblewrap (Linux): auto | required | off
# Sandboxed, each phase of a lap gets a fresh private HOME, so the agent logs in by
#   {login}
# in your environment, or a copy of its login file alone (docs/agents.md: Logins in the sandbox).
# A path in sandbox.writable is the laps' to write, and stays written: never list one that
# anything outside the sandbox runs (docs/sandbox.md).
# sandbox:
#   mode: auto
#   network: true                # false: the checks run without network

# mcp:                           # MCP servers' read-only tools for the built-in agent (docs/agents.md: External tools)
#   from: .mcp.json              # the servers a .mcp.json declares; or servers: {{name: {{command, args}}}}
"""

TODO_TEMPLATE = f"""\
# TODO

One checkbox per slice of work a single lap can finish and verify. Laps tick
what they finish; ralph stops when every box is ticked and every check passes.

- [ ] {todo.PLACEHOLDER_ITEMS[0]}
- [ ] {todo.PLACEHOLDER_ITEMS[1]}
"""

GENERIC_ENVIRONMENT = """\
checks:                          # the repository's own checks; done = every one exits 0
  - "python -m pytest -q"
# setup:                         # commands that build what the checks need inside the lap workspace
#   - "make deps"                # (docs/environments.md)
"""

# What `ralph init` suggests, by the file that tells what the repository is: the environment is
# built inside the lap workspace (an editable install in your own venv would test your checkout).
# The checks come from init_checks and init_node, in their per-test form.
ENVIRONMENTS = [
    ("uv.lock", "uv.lock: a uv project", ["uv sync --frozen"]),  # made to fit it: uv_setup
    ("pyproject.toml", "pyproject.toml: a Python project", []),  # made to fit it: python_setup
    (
        "requirements.txt",
        "requirements.txt: a Python project",
        ["python -m venv .venv && .venv/bin/pip install -q -r requirements.txt"],
    ),
    ("package.json", "package.json: a Node project", []),  # made to fit it: node_setup
    ("Cargo.toml", "Cargo.toml: a Rust crate (target/ is kept between laps)", []),
    ("go.mod", "go.mod: a Go module (Go's caches are outside the tree)", []),
]
# pytest needs nothing more: ralph's plugin gives every pytest session's per-test results.
PYTEST_CHECKS = {
    "uv.lock": ["uv run --frozen pytest -q"],
    "pyproject.toml": [".venv/bin/python -m pytest -q"],
    "requirements.txt": [".venv/bin/python -m pytest -q"],
}


TEST_NAMES = ("test", "tests", "testing", "dev")  # the extra or dependency group that brings pytest
# Pinned test requirements, as pip-tools lays them out (the Pallets projects: requirements/tests.txt).
TEST_REQUIREMENTS = tuple(f"{folder}{name}.txt" for name in TEST_NAMES for folder in ("requirements/", "requirements-"))


def _project(top: Path) -> dict:
    try:
        return tomllib.loads(read_text(top / "pyproject.toml"))
    except ValueError:
        return {}


def _table(data: object, *keys: str) -> dict:
    """`data[key][key]…` where each is a table; {} wherever one is missing or not a table (the
    file is the user's, and may hold anything)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def _test_group(project: dict) -> str | None:
    """The dependency group (PEP 735) that holds the tests' tools, by its usual names."""
    groups = _table(project, "dependency-groups")
    return next((name for name in TEST_NAMES if name in groups), None)


def python_setup(top: Path, *, pytest: bool = True) -> str:
    """A venv in the workspace with the project and what its tests need: its test dependency
    group or extra where it has one, or its pinned test requirements, else pytest (pip only
    warns about a missing extra, and the checks then cannot run); a unittest project needs none."""
    project = _project(top)
    extras = _table(project, "project", "optional-dependencies")
    venv = "python -m venv .venv && .venv/bin/pip install -q"
    group = _test_group(project)
    if group:  # pip reads groups from 25.1 on
        return f"{venv} -U pip && .venv/bin/pip install -q -e . --group {group}"
    extra = next((name for name in TEST_NAMES if name in extras), None)
    if extra:
        return f"{venv} -e '.[{extra}]'"
    pinned = next((path for path in TEST_REQUIREMENTS if (top / path).is_file()), None)
    if pinned:
        return f"{venv} -e . -r {pinned}"
    return f"{venv} -e . pytest" if pytest else f"{venv} -e ."


def uv_setup(top: Path) -> str:
    """`uv sync` brings the `dev` group alone: a test group of another name is asked for."""
    group = _test_group(_project(top))
    return "uv sync --frozen" + (f" --group {group}" if group and group != "dev" else "")


def node_setup(top: Path) -> str:
    """`npm ci` installs the committed lock file exactly, and fails without one: a library often
    keeps its lock file out of git (jshttp's do), and then gets `npm install`."""
    locks = git.run(top, "ls-files", "--", "package-lock.json", "npm-shrinkwrap.json", check=False).output
    return "npm ci" if locks.strip() else "npm install --no-audit --no-fund"


def _checks(top: Path, marker: str) -> list[Check]:
    """The per-test form of the repository's checks, from its own commands where it has them."""
    own = own_commands(top)
    if marker == "package.json":
        return node_checks(json_mapping(top / "package.json"), own)
    if marker == "go.mod":
        return [go_check(own)]
    if marker == "Cargo.toml":
        return [cargo_check(own)]
    if runs_unittest(top, own):
        return [unittest_check(top, own, "uv run --frozen python" if marker == "uv.lock" else ".venv/bin/python")]
    return [Check(_command(command)) for command in PYTEST_CHECKS[marker]]


def _setup_for(top: Path, marker: str, setup: list[str], checks: list[Check]) -> list[str]:
    """Made to fit the project: its lock file, its test group or extra; pytest by name only where pytest runs."""
    if marker == "package.json":
        return [node_setup(top)]
    pytest = not any("unittest" in check.item for check in checks)
    if marker == "pyproject.toml":
        return [python_setup(top, pytest=pytest)]
    return [uv_setup(top)] if marker == "uv.lock" else setup


def environment(top: Path) -> tuple[str, list[str]]:
    """The `setup:` and `checks:` sections for what the repository looks like, and a line for
    each check that gives no per-test results (said on the terminal too)."""
    for marker, found, setup in ENVIRONMENTS:
        if (top / marker).is_file():
            checks = _checks(top, marker)
            setup = _setup_for(top, marker, setup, checks)
            lines = [f"# found {found}; ralph's suggestion, to check before the first run"]
            if setup:
                lines.append("setup:                           # builds the environment inside the lap workspace")
                lines += [f"  - {_command(command)}" for command in setup]
            lines.append("checks:                          # the repository's own checks; done = every one exits 0")
            lines += [line for check in checks for line in check.yaml()]
            warnings = [
                f"ralph.yaml: the check {check.item} gives no per-test results: {check.unjudged}"
                for check in checks
                if check.unjudged
            ]
            return "\n".join(lines) + "\n", warnings
    return GENERIC_ENVIRONMENT, []


def _command(line: str) -> str:
    """A YAML list item's text, with a trailing `# comment` kept outside the quotes."""
    command, _, comment = line.partition("   # ")
    return f'"{command}"' + (f"   # {comment}" if comment else "")


def _login(preset: str) -> str:
    """How the preset's tool logs in inside the sandbox: by its variables, not the user's HOME."""
    chosen = PRESETS[preset]
    shown = ", ".join(chosen.credentials[:3]) + (", …" if len(chosen.credentials) > 3 else "")
    return chosen.login or f"its variables ({shown})"


PROGRESS_TEMPLATE = """\
# Progress

Handoff between laps, rewritten by each lap: done, next, tried and failed.
"""


def _say_scope(scope: list[str]) -> None:
    if scope:
        ui.say(f"scope    {ui.safe(', '.join(scope))} (and TODO.md, PROGRESS.md): what laps may change")
    else:
        ui.say("scope    none proposed (no source folder found): laps may change every path but those never in scope")


def init(cwd: Path, preset: str = "claude") -> Exit:
    top = git.open_repo(cwd).top
    names = " | ".join(PRESETS)
    suggested, warnings = environment(top)
    scope = proposed(top)
    config = CONFIG_TEMPLATE.format(
        environment=suggested,
        scope=yaml_lines(scope),
        preset=preset,
        presets=names,
        login=_login(preset),
        placeholder_goal=todo.PLACEHOLDER_GOAL,
    )
    for name, text in (("ralph.yaml", config), ("TODO.md", TODO_TEMPLATE), ("PROGRESS.md", PROGRESS_TEMPLATE)):
        path = top / name
        if path.exists():
            ui.say(f"kept     {name} (already there)")
        else:
            path.write_text(text, encoding="utf-8")
            ui.say(f"wrote    {name}")
            for warning in warnings if name == "ralph.yaml" else []:
                ui.warn(warning)
            if name == "ralph.yaml":
                _say_scope(scope)
    ui.say("next: edit ralph.yaml and TODO.md (or `ralph plan` writes TODO.md), commit them, then `ralph run`")
    return Exit.DONE
