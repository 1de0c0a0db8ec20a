"""What a lap may change: the run's scope, the paths never in scope, and the one form of a grant
(docs/trust.md, "What a lap cannot do"). Written as an attacker would: each lap of a run tries one
way past them (a red lap leaves the green line where it was), then an honest lap goes green."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, write
from helpers.running import ralph
from test_trust import FILES, TICK_MUL, attacks, edited, laps, make, reconfigure, red_reasons, written

from ralph.config import DEFAULT_PROTECT
from ralph.facts import check_files
from ralph.facts import paths as paths_module
from ralph.verdict import grants
from ralph.verdict.guard import GuardReport
from ralph.verdict.scope import Scope

NEVER = "never in scope (what runs, installs or configures the code and its checks): "
# The check's Makefile reads a .env, as many do, for its settings.
MAKEFILE = "-include .env\ntest:\n\t@$(WRAP) grep -q 'def add' calc.py\n"
PRE_COMMIT = (
    "repos:\n- repo: local\n  hooks:\n  - id: lint\n    name: lint\n    entry: scripts/lint.sh\n"
    "    language: script\n    pass_filenames: false\n    always_run: true\n"
)
CHANGE_HOW_A_CHECK_RUNS = [  # (what the lap does, the path its red reason names)
    (written(".env", "WRAP = true\n"), ".env (added)"),  # a wrapper the protected Makefile runs
    (  # npm puts node_modules/.bin first on PATH for the package's scripts
        "os.makedirs('node_modules/.bin')\n"
        + written("node_modules/.bin/node", "#!/bin/sh\nexit 0\n")
        + "\nos.chmod('node_modules/.bin/node', 0o755)",
        "node_modules/.bin/node (added)",
    ),
    (  # the check puts lib/ on PYTHONPATH: Python runs it at start, before any plugin
        "os.makedirs('lib')\n" + written("lib/sitecustomize.py", "import os\n"),
        "lib/sitecustomize.py (added)",
    ),
    (written("scripts/lint.sh", "#!/bin/sh\nexit 0\n"), "scripts/lint.sh (modified)"),  # a pre-commit local hook's
    ("os.makedirs('data')\n" + written("data/evil.pth", "import os\n"), "data/evil.pth (added)"),
    (  # a wheel of the lap's own, installed by the next setup
        edited("requirements.txt", "pytest\n", "pytest\n./wheels/calc_fast-0-py3-none-any.whl\n"),
        "requirements.txt (modified)",
    ),
]


def test_files_that_change_how_a_check_runs_are_never_in_scope(tmp_path: Path):
    cheats = [cheat + TICK_MUL for cheat, _ in CHANGE_HOW_A_CHECK_RUNS]
    repo = attacks(tmp_path, cheats, TICK_MUL.lstrip())
    write(
        repo,
        {
            "Makefile": MAKEFILE,
            ".pre-commit-config.yaml": PRE_COMMIT,
            "scripts/lint.sh": "#!/bin/sh\ngrep -q 'def add' calc.py\n",
            "requirements.txt": "pytest\n",
        },
    )
    (repo / "scripts/lint.sh").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "how the checks run")
    pytest_check = f"PYTHONPATH=lib:$PYTHONPATH {PY} -m pytest -q -p no:cacheprovider"
    reconfigure(repo, checks=[pytest_check, "make test", f"{PY} -m pre_commit run --all-files"])
    ralph(repo, "run", "--name", "t")
    reasons = red_reasons(repo, len(cheats))
    for reason, (_, named) in zip(reasons, CHANGE_HOW_A_CHECK_RUNS, strict=True):
        assert NEVER + named in reason and f'"(may change: {named.split(" (")[0]})"' in reason, reason
    honest = laps(repo)[len(cheats)]
    assert honest["status"] == "green", honest["reason"]


WEAKEN = edited("tests/test_calc.py", "assert mul(2, 3) == 6", "assert True")
# Wordings that granted the change when permission was read from prose; and an item about another
# file of the same name, whose grant names that file only.
NOT_GRANTS = [
    "Fix mul in calc.py; don’t edit tests/test_calc.py",
    "Fix mul in calc.py, no edits to tests/test_calc.py",
    "Fix mul in calc.py and avoid changing tests/test_calc.py",
    "Fix mul in calc.py; you shouldn't modify tests/test_calc.py",
    "Add test_calc.py to examples/ (may change: examples/test_calc.py)",
]


def test_no_wording_grants_and_a_grant_names_its_path_only(tmp_path: Path):
    cheats = [f"{WEAKEN}\ntick({item!r})" for item in NOT_GRANTS]
    # A grant in an item the lap itself wrote grants nothing.
    added = "- [ ] Wire the test wrapper (may change: .env)"
    cheats.append(f"{written('.env', 'WRAP = true')}\nedit('TODO.md', '# TODO\\n', '# TODO\\n{added}\\n')" + TICK_MUL)
    todo = FILES["TODO.md"] + "".join(f"- [ ] {item}\n" for item in NOT_GRANTS)
    repo = attacks(tmp_path, cheats, todo=todo)
    ralph(repo, "run", "--name", "t")
    reasons = red_reasons(repo, len(cheats))
    for reason in reasons[:-1]:
        assert "protected files changed: tests/test_calc.py (modified)" in reason, reason
    assert NEVER + ".env (added)" in reasons[-1], reasons[-1]
    assert all(note["granted"] == [] for note in laps(repo))


@pytest.mark.parametrize(
    "item, path, granted",
    [
        ("Drop test_add (may change: tests/test_calc.py)", "tests/test_calc.py", True),
        ("Rewrite the tests (may change: tests/)", "tests/test_calc.py", True),
        ("Rewrite the tests (may change: tests/**/test_*.py, docs/)", "tests/unit/test_x.py", True),
        ("Add test_calc.py to examples/ (may change: examples/test_calc.py)", "tests/test_calc.py", False),
        ("Set it up (may change: test_calc.py)", "tests/test_calc.py", False),  # the root's file only
        ("Rewrite tests/test_calc.py for the v2 client", "tests/test_calc.py", False),
        ("Remove the obsolete test_add from tests/test_calc.py", "tests/test_calc.py", False),
        ("(may change: tests/test_calc.py) is what I would write", "tests/test_calc.py", False),  # not at the end
        # What git's glob syntax cannot read names the literal path it spells, and stops nothing.
        ("Rename it (may change: tests/[z-a].py)", "tests/[z-a].py", True),
        ("Rename it (may change: tests/[z-a].py)", "tests/a.py", False),
        ("Rename it (may change: tests/[)", "tests/[", True),
        ("Rename it (may change: tests/[)", "tests/test_calc.py", False),
    ],
)
def test_only_the_fixed_syntax_at_an_items_end_grants(item: str, path: str, granted: bool):
    assert GuardReport(grants=grants.all_of([item])).allows(path) is granted


@pytest.mark.parametrize(
    "section, pattern", [("scope", "tests/[z-a].py"), ("scope", "src/["), ("protect", "#tests"), ("protect", "x\\")]
)
def test_a_glob_git_cannot_read_in_ralph_yaml_is_refused_in_one_line(tmp_path: Path, section: str, pattern: str):
    repo = make(tmp_path, TICK_MUL)
    reconfigure(repo, **{section: [pattern]})
    done = ralph(repo, "run", "--name", "t")
    assert done.returncode == 1, done.stderr  # bad input (docs/commands.md: exit codes)
    (line,) = done.stderr.strip().splitlines()
    assert f"{section}: {pattern!r} is not a glob as git reads one" in line
    assert git(repo, "for-each-ref", "refs/ralph", "refs/heads/ralph") == ""


def test_a_grant_of_the_users_base_item_holds_for_every_lap(tmp_path: Path):
    item = "Drop the obsolete test_add (may change: tests/test_calc.py)"
    drop = edited("tests/test_calc.py", "def test_add():\n    assert add(2, 3) == 5\n", "")
    # The lap does not tick the item that grants: the user's grant holds all the same.
    repo = make(tmp_path, drop + TICK_MUL, todo=FILES["TODO.md"] + f"- [ ] {item}\n")
    ralph(repo, "run", "--name", "t")
    (lap,) = laps(repo)
    assert lap["status"] == "green", lap["reason"]
    assert lap["granted"] == ["tests/test_calc.py"] and lap["protected_touched"] == []


def test_a_change_outside_the_runs_scope_is_red_naming_it(tmp_path: Path):
    cheats = [
        written("notes.txt", "mul is done\n") + TICK_MUL,
        # No glob opens what is never in scope, not even one that names it.
        written("sitecustomize.py", "import os\n") + TICK_MUL,
    ]
    honest = written(
        "tests/test_more.py", "from calc import mul\n\n\ndef test_mul_zero():\n    assert mul(0, 3) == 0\n"
    )
    repo = attacks(tmp_path, cheats, honest + TICK_MUL)
    reconfigure(repo, scope=["calc.py", "tests/", "sitecustomize.py"])
    ralph(repo, "run", "--name", "t")
    outside, never = red_reasons(repo, 2)
    assert (
        'outside the run\'s scope: notes.txt (added) — grant it with "(may change: notes.txt)" at the end of a '
        "TODO item of yours, or widen scope: in ralph.yaml" in outside
    ), outside
    assert NEVER + "sitecustomize.py (added)" in never, never
    assert laps(repo)[2]["status"] == "green", laps(repo)[2]["reason"]


SRC_LAYOUT = {
    "src/calc/__init__.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0"\n\n[tool.pytest.ini_options]\npythonpath = ["src"]\n',
    "README.md": "# calc\n",
    "docs/index.md": "# calc\n\nadd\n",
    ".gitignore": "__pycache__/\n",
}
DIV = (
    'import pathlib\npathlib.Path("src/calc/div.py").write_text("def div(a, b):\\n    return a / b\\n")\n'
    'pathlib.Path("tests/test_div.py").write_text("from calc.div import div\\n\\n\\ndef test_div():\\n'
    '    assert div(6, 3) == 2\\n")\n'
    'pathlib.Path("README.md").write_text("# calc\\n\\nadd and div\\n")\n'
    'pathlib.Path("docs/index.md").write_text("# calc\\n\\nadd, div\\n")\n'
    'p = pathlib.Path("TODO.md"); p.write_text(p.read_text().replace("- [ ]", "- [x]"))\n'
)


@pytest.mark.parametrize("scope", [None, ["src/calc/", "tests/", "docs/", "README.md"]])
def test_an_honest_lap_of_a_src_layout_repository_is_green(tmp_path: Path, scope: list[str] | None):
    agent = tmp_path / "agent.py"
    agent.write_text(DIV)
    config = {
        "goal": "Add div",
        "agent": {"kind": "command", "command": f"{PY} {agent}"},
        "checks": [f"{PY} -m pytest -q -p no:cacheprovider"],
        "limits": {"max_laps": 1},
        **({"scope": scope} if scope is not None else {}),
    }
    repo = make_repo(tmp_path / "repo", SRC_LAYOUT, config=config, todo=["Add div, with its test and docs"])
    result = ralph(repo, "run", "--name", "t")
    (lap,) = laps(repo)
    assert lap["status"] == "green" and lap["done"], lap["reason"]
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_honest_re_indent_that_ticks_its_item_is_work(tmp_path: Path):
    """A README.rst code block indented so it renders: whitespace to git, the item's whole work."""
    item = "Indent the example in README.rst so it renders as code"
    readme = "calc\n====\n\nExample::\n\nadd(2, 3)\n"
    body = f"{edited('README.rst', 'add(2, 3)', '    add(2, 3)')}\ntick({item!r})"
    repo = make(tmp_path, body, todo=f"# TODO\n- [ ] {item}\n")
    write(repo, {"README.rst": readme})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "readme")
    ralph(repo, "run", "--name", "t")
    (lap,) = laps(repo)
    assert lap["status"] == "green", lap["reason"]
    assert lap["tests"]["newly_passing"] == []


@pytest.mark.parametrize(
    "commands, configs",
    [
        (["pre-commit run --all-files"], [".pre-commit-config.yaml"]),
        ([f"{PY} -m pre_commit run -a", "make test"], [".pre-commit-config.yaml"]),
        (["uv run pre-commit run --config ci/hooks.yaml"], ["ci/hooks.yaml"]),
        (["sh -c 'pre-commit run --config=ci/hooks.yaml && make'"], ["ci/hooks.yaml"]),
        (["make test", "pytest -q"], []),
    ],
)
def test_the_pre_commit_configurations_a_check_runs_are_read_off_it(commands: list[str], configs: list[str]):
    assert check_files.pre_commit_configs(commands) == configs


def test_what_a_local_hook_runs_is_never_in_scope():
    config = (
        "repos:\n- repo: https://github.com/x/y\n  rev: v1\n  hooks: [{id: remote}]\n"
        "- repo: local\n  hooks:\n"
        "  - {id: a, name: a, entry: scripts/lint.sh, language: script}\n"
        "  - {id: b, name: b, entry: python tools/check.py --strict, language: system}\n"
        "  - {id: c, name: c, entry: make, args: [lint], language: system}\n"
    )
    runs = Scope(commands=("pre-commit run -a",)).run_files(lambda path: config)
    assert {"/scripts/lint.sh", "/tools/check.py", "Makefile"} <= set(runs)
    assert check_files.local_hook_files("repos: [") == check_files.local_hook_files("- not a mapping") == []


@pytest.mark.parametrize(
    "path, why",
    [
        ("src/calc/core.py", ""),
        ("tests/test_new.py", ""),
        ("tests/conftest.py", ""),  # a new one is a new test file
        ("tests/unit/conftest.py", ""),
        ("conftest.py", "never"),  # it sets up every test
        ("src/calc/conftest.py", "never"),
        ("docs/index.md", ""),
        ("README.rst", ""),
        ("src/calc/.env", "never"),
        ("vendor/golang.org/x/mod/module.go", "never"),
        (".github/workflows/ci.yml", "never"),
        ("CLAUDE.md", "never"),
        ("packages/web/package.json", "never"),
        ("uv.lock", "never"),
        ("GNUmakefile", "never"),
    ],
)
def test_what_is_never_in_scope_wherever_it_sits(path: str, why: str):
    assert Scope().why_not(path, (), tuple(DEFAULT_PROTECT)) == why
    assert Scope(globs=("**",)).why_not(path, (), tuple(DEFAULT_PROTECT)) == why  # no glob opens one


def test_a_manifest_that_breaks_setup_is_named_before_the_setup_it_broke(tmp_path: Path):
    """The checks cannot run when setup fails on the lap's manifest: the reason says first what
    the lap may not change, the cause, not only that setup failed."""
    cheat = edited("requirements.txt", "pytest\n", "pytest\nno-such-package\n") + TICK_MUL
    repo = attacks(tmp_path, [cheat], TICK_MUL.lstrip())
    write(repo, {"requirements.txt": "pytest\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "requirements")
    refuse = "import sys; sys.exit('no-such-package' in open('requirements.txt').read())"
    reconfigure(repo, setup=[f'{PY} -c "{refuse}"'])
    ralph(repo, "run", "--name", "t")
    (reason,) = red_reasons(repo, 1)
    assert reason.startswith(NEVER + "requirements.txt (modified)") and "setup: " in reason, reason


def test_a_report_the_agent_left_by_running_the_checks_itself_is_no_part_of_its_commit(tmp_path: Path):
    """Agents run the repository's checks before they stop: the report a check writes into the
    tree (`junit:`) is the check's, so it is never committed, and never outside the lap's scope."""
    check = f"mkdir -p reports && {PY} -m pytest -q -p no:cacheprovider --junitxml=reports/junit.xml"
    run_it = f"\nimport subprocess\nsubprocess.run({check!r}, shell=True)"
    repo = attacks(tmp_path, [], TICK_MUL.lstrip() + run_it)
    reconfigure(repo, checks=[{"run": check, "junit": "reports/junit.xml"}], scope=["calc.py", "tests/"])
    ralph(repo, "run", "--name", "t")
    (lap,) = laps(repo)
    assert lap["status"] == "green", lap["reason"]
    assert "reports/junit.xml" not in git(repo, "ls-tree", "-r", "--name-only", "ralph/t")


def test_grants_compiled_once_match_what_gits_glob_syntax_matches():
    """Plain paths are looked up in a set, not compiled by pathspec: for every mix of plain paths,
    globs, negations and odd names, they name exactly the paths pathspec's patterns name."""
    names = ["a", "b.py", ".git", "c", ".", "..", "a b", "*", "**", "x~", "é", "_", "a.", "[ab]", "", "a\n"]
    generated = random.Random(41)

    def path(most: int) -> str:
        return "/".join(generated.choice(names) for _ in range(generated.randint(1, most)))

    patterns = [
        generated.choice(["", "", "", "/", "./", "!"]) + path(3) + generated.choice(["", "", "/"]) for _ in range(400)
    ]
    paths = [
        generated.choice(["", "", "/", "./"]) + path(4) + generated.choice(["", "", "/", "\n"]) for _ in range(400)
    ]
    for _ in range(300):
        chosen = tuple(generated.sample(patterns, generated.randint(1, 6)))
        compiled, each_time = grants.matcher(chosen), paths_module.anchored(chosen).match_file
        for candidate in generated.sample(paths, 40):
            assert compiled(candidate) == each_time(candidate), (chosen, candidate)
