"""Attacks on what a lap's tree holds before its checks (issue 41, third pass): strict mode's one
listing in place of `git clean`, the lap's own .gitignore rules found by the safety walk, and
sandboxed commands ended by their PID namespace alone."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers.repos import PY, SANDBOX_MODES, make_repo
from helpers.running import lap_notes, ralph


def config(agent: str, checks: list, **sections: object) -> str:
    data = {"goal": "Finish the job", "agent": {"kind": "command", "command": agent}, "checks": checks}
    return json.dumps({**data, **sections})


def agent_command(tmp_path: Path, source: str) -> str:
    (tmp_path / "agent.py").write_text(source)
    return f"{PY} {tmp_path / 'agent.py'}"


TICK = """
pathlib.Path("work.txt").write_text(os.environ.get("RALPH_LAP", "?"))
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""

# --- 3. a sandboxed lap's stragglers -----------------------------------------------------------

DAEMON_AGENT = (
    r"""
import os, pathlib, signal, sys, time
out = pathlib.Path(os.environ["OUT"])
def daemon(tag):
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    import ctypes  # its environment's bytes overwritten where /proc/PID/environ reads them
    libc = ctypes.CDLL(None)
    block = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
    n = 0
    while block[n]:
        ctypes.memset(block[n], ord("x"), len(ctypes.string_at(block[n])))
        n += 1
    os.closerange(0, 256)
    time.sleep(4)
    (out / f"late-{tag}").write_text("alive")
    os._exit(0)
daemon("agent-" + os.environ["RALPH_LAP"])
os.system("nohup sh -c 'sleep 4; echo x > \"$OUT/late-nohup\"' >/dev/null 2>&1 &")
"""
    + "import os, pathlib\n"
    + TICK
)


@pytest.mark.parametrize("sandbox", ["auto"])  # (unsandboxed, the sweep ends them: tests/test_sandbox.py)
def test_a_sandboxed_laps_daemons_do_not_outlive_its_phase(tmp_path: Path, sandbox: str):
    out = tmp_path / "out"
    out.mkdir()
    agent = agent_command(tmp_path, DAEMON_AGENT)
    daemon_check = (
        f'{PY} -c "import os,time,signal\nif os.fork()==0:\n os.setsid()\n signal.signal(signal.SIGTERM,signal.SIG_IGN)\n'
        f" time.sleep(4)\n open(os.environ['OUT']+'/late-check','w').write('x')\n os._exit(0)\""
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "TODO.md": "- [ ] one\n",
            ".gitignore": "late-hook\n",
            "ralph.yaml": config(
                agent,
                [daemon_check, "sh -c 'sleep 5; ! ls late-hook 2>/dev/null'"],
                setup=[daemon_check.replace("late-check", "late-setup")],
                env={"pass": ["OUT"]},
                sandbox={"mode": sandbox, "writable": [str(out)]},
            ),
        },
    )
    hook = repo / ".git" / "hooks" / "pre-commit"
    # (a hook's sandbox cannot write `out`: its straggler writes into the tree, where the check looks)
    hook_daemon = daemon_check.replace("os.environ['OUT']+'/late-check'", "'late-hook'")
    hook.write_text("#!/bin/sh\necho hook ran\n" + hook_daemon + "\n")
    hook.chmod(0o755)
    result = ralph(repo, "run", "--name", "daemons", env={"OUT": str(out)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert lap_notes(repo, "daemons")[0]["status"] == "green"
    time.sleep(5)
    left = sorted(os.listdir(out))
    assert left == [], left
    assert "hook ran" in (repo / ".git/ralph/daemons/baseline/hook-pre-commit.log").read_text()


# --- 1. what one listing must delete before the checks -----------------------------------------

# Lap 1's checks leave an ignored module; lap 2's committed test imports it: it must fail.
LEAVING_CHECK = """\
import os, pathlib, sys
lap = os.environ.get("RALPH_LAP", "0")
if lap == "1":
    pathlib.Path("build").mkdir(exist_ok=True)
    pathlib.Path("build/helper.py").write_text("VALUE = 42\\n")
if os.path.exists("use_helper.py"):
    sys.path.insert(0, "build")
    import use_helper
print("ok")
"""
LEAVING_AGENT = r"""
import os, pathlib
lap = os.environ["RALPH_LAP"]
pathlib.Path("NOTES.md").write_text(f"lap {lap}\n")
if lap == "2":
    pathlib.Path("use_helper.py").write_text("import helper\nassert helper.VALUE == 42\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_an_ignored_module_a_laps_checks_left_is_gone_before_the_next_checks(tmp_path: Path, sandbox: str):
    notes = two_laps(tmp_path, LEAVING_AGENT, LEAVING_CHECK, "build/\n", sandbox)
    assert notes[1]["status"] == "red", notes[1]


def two_laps(tmp_path: Path, agent: str, check: str, ignored: str, sandbox: str) -> list[dict]:
    return laps_of(tmp_path, agent, check, {".gitignore": ignored}, laps=2, sandbox=sandbox)[1]


def laps_of(
    tmp_path: Path, agent: str, check: str, files: dict[str, str], *, laps: int, sandbox: str = "auto"
) -> tuple[Path, list[dict]]:
    """The repository and the notes of a run of `laps` laps of the `agent` script, checked by
    the `check` script, in a repository holding `files` too."""
    todo = "".join(f"- [ ] item {number}\n" for number in range(1, laps + 1))
    config_text = config(
        agent_command(tmp_path, agent), [f"{PY} check.py"], limits={"max_laps": laps}, sandbox={"mode": sandbox}
    )
    repo = make_repo(tmp_path / "repo", {"check.py": check, "TODO.md": todo, "ralph.yaml": config_text, **files})
    ralph(repo, "run", "--name", "laps")
    return repo, lap_notes(repo, "laps")


# The baseline's checks compile calc.py to bytecode Python runs without looking at the source
# (unchecked-hash), in an ignored __pycache__ (base_made); lap 1 breaks calc.add.
BYTECODE_CHECK = (
    "sh -c 'if [ ! -e build.stamp ]; then "
    + PY
    + " -m compileall -q --invalidation-mode unchecked-hash pkg/calc.py && touch build.stamp; fi; "
    + PY
    + ' -c "import sys; from pkg import calc; sys.exit(calc.add(2, 3) != 5)"\''
)
BREAKING_AGENT = r"""
import os, pathlib
calc = pathlib.Path("pkg/calc.py")
calc.write_text(calc.read_text().replace("a + b", "a - b"))
for name in os.environ.get("PLANT", "").split():
    pathlib.Path(name).write_text("home = /usr\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""


@pytest.mark.parametrize(
    ("plant", "strict"),
    [
        ("", True),
        ("", False),  # (the clean's way to it; strict has its listing's)
        ("pkg/__pycache__/pyvenv.cfg", True),  # ignored, so in no commit: deleted before the bytecode is looked at
        ("pkg/pyvenv.cfg", True),  # committed (granted): a lap's to write, so no virtualenv's mark
        ("pkg/pyvenv.cfg", False),
    ],
)
def test_the_baselines_stale_bytecode_does_not_run_in_place_of_a_laps_source(tmp_path: Path, plant: str, strict: bool):
    agent = agent_command(tmp_path, BREAKING_AGENT.replace('os.environ.get("PLANT", "")', repr(plant)))
    repo = make_repo(
        tmp_path / "repo",
        {
            "pkg/__init__.py": "",
            "pkg/calc.py": "def add(a, b):\n    return a + b\n",
            ".gitignore": "__pycache__/\nbuild.stamp\n",
            # The user lets the lap change a pyvenv.cfg there (never in scope otherwise).
            "TODO.md": "- [ ] one (may change: pkg/pyvenv.cfg)\n",
            "ralph.yaml": config(agent, [BYTECODE_CHECK], limits={"max_laps": 1}, strict=strict),
        },
    )
    ralph(repo, "run", "--name", "stale")
    (note,) = lap_notes(repo, "stale")
    assert note["checks"][0]["exit_code"] != 0, note
    assert note["status"] == "red", note


# --- 2. the lap's own .gitignore rules ---------------------------------------------------------

HIDING_AGENT = r"""
import os, pathlib
folders = FOLDERS
for folder in folders:
    top = os.path.join(os.getcwd().encode(), folder)
    os.makedirs(top, exist_ok=True)
    if folder.startswith(b"link"):  # the rules through a link, as a lap could write them
        with open(b"rules.txt", "wb") as f:
            f.write(b"hidden.py\n")
        os.symlink(os.path.relpath(b"rules.txt", folder), os.path.join(top, b".gitignore"))
    else:
        with open(os.path.join(top, b".gitignore"), "ab") as f:
            f.write(b"\nhidden.py\n")
    with open(os.path.join(top, b"hidden.py"), "wb") as f:
        f.write(b"X = 1\n")
pathlib.Path("NOTES.md").write_text("hid\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""
FINDING_CHECK = """\
import os, sys
found = [os.path.join(d, f) for d, _, fs in os.walk(b".") for f in fs if f == b"hidden.py"]
print(found)
sys.exit(1 if found else 0)
"""
ODD = {
    "nested-new": [b"a/b/c"],
    "spaces-glob": [b"we ird [x]*?", b"x/**"],
    "newline": [b"new\nline"],
    "non-utf8": [b"caf\xe9", b"\xff\xfe"],
    "backslash-quote": [b'q"uo\\te', b":(glob)x"],
    "many-250": [f"d{n:03}".encode() for n in range(250)],
    "exactly-200": [f"d{n:03}".encode() for n in range(199)],
    "link": [b"link/a"],
    "tracked-nested": [b"sub"],
}


@pytest.mark.parametrize("folders", list(ODD.values()), ids=list(ODD))
@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_a_laps_new_gitignore_hides_no_file_the_checks_see(tmp_path: Path, folders: list[bytes], sandbox: str):
    agent = HIDING_AGENT.replace("FOLDERS", repr(folders))
    repo, (note,) = laps_of(tmp_path, agent, FINDING_CHECK, {"sub/.gitignore": "*.log\n"}, laps=1, sandbox=sandbox)
    # (red anyway: a .gitignore is never in scope without a grant; what matters is what the check saw)
    seen = ast.literal_eval(note["checks"][0]["output_tail"].strip())
    committed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "-z", note["commit"]], cwd=repo, capture_output=True, check=True
    ).stdout.split(b"\0")
    assert [path for path in seen if path.removeprefix(b"./") not in committed] == [], (seen, committed)


# --- the paths never in scope, matched by patterns that took a newline for the path's end ----------


@pytest.mark.parametrize("path", ["a\nb/.gitignore", "x\ny/setup.cfg", "x\ny/node_modules/m/index.js"])
def test_a_newline_in_a_folders_name_does_not_put_a_path_in_scope(path: str):
    """With google-re2 installed (the dev extras have it, as many machines do), pathspec would
    match by re2's compile of its own regexes, not by ralph's: the newline took a path out again."""
    from ralph.verdict.scope import Scope

    assert Scope().why_not(path.replace("\n", "/"), (), ()) == "never"  # the same path without it
    assert Scope().why_not(path, (), ()) == "never"


# The baseline's checks make build/ (ignored, kept as the baseline's while unchanged); the lap's
# agent adds a module in it, links one of its files, or leaves the folder unsearchable; its committed
# check imports the module.
BASE_CHECK = """\
import os, pathlib, sys
build = pathlib.Path("build")
if not build.exists():
    build.mkdir()
    (build / "base.py").write_text("BASE = 1\\n")
if os.path.exists("use.py"):
    os.chmod(build, 0o755) if os.path.isdir(build) else None
    sys.path.insert(0, "build")
    import use
print("ok")
"""
INTO_BASE_AGENT = r"""
import os, pathlib
how = HOW
pathlib.Path("use.py").write_text("import extra\n")
pathlib.Path("build/extra.py").write_text("X = 1\n")
if how == "link":
    os.remove("build/extra.py")
    os.link("build/base.py", "build/extra.py")
if how == "unsearchable":
    os.chmod("build", 0o600)
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""


@pytest.mark.parametrize("how", ["add", "link", "unsearchable"])
def test_a_module_the_agent_puts_in_the_baselines_folder_is_gone_before_the_checks(tmp_path: Path, how: str):
    agent = INTO_BASE_AGENT.replace("HOW", repr(how))
    _, (note,) = laps_of(tmp_path, agent, BASE_CHECK, {".gitignore": "build/\n"}, laps=1)
    assert note["status"] == "red" and note["checks"][0]["exit_code"] != 0, note
    assert "No module named 'extra'" in note["checks"][0]["output_tail"], note


# The agent leaves ignored files whose names git quotes; the checks must not see one of them.
ODD_LEAVING_AGENT = r"""
import os, pathlib
for name in [b"we\nird.tmp", b"caf\xe9.tmp", b'q"uo\\te.tmp', b"tab\there.tmp", b"d\xff/in.tmp", b" lead.tmp", b"-x.tmp"]:
    path = os.path.join(os.getcwd().encode(), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"X = 1\n")
pathlib.Path("NOTES.md").write_text("left\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""
TMP_CHECK = """\
import os, sys
found = [os.path.join(d, f) for d, _, fs in os.walk(b".") for f in fs if f.endswith(b".tmp")]
print(found)
sys.exit(1 if found else 0)
"""


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_ignored_files_with_names_git_quotes_are_gone_before_the_checks(tmp_path: Path, sandbox: str):
    notes = two_laps(tmp_path, ODD_LEAVING_AGENT, TMP_CHECK, "*.tmp\n", sandbox)
    assert [note["checks"][0]["output_tail"].strip() for note in notes] == ["[]", "[]"], notes


# --- 4. what a phase leaves in the lap's own git dir -------------------------------------------

# The lap's git dir as the next phase must find it: objects/ holding only info/alternates (one
# line, one name), refs/ empty, neither opened to others. Printed, and an exit code.
GIT_DIR_STATE = r"""
g=$(git rev-parse --absolute-git-dir)
marks=$(PYTHON -c "import os, sys; print(*(os.listxattr(p) for p in sys.argv[1:]))" "$g/objects" "$g/refs")
state="$marks|$(ls -A "$g/objects")|$(ls -A "$g/objects/info")|$(ls -A "$g/refs")|$(stat -c %a "$g/objects" "$g/refs" | tr '\n' ' ')|$(wc -l < "$g/objects/info/alternates")|$(stat -c %h "$g/objects/info/alternates")|$(git config --get ralph.planted)"
echo "$state"
case "$state" in "[] []|info|alternates||"7[0-7][0-5]" "7[0-7][0-5]" |1|1|") ;; *) exit 1 ;; esac
"""
PLANTS = {  # by lap: each leaves one thing a kept folder must not carry into the next phase
    1: "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m planted",  # an object
    2: "git update-ref refs/planted HEAD",  # a ref
    3: 'chmod 777 "$g/objects" "$g/refs"',  # folders others may write
    4: 'ln "$g/objects/info/alternates" alternates-too',  # a second name
    5: 'echo /elsewhere/objects >> "$g/objects/info/alternates"',  # another object store
    # The folder made anew (its inode number reused, on ext4) carrying what the listing misses.
    6: f"rm -r \"$g/refs\" && mkdir \"$g/refs\" && {PY} -c \"import os; os.setxattr('$g/refs', 'user.planted', b'1')\"",
    # The files that stay too while untouched: the config (written anew by git, or in place), the tree's .git.
    7: "git config ralph.planted yes",
    8: 'printf "[ralph]\\n\\tplanted = yes\\n" >> "$g/config"',
    9: 'echo "gitdir: /nowhere" > .git',
}


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_what_a_phase_leaves_in_the_laps_git_dir_is_not_in_the_next(tmp_path: Path, sandbox: str):
    """Its folders of objects and refs, its config and the tree's .git file stay from phase to
    phase only as ralph made them: a commit, a ref, a chmod, a hard link, another object store, a
    folder made anew with an attribute, a setting or a .git file left by the agent is not in the
    checks' git dir, nor in the next lap's agent's."""
    (tmp_path / "state.sh").write_text(GIT_DIR_STATE.replace("PYTHON", PY))
    plant = " ".join(f"[ $RALPH_LAP = {lap} ] && {{ {command}; }};" for lap, command in PLANTS.items())
    agent = (
        f"sh {tmp_path / 'state.sh'} > seen-$RALPH_LAP.txt; g=$(git rev-parse --absolute-git-dir); {plant} "
        "sed -i '0,/- \\[ \\]/s//- [x]/' TODO.md"
    )
    checks = [f"sh {tmp_path / 'state.sh'}"]
    todo = "".join(f"- [ ] item {lap}\n" for lap in PLANTS)
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": config(agent, checks, sandbox=sandbox), "TODO.md": todo})
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    notes = lap_notes(repo, "r")
    assert [note["status"] for note in notes] == ["green"] * len(PLANTS), [note["reason"] for note in notes]
