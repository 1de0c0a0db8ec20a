"""Lap environments: setup commands, ignored files kept in the reused workspace, `copy`, and
checks that run the user's own checkout instead of the lap's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers.repos import PY, SANDBOX_MODES, git, make_repo
from helpers.running import lap_notes, ralph, ralph_workspaces, snapshot

TODO = "# TODO\n- [ ] First\n- [ ] Second\n- [ ] Third\n"

# Lap 1 ticks an item; lap 2 changes a setup input; lap 3 breaks it; lap 4 finishes.
COUNTING_AGENT = r"""
import os, pathlib
lap = int(os.environ["RALPH_LAP"])
todo = pathlib.Path("TODO.md")
def tick(item):
    todo.write_text(todo.read_text().replace(f"- [ ] {item}", f"- [x] {item}"))
pathlib.Path("notes.txt").write_text(f"lap {lap}\n")
if lap == 1:
    tick("First")
elif lap == 2:
    pathlib.Path("requirements.txt").write_text("one\ntwo\n")
    tick("Second")
elif lap == 3:
    pathlib.Path("requirements.txt").write_text("one\ntwo\nbroken\n")
    tick("Third")
else:
    tick("Third")
"""
COUNTING_SETUP = (
    "if grep -q broken requirements.txt; then echo 'no such package: broken' >&2; exit 1; fi; "
    'echo made > .made-by-setup; echo "setup for lap $RALPH_LAP"'
)


def config(agent: str, checks: Sequence[str | dict[str, object]], **sections: object) -> str:
    data = {"goal": "Finish the job", "agent": {"kind": "command", "command": agent}, "checks": checks}
    return json.dumps({**data, **sections})  # JSON is YAML


def expected_red(command: str) -> dict[str, object]:
    """An exit-code check that fails on the base commit: marked so, or the run would not start."""
    return {"run": command, "expect_red": True}


def run_dir(repo: Path, run: str) -> Path:
    return repo / ".git" / "ralph" / run


def setup_ran(repo: Path, run: str) -> list[str]:
    """The baseline's and laps' folders holding a setup log: where setup ran."""
    return sorted(path.parent.name for path in run_dir(repo, run).glob("*/setup-1.log"))


def agent_command(tmp_path: Path, source: str) -> str:
    """The command running the agent script `source` (written beside the repository)."""
    (tmp_path / "agent.py").write_text(source)
    return f"{PY} {tmp_path / 'agent.py'}"


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_setup_runs_once_and_again_only_after_a_lap_changes_a_setup_input(tmp_path: Path, sandbox: str):
    agent = agent_command(tmp_path, COUNTING_AGENT)
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": TODO.replace("Second", "Second (may change: requirements.txt)"),  # the user's grant
            "PROGRESS.md": "",
            "requirements.txt": "one\n",
            ".gitignore": ".made-by-setup\n",
            # The check needs what setup made: laps without a setup of their own still have it.
            "ralph.yaml": config(agent, ["test -f .made-by-setup"], setup=[COUNTING_SETUP], sandbox=sandbox),
        },
    )
    before = snapshot(repo)
    result = ralph(repo, "run", "--name", "t")
    assert result.returncode == 0, result.stdout + result.stderr
    notes = lap_notes(repo, "t")
    assert [note["status"] for note in notes] == ["green", "green", "red", "green"]
    assert notes[2]["reason"].startswith("setup: setup `if grep -q broken")
    assert "no such package: broken" in notes[2]["output_tail"]
    # Setup ran for the baseline, for lap 2's changed input, for lap 3's broken one, and for lap 4,
    # which starts again from lap 2's commit after lap 3's setup: never for lap 1.
    ran = setup_ran(repo, "t")
    assert ran == ["baseline", "lap-2", "lap-3", "lap-4"]
    assert (run_dir(repo, "t") / "lap-4" / "setup-1.log").read_text().strip() == "setup for lap 4"
    assert notes[3]["prepare_s"] > 0  # lap 4 set the workspace up again before it started
    # What setup made is no part of any lap's commit; the user's checkout is untouched.
    assert ".made-by-setup" not in git(repo, "ls-tree", "-r", "--name-only", "ralph/t")
    assert snapshot(repo) == before
    assert ralph_workspaces(repo) == []


def test_setup_failing_on_the_base_commit_is_one_clear_error(tmp_path: Path):
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": TODO,
            "ralph.yaml": config(
                "true", ["true"], setup=["echo resolving; echo 'E: lockfile out of date' >&2; exit 3"]
            ),
        },
    )
    before = snapshot(repo)
    result = ralph(repo, "run")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == (
        "ralph: setup `echo resolving; echo 'E: lockfile out of date' >&2; exit 3` failed (exit 3); its output ends:"
    )
    assert "E: lockfile out of date" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(repo) == before
    assert ralph_workspaces(repo) == []


COPY_AGENT = r"""
import os, pathlib, subprocess
lap = int(os.environ["RALPH_LAP"])
assert pathlib.Path(".env").read_text() == "TOKEN=local\n", "the copied file is there, as the user has it"
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ] First", "- [x] First", 1) if lap == 1 else
                todo.read_text().replace("- [ ] Second", "- [x] Second").replace("- [ ] Third", "- [x] Third"))
pathlib.Path("work.txt").write_text(f"lap {lap}\n")
pathlib.Path(".env").write_text("TOKEN=changed-by-the-lap\n")
if lap == 2:
    pathlib.Path(".gitignore").write_text("!.env\n")  # un-ignored, to have it staged
pathlib.Path("config").mkdir(exist_ok=True)
pathlib.Path("config/app.env").write_text("changed too\n")
# An agent that commits it on purpose, in its own git dir: ralph's commit holds the files, not its.
subprocess.run(["git", "add", "-f", ".env"], check=False)
"""


def test_copied_files_reach_every_lap_as_the_user_has_them_and_are_never_committed(tmp_path: Path):
    agent = agent_command(tmp_path, COPY_AGENT)
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": TODO.replace("Second", "Second (may change: .gitignore)"),  # the user's grant
            ".gitignore": ".env\n",
            "ralph.yaml": config(
                agent,
                ["grep -q TOKEN=local .env", "grep -q user config/app.env"],
                copy=[".env", "config/app.env"],
            ),
        },
    )
    (repo / ".env").write_text("TOKEN=local\n")  # ignored, as a .env usually is
    (repo / "config").mkdir()
    (repo / "config" / "app.env").write_text("user\n")  # not even ignored (so --allow-dirty)
    result = ralph(repo, "run", "--name", "c", "--allow-dirty")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [note["status"] for note in lap_notes(repo, "c")] == ["green", "green"]
    for lap in (1, 2):
        committed = git(repo, "ls-tree", "-r", "--name-only", f"refs/ralph/c/laps/{lap}")
        assert ".env" not in committed.split() and "config/app.env" not in committed.split()
    assert (repo / ".env").read_text() == "TOKEN=local\n"


def test_copy_of_a_tracked_or_missing_file_is_refused(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"TODO.md": TODO, "ralph.yaml": config("true", ["true"], copy=["TODO.md"])})
    result = ralph(repo, "run")
    assert result.returncode == 1 and "copy: TODO.md is tracked by git" in result.stderr
    repo = make_repo(tmp_path / "other", {"TODO.md": TODO, "ralph.yaml": config("true", ["true"], copy=[".env"])})
    result = ralph(repo, "run")
    assert result.returncode == 1 and "copy: .env is not in your work tree" in result.stderr
    (repo / "ralph.yaml").write_text(config("true", ["true"], copy=["../secrets"]))
    git(repo, "commit", "-qam", "escape")
    result = ralph(repo, "run")
    assert result.returncode == 1 and "copy: '../secrets' must be a path inside the repository" in result.stderr


# In strict mode a lap that edits what setup made (its judge) cannot pass on the edit.
TAMPERING_AGENT = r"""
import pathlib
pathlib.Path(".tools/judge.py").write_text("def verdict(): return True\n")
pathlib.Path("planted.py").write_text("")  # an ignored file of the lap's
pathlib.Path("work.txt").write_text("a claim of work\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


@pytest.mark.parametrize("strict", [True, False])
def test_strict_keeps_what_setup_made_and_nothing_a_lap_changed_in_it(tmp_path: Path, strict: bool):
    agent = agent_command(tmp_path, TAMPERING_AGENT)
    setup = "mkdir -p .tools && printf 'import calc\\ndef verdict(): return calc.ok()\\n' > .tools/judge.py"
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Make calc.ok true\n",
            "calc.py": "def ok():\n    return False\n",
            ".gitignore": ".tools/\nplanted.py\n",
            "ralph.yaml": config(
                agent,
                [
                    expected_red(
                        f'{PY} -c \'import sys; sys.path[:0] = [".tools", "."]; import judge; assert judge.verdict()\''
                    )
                ],
                setup=[setup],
                strict=strict,
                limits={"max_laps": 1},
            ),
        },
    )
    result = ralph(repo, "run", "--name", "s")
    note = lap_notes(repo, "s")[0]
    if strict:  # setup ran again before the checks: the judge is setup's, not the lap's
        assert result.returncode == 3 and note["checks"][0]["exit_code"] == 1, result.stdout + result.stderr
        assert "planted.py" in note["removed_before_checks"]
        assert setup_ran(repo, "s") == ["baseline", "lap-1"]
    else:  # without strict, ignored files are the lap's to change (docs/environments.md: strict)
        assert result.returncode == 0 and note["checks"][0]["exit_code"] == 0, result.stdout + result.stderr


# A src-layout package, installed in the user's own virtualenv with `pip install -e .`.
SRC_LAYOUT = {
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0"\n[tool.setuptools.packages.find]\nwhere = ["src"]\n',
    "src/calc/__init__.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
    ".gitignore": ".venv/\n*.egg-info/\n__pycache__/\n",
    "TODO.md": "- [ ] Fix calc.add\n",
}
FIXING_AGENT = r"""
import pathlib
source = pathlib.Path("src/calc/__init__.py")
source.write_text(source.read_text().replace("a - b", "a + b"))
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


def make_venv(where: str) -> str:
    """A shell command making a virtualenv at `where` (relative to where it runs) that sees this
    interpreter's packages (pytest, pip; through a .pth, whether or not this one is a venv), then
    installing the project there with `pip install -e .`: setuptools comes from the registry."""
    packages = ":".join(path for path in sys.path if path.endswith("-packages"))
    site = f"{where}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    return (
        f"{PY} -m venv --without-pip {where} && echo {packages} | tr : '\\n' > {site}/outer.pth && "
        f"{where}/bin/python -m pip install -q --no-deps -e ."
    )


def test_a_check_that_imports_the_users_checkout_is_named_and_setup_in_the_workspace_fixes_it(tmp_path: Path):
    agent = agent_command(tmp_path, FIXING_AGENT)
    repo = make_repo(tmp_path / "repo", SRC_LAYOUT)
    subprocess.run(make_venv(str(tmp_path / "users-venv")), shell=True, cwd=repo, check=True, capture_output=True)
    users_python = tmp_path / "users-venv" / "bin" / "python"
    (repo / "ralph.yaml").write_text(config(agent, [f"{users_python} -m pytest -q"], limits={"max_laps": 1}))
    git(repo, "add", "ralph.yaml")
    git(repo, "commit", "-qm", "ralph")
    result = ralph(repo, "run", "--name", "user-venv")
    # The lap fixed calc in its workspace, but the check imported the user's, still broken.
    assert result.returncode == 3, result.stdout + result.stderr
    warning = f"ran code from your own work tree, not the lap's: {repo}/src/calc/__init__.py"
    assert result.stderr.count(warning) == 1, result.stderr
    assert "setup:" in result.stderr

    # A setup that installs with the user's own venv would put the lap's code there: said at start.
    setup = f"{users_python} -m pip install -q -e ."
    (repo / "ralph.yaml").write_text(config(agent, ["true"], setup=[setup], sandbox="off"))
    git(repo, "commit", "-qam", "setup into the user's venv")
    result = ralph(repo, "run", "--name", "into-user-venv", "--max-laps", "1")
    assert f"runs {users_python}, of a virtualenv outside the lap workspace" in result.stderr

    # docs/environments.md's Python setup: a venv made inside the lap workspace, the check run from it.
    checks = [".venv/bin/python -m pytest -q"]
    (repo / "ralph.yaml").write_text(config(agent, checks, setup=[make_venv(".venv")]))
    git(repo, "commit", "-qam", "setup in the workspace")
    result = ralph(repo, "run", "--name", "own-venv")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "own work tree" not in result.stderr
    assert ".venv" not in git(repo, "ls-tree", "-r", "--name-only", "ralph/own-venv")


# Lap 1 (red) makes setup plant a file no .gitignore ignores; the laps after it are honest.
PLANTING_AGENT = r"""
import os, pathlib
if os.environ["RALPH_LAP"] == "1":
    pathlib.Path("build.sh").write_text("echo building; echo cheat > cheat.txt\n")
    pathlib.Path("a.py").write_text("raise SystemExit(1)\n")
else:
    todo = pathlib.Path("TODO.md")
    todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
    pathlib.Path("notes.txt").write_text("honest\n")
"""


@pytest.mark.parametrize("strict", [False, True])
def test_what_a_red_laps_setup_planted_is_gone_before_the_next_lap(tmp_path: Path, strict: bool):
    agent = agent_command(tmp_path, PLANTING_AGENT)
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Write notes\n",
            "build.sh": "echo building\n",
            "a.py": "",
            "b.py": "import os\nassert os.path.exists('cheat.txt')\n",
            "ralph.yaml": config(
                agent,
                [f"{PY} a.py", expected_red(f"{PY} b.py")],
                setup=["sh build.sh"],
                setup_inputs=["build.sh"],
                strict=strict,
                limits={"max_laps": 2},
            ),
        },
    )
    result = ralph(repo, "run", "--name", "p")
    notes = lap_notes(repo, "p")
    assert [note["status"] for note in notes] == ["red", "green"], result.stdout + result.stderr
    assert notes[1]["checks"][1]["exit_code"] == 1  # b.py: no cheat.txt for the honest lap
    assert result.returncode == 3


# Strict: what the lap plants where ignore rules let it hide, under names not even UTF-8.
HIDING_AGENT = r"""
import os, pathlib
os.makedirs("build", exist_ok=True)
open(b"\xff_planted", "w").write("planted")
open(b"src/\xfe_planted", "w").write("planted")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
pathlib.Path("notes.txt").write_text("claimed\n")
"""


def test_strict_deletes_empty_folders_and_files_named_in_no_encoding(tmp_path: Path):
    agent = agent_command(tmp_path, HIDING_AGENT)
    probe = "import os, sys; sys.exit(0 if os.path.exists({}) else 1)"
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Do it\n",
            ".gitignore": "build/\n*_planted\n",
            "src/keep.py": "",
            "ralph.yaml": config(
                agent,
                [
                    expected_red(f'{PY} -c "{probe.format(name)}"')
                    for name in ("'build'", "b'\\xff_planted'", "b'src/\\xfe_planted'")
                ],
                strict=True,
                limits={"max_laps": 1},
            ),
        },
    )
    result = ralph(repo, "run", "--name", "h")
    note = lap_notes(repo, "h")[0]
    assert [check["exit_code"] for check in note["checks"]] == [1, 1, 1], result.stdout + result.stderr
    assert result.returncode == 3


def test_a_lap_that_leaves_no_room_for_a_copied_file_is_red(tmp_path: Path):
    agent = agent_command(
        tmp_path,
        "import pathlib, shutil\nshutil.rmtree('conf')\npathlib.Path('conf').write_text('a file now')\n"
        "todo = pathlib.Path('TODO.md')\ntodo.write_text(todo.read_text().replace('- [ ]', '- [x]'))\n",
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Do it\n",
            ".gitignore": ".env\n",
            "conf/settings.py": "",
            "ralph.yaml": config(agent, ["true"], copy=["conf/.env"], limits={"max_laps": 1}),
        },
    )
    (repo / "conf" / ".env").write_text("TOKEN=1\n")
    result = ralph(repo, "run", "--name", "room")
    note = lap_notes(repo, "room")[0]
    assert note["status"] == "red" and note["reason"].startswith("copy: conf/.env cannot be copied in")
    assert result.returncode == 3, result.stdout + result.stderr


# Strict: lap 1 (red) changes what setup built from; setup runs again on its commit before its
# checks. Lap 2 (honest) must get setup's build of the green commit, not of lap 1's.
REBUILDING_AGENT = r"""
import os, pathlib
if os.environ["RALPH_LAP"] == "1":
    pathlib.Path("src.txt").write_text("lap 1's source\n")
    os.remove(".built")
    pathlib.Path("a.py").write_text("raise SystemExit(1)\n")
else:
    todo = pathlib.Path("TODO.md")
    todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
    pathlib.Path("notes.txt").write_text("honest\n")
"""


def test_strict_sets_up_the_green_commit_again_after_a_red_laps_own_setup(tmp_path: Path):
    agent = agent_command(tmp_path, REBUILDING_AGENT)
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Write notes\n",
            "src.txt": "green source\n",
            "a.py": "",
            ".gitignore": ".built\n",
            "ralph.yaml": config(
                agent,
                [f"{PY} a.py", "cmp src.txt .built"],
                setup=["cp src.txt .built"],
                strict=True,
                limits={"max_laps": 2},
            ),
        },
    )
    result = ralph(repo, "run", "--name", "rebuilt")
    notes = lap_notes(repo, "rebuilt")
    assert [note["status"] for note in notes] == ["red", "green"], result.stdout + result.stderr
    assert [check["exit_code"] for check in notes[1]["checks"]] == [0, 0] and result.returncode == 0
    assert setup_ran(repo, "rebuilt") == ["baseline", "lap-1", "lap-2"]


@pytest.mark.parametrize("strict", [False, True])
def test_a_red_laps_file_in_the_way_of_a_copied_file_does_not_stop_the_run(tmp_path: Path, strict: bool):
    agent = agent_command(
        tmp_path,
        "import os, pathlib, shutil\n"
        "if os.environ['RALPH_LAP'] == '1':\n"
        "    shutil.rmtree('.secrets'); pathlib.Path('.secrets').write_text('in the way')\n"
        "todo = pathlib.Path('TODO.md')\ntodo.write_text(todo.read_text().replace('- [ ]', '- [x]'))\n"
        "pathlib.Path('notes.txt').write_text(os.environ['RALPH_LAP'])\n",
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Do it\n",
            ".gitignore": ".secrets\n",
            "ralph.yaml": config(
                agent,
                ["grep -q 1 .secrets/token"],
                copy=[".secrets/token"],
                strict=strict,
                limits={"max_laps": 2},
            ),
        },
    )
    (repo / ".secrets").mkdir()
    (repo / ".secrets" / "token").write_text("1\n")
    result = ralph(repo, "run", "--name", "way")
    # strict (the default) deletes the lap's file in the way before the checks, as any it made
    expected = ["green"] if strict else ["red", "green"]
    assert [note["status"] for note in lap_notes(repo, "way")] == expected, result.stdout + result.stderr
    assert result.returncode == 0


def test_setup_that_rewrites_a_tracked_file_is_undone_for_laps_and_checks(tmp_path: Path):
    agent = agent_command(
        tmp_path,
        "import pathlib\npathlib.Path('deps.txt').write_text('one\\ntwo\\n')\n"
        "todo = pathlib.Path('TODO.md')\ntodo.write_text(todo.read_text().replace('- [ ]', '- [x]'))\n",
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Add a dependency\n",
            "deps.txt": "one\n",
            "lock.json": "{}\n",
            "ralph.yaml": config(
                agent,
                [f"{PY} -c \"assert open('lock.json').read() == '{{}}\\n'\""],
                setup=["echo '// rewritten' >> lock.json"],
                setup_inputs=["/deps.txt"],  # from the top: a leading slash
                limits={"max_laps": 1},
            ),
        },
    )
    result = ralph(repo, "run", "--name", "lock")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("setup changed files git tracks (lock.json)") == 1
    assert setup_ran(repo, "lock") == ["baseline", "lap-1"]
    assert git(repo, "show", "ralph/lock:lock.json") == "{}"


# Lap 1 hides a module behind a rule of its own while setup runs again before its checks (a setup
# input changed); lap 2 lifts the rule and imports it: no commit holds the module, so no later
# lap's tree does either.
UNIGNORING_AGENT = r"""
import os, pathlib
todo = pathlib.Path("TODO.md")
if os.environ["RALPH_LAP"] == "1":
    pathlib.Path(".gitignore").write_text(".venv/\nhelper.py\n")
    pathlib.Path("requirements.txt").write_text("# touched\n")
    pathlib.Path("helper.py").write_text("OK = 1\n")
    todo.write_text(todo.read_text().replace("- [ ] First", "- [x] First"))
else:
    pathlib.Path(".gitignore").write_text(".venv/\n")
    pathlib.Path("app.py").write_text("import helper\n")
    todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


def test_a_laps_ignored_file_never_counts_as_setups(tmp_path: Path):
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] First\n- [ ] Second\n",
            "app.py": "raise SystemExit('no helper')\n",
            "requirements.txt": "",
            ".gitignore": ".venv/\n",
            "ralph.yaml": config(
                agent_command(tmp_path, UNIGNORING_AGENT),
                [expected_red(f"{PY} app.py")],
                setup=["echo setup ran"],
                limits={"max_laps": 2},
            ),
        },
    )
    result = ralph(repo, "run", "--name", "u")
    notes = lap_notes(repo, "u")
    # Lap 1's hidden helper.py was deleted, not kept as an ignored file: lap 2's import of it fails.
    assert "helper.py" not in git(repo, "ls-tree", "-r", "--name-only", "refs/ralph/u/laps/2").split()
    assert notes[1]["checks"][0]["exit_code"] == 1, result.stdout + result.stderr


def test_folders_nested_deeper_than_python_recurses_do_not_crash_the_run(tmp_path: Path):
    nest = "import os, pathlib\nos.mkdir('.venv')\nos.chdir('.venv')\nfor _ in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\n"
    tick = "os.chdir(os.environ['RALPH_WORKTREE'])\ntodo = pathlib.Path('TODO.md')\ntodo.write_text(todo.read_text().replace('- [ ]', '- [x]'))\n"
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] Do it\n",
            ".gitignore": ".venv/\n",
            "ralph.yaml": config(
                agent_command(tmp_path, nest + tick + "pathlib.Path('work.txt').write_text('w')\n"),
                ["true"],
                strict=True,
                limits={"max_laps": 1},
            ),
        },
    )
    result = ralph(repo, "run", "--name", "deep")
    assert result.returncode == 0 and "internal error" not in result.stderr, result.stdout + result.stderr
    assert lap_notes(repo, "deep")[0]["removed_before_checks"] == [".venv"]
    assert ralph_workspaces(repo) == []


# Lap 1 writes ignore rules of its own: a new docs/.gitignore, and lines in the root one that
# hide the module its code imports and the build it made. Lap 2 writes the code where the
# commit holds it, and finds pytest's cache, which ignores itself, left by lap 1's checks.
IGNORING_AGENT = r"""
import os, pathlib
todo = pathlib.Path("TODO.md")
if os.environ["RALPH_LAP"] == "1":
    pathlib.Path("docs").mkdir()
    pathlib.Path("docs/.gitignore").write_text("_build/\n")
    pathlib.Path(".gitignore").write_text(pathlib.Path(".gitignore").read_text() + "helper.py\ndist/\n")
    pathlib.Path("helper.py").write_text("def double(x):\n    return 2 * x\n")
    pathlib.Path("dist").mkdir()
    pathlib.Path("dist/bundle.js").write_text("built\n")
    pathlib.Path("app.py").write_text("from helper import double\n")
    todo.write_text(todo.read_text().replace("- [ ] a", "- [x] a"))
else:
    pathlib.Path("app.py").write_text("def double(x):\n    return 2 * x\n")
    todo.write_text(todo.read_text().replace("- [ ] b", "- [x] b"))
"""


def test_what_the_laps_own_ignore_rules_hide_is_in_no_commit_and_not_judged(tmp_path: Path):
    agent = agent_command(tmp_path, IGNORING_AGENT)
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] a (may change: .gitignore, docs/.gitignore)\n- [ ] b\n",
            ".gitignore": "*.log\n",
            "tests/test_app.py": "def test_app():\n    import app\n    assert app.double(2) == 4\n",
            "app.py": "raise SystemExit('not yet')\n",
            # pytest's cache on: it makes .pytest_cache/ with a .gitignore of its own saying `*`
            "ralph.yaml": config(agent, [f"{PY} -m pytest -q"], limits={"max_laps": 2}),
        },
    )
    result = ralph(repo, "run", "--name", "ign")
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = lap_notes(repo, "ign")
    # Lap 1's module is in no commit, so the checks did not find it either: its test still fails.
    assert first["status"] == "green" and first["done"] is False
    assert "tests/test_app.py::test_app" in first["checks"][0]["tests"]["failing_ids"]
    lap_one = git(repo, "ls-tree", "-r", "--name-only", first["commit"]).split("\n")
    assert "helper.py" not in lap_one and "dist/bundle.js" not in lap_one
    assert "docs/.gitignore" in lap_one  # its rules are committed
    assert git(repo, "show", f"{first['commit']}:.gitignore") == "*.log\nhelper.py\ndist/"
    assert second["status"] == "green" and second["done"] is True
    for lap in (first, second):
        files = git(repo, "show", "--name-only", "--format=", lap["commit"]).split("\n")
        assert not [path for path in files if path.startswith(".pytest_cache")], files


# An honest lap's rules: a folder that ignores all but its modules, and a rule taken out so a
# log fixture can be committed.
ALLOWING_AGENT = r"""
import pathlib
pathlib.Path("plugins").mkdir()
pathlib.Path("plugins/.gitignore").write_text("*\n!*.py\n")
pathlib.Path("plugins/extra.py").write_text("VALUE = 42\n")
pathlib.Path("plugins/scratch.tmp").write_text("x\n")
pathlib.Path(".gitignore").write_text("")
pathlib.Path("fixture.log").write_text("a fixture\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


def test_an_honest_laps_own_ignore_rules_keep_what_they_let_in(tmp_path: Path):
    agent = agent_command(tmp_path, ALLOWING_AGENT)
    check = f"{PY} -c 'import plugins.extra'"
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] a (may change: .gitignore, plugins/.gitignore)\n",
            ".gitignore": "*.log\n",
            "ralph.yaml": config(agent, [expected_red(check)], limits={"max_laps": 1}),
        },
    )
    result = ralph(repo, "run", "--name", "allow")
    assert result.returncode == 0, result.stdout + result.stderr
    tree = git(repo, "ls-tree", "-r", "--name-only", "ralph/allow").split("\n")
    assert "plugins/extra.py" in tree and "fixture.log" in tree and "plugins/scratch.tmp" not in tree


# Issue 38: a `.pth` the agent drops into the venv setup made runs at every start of its Python,
# the checks' included: here it mends the function the lap did not fix.
PTH_AGENT = r"""
import glob, pathlib
site = pathlib.Path(glob.glob(".venv/lib/python*/site-packages")[0])
(site / "zz_mend.pth").write_text("import calc; calc.add = lambda a, b: a + b\n")
pathlib.Path("NOTES.md").write_text("fixed calc.add\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


def test_a_pth_the_agent_drops_into_setups_venv_is_gone_before_the_checks_by_default(tmp_path: Path):
    agent = agent_command(tmp_path, PTH_AGENT)
    checks = [".venv/bin/python -m pytest -q -p no:cacheprovider"]
    repo = make_repo(
        tmp_path / "repo",
        {**SRC_LAYOUT, "ralph.yaml": config(agent, checks, setup=[make_venv(".venv")], limits={"max_laps": 1})},
    )
    result = ralph(repo, "run", "--name", "pth")
    note = lap_notes(repo, "pth")[0]
    assert note["checks"][0]["tests"]["failing_ids"] == ["tests/test_calc.py::test_add"], result.stdout + result.stderr
    assert note["done"] is False and result.returncode == 3
    site = next(path for path in note["removed_before_checks"] if path.endswith("zz_mend.pth"))
    assert site.startswith(".venv/lib/python")


# The user's .gitignore ignores tests/calc.py; pytest puts tests/ first on sys.path (rootdir
# import mode, no __init__.py), so a module there is what `import calc` finds.
SHADOW_FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
    ".gitignore": "tests/calc.py\n__pycache__/\n",
    "TODO.md": "- [ ] Fix calc.add\n",
}
SHADOW_AGENT = r"""
import pathlib
pathlib.Path("tests/calc.py").write_text("def add(a, b):\n    return a + b\n")
pathlib.Path("NOTES.md").write_text("fixed calc.add\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


def test_an_ignored_module_that_shadows_the_package_is_deleted_before_the_checks(tmp_path: Path):
    agent = agent_command(tmp_path, SHADOW_AGENT)
    checks = [f"{PY} -m pytest -q -p no:cacheprovider"]
    repo = make_repo(tmp_path / "repo", {**SHADOW_FILES, "ralph.yaml": config(agent, checks, limits={"max_laps": 1})})
    result = ralph(repo, "run", "--name", "shadow")
    note = lap_notes(repo, "shadow")[0]
    assert note["checks"][0]["tests"]["failing_ids"] == ["tests/test_calc.py::test_add"], result.stdout + result.stderr
    assert note["done"] is False and result.returncode == 3
    assert "tests/calc.py" in note["removed_before_checks"]


# An honest agent runs the tests as it works, leaving pytest's caches and bytecode behind.
CACHING_AGENT = r"""
import compileall, os, pathlib, subprocess, sys
first = subprocess.run([sys.executable, "-m", "pytest", "-q"], capture_output=True)
assert first.returncode == 1, first.stdout
source = pathlib.Path("calc.py")
source.write_text(source.read_text().replace("a - b", "a + b"))
assert subprocess.run([sys.executable, "-m", "pytest", "-q"]).returncode == 0
compileall.compile_dir(".", quiet=1)  # as any tool would, where the lap's environment writes no bytecode
os.makedirs(".pytest_cache/v/cache", exist_ok=True)
pathlib.Path(".pytest_cache/v/cache/lastfailed").write_text("{}")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""


def test_an_honest_lap_that_leaves_caches_is_green_by_default(tmp_path: Path):
    agent = agent_command(tmp_path, CACHING_AGENT)
    files = {**SHADOW_FILES, ".gitignore": "__pycache__/\n"}
    checks = [f"{PY} -m pytest -q"]  # pytest's cache on, in the checks too
    repo = make_repo(tmp_path / "repo", {**files, "ralph.yaml": config(agent, checks, limits={"max_laps": 2})})
    result = ralph(repo, "run", "--name", "caches")
    assert result.returncode == 0, result.stdout + result.stderr
    note = lap_notes(repo, "caches")[0]
    assert note["status"] == "green" and note["done"] is True
    removed = note["removed_before_checks"]  # the agent's; the baseline's own caches, unchanged, stay
    assert any(path.startswith(".pytest_cache/") for path in removed), removed
    assert any(path.startswith("tests/__pycache__") for path in removed), removed


# A check that keeps a cache in an ignored folder, as cargo's target/ is: what the baseline's
# checks made (the base commit's own code) is kept while no lap changes it, so the laps' checks
# do not build everything again; lap 2 breaks add and touches the cache to pass on it.
CACHED_CHECK = """\
import pathlib, sys
import calc
cache = pathlib.Path("build/verdict.txt")
if cache.exists():
    print("cached:", cache.read_text())
    sys.exit(0 if cache.read_text() == "pass" else 1)
cache.parent.mkdir(exist_ok=True)
cache.write_text("pass" if calc.add(2, 3) == 5 else "fail")
print("computed:", cache.read_text())
sys.exit(0 if cache.read_text() == "pass" else 1)
"""
CACHE_AGENT = r"""
import os, pathlib
lap = os.environ["RALPH_LAP"]
pathlib.Path("NOTES.md").write_text(f"lap {lap}\n")
if lap == "2":
    calc = pathlib.Path("calc.py")
    calc.write_text(calc.read_text().replace("a + b", "a - b"))
    pathlib.Path("build/verdict.txt").write_text("pass")  # the same bytes, written again
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace(f"- [ ] Step {lap}", f"- [x] Step {lap}"))
"""


def test_what_the_baselines_checks_made_is_kept_until_a_lap_changes_it(tmp_path: Path):
    agent = agent_command(tmp_path, CACHE_AGENT)
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "check.py": CACHED_CHECK,
            ".gitignore": "build/\n__pycache__/\n",
            "TODO.md": "- [ ] Step 1\n- [ ] Step 2\n",
            "ralph.yaml": config(agent, [f"{PY} check.py"], limits={"max_laps": 2}),
        },
    )
    result = ralph(repo, "run", "--name", "cache")
    first, second = lap_notes(repo, "cache")
    assert first["status"] == "green" and "cached: pass" in first["checks"][0]["output_tail"], first
    assert "build/verdict.txt" not in first["removed_before_checks"]
    assert second["status"] == "red" and "computed: fail" in second["checks"][0]["output_tail"], second
    assert "build/verdict.txt" in second["removed_before_checks"]
    assert result.returncode == 3, result.stdout + result.stderr


# What a lap's checks leave in the tree, unignored: from the second lap on, strict mode's one
# listing of untracked files deletes it in place of a `git clean` (Workspace.checkout).
SEEING_AGENT = r"""
import os, pathlib
lap = os.environ["RALPH_LAP"]
seen = [name for name in ("check_made.txt", "check_dir", "__pycache__/stale.pyc") if os.path.lexists(name)]
pathlib.Path(f"seen-{lap}.txt").write_text(f"{seen}\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""
LITTERING_CHECK = (
    "import os, pathlib; pathlib.Path('check_made.txt').write_text('x'); os.makedirs('check_dir', exist_ok=True); "
    "os.makedirs('__pycache__', exist_ok=True); pathlib.Path('__pycache__/stale.pyc').write_bytes(b'x')"
)


def test_what_a_laps_checks_leave_is_gone_before_the_next_lap_and_in_no_commit(tmp_path: Path):
    agent = agent_command(tmp_path, SEEING_AGENT)
    todo = "- [ ] one\n- [ ] two\n- [ ] three\n"
    checks = [f'{PY} -c "{LITTERING_CHECK}"']
    repo = make_repo(tmp_path / "repo", {"TODO.md": todo, "ralph.yaml": config(agent, checks)})
    result = ralph(repo, "run", "--name", "litter")
    assert result.returncode == 0, result.stdout + result.stderr
    notes = lap_notes(repo, "litter")
    assert [note["status"] for note in notes] == ["green"] * 3
    for number, note in enumerate(notes, 1):
        files = git(repo, "ls-tree", "-r", "--name-only", note["commit"]).split("\n")
        assert not [path for path in files if path.startswith(("check_", "__pycache__"))], files
        assert git(repo, "show", f"{note['commit']}:seen-{number}.txt") == "[]"
