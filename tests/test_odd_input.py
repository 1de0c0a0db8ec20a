"""Odd input from a lap: a full disk, folders nested past what git and Python reach, a TODO.md
that is a folder, a line separator str.splitlines() knows and markdown does not. Each is a red
lap with a reason, or handled; never a crash, a hang, nor a lap that is replayed or lost."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, needs_bwrap, python_agent
from helpers.running import lap_notes, ralph, ralph_workspaces

from ralph import todo
from ralph.lap.rebase import progress_with

TICK = """
import os, pathlib
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
pathlib.Path("work.txt").write_text(os.environ["RALPH_LAP"])
"""


def repo_for(tmp_path: Path, agent: str, files: dict[str, str] | None = None, **config: object) -> Path:
    """A repository whose command agent is the Python script `agent` (kept outside it)."""
    settings = {"checks": ["true"], "goal": "g", "agent": python_agent(tmp_path / "agent.py", agent), **config}
    return make_repo(tmp_path / "repo", files, config=settings, todo=["a", "b"])


# --- a full disk -------------------------------------------------------------------------

FILL = (
    TICK
    + """
if os.environ["RALPH_LAP"] == "1":  # the first lap fills the disk its workspace is on
    with open("fill.bin", "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"x" * (1 << 20))
        except OSError:
            pass
"""
)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 80 MB tmpfs for ralph's lap workspaces (XDG_CACHE_HOME): a disk a lap can fill."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_a_red_lap_and_the_run_goes_on_or_stops_in_one_line(tmp_path: Path, small_disk: Path):
    repo = repo_for(tmp_path, FILL)
    env = {"XDG_CACHE_HOME": str(small_disk)}
    # The lap's own files filled it: they are deleted, and the run goes on.
    done = ralph(repo, "run", "--name", "filled", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    laps = lap_notes(repo, "filled")
    assert [lap["status"] for lap in laps] == ["red", "green", "green"]
    assert laps[0]["reason"].startswith("the lap filled the disk of its workspace; its files were deleted")
    assert git(repo, "diff", "refs/ralph/filled/base", "refs/ralph/filled/laps/1") == ""  # nothing of it kept
    assert "fill.bin" not in git(repo, "ls-tree", "-r", "--name-only", "ralph/filled")
    assert [path.name for path in (small_disk / "ralph" / "workspaces").iterdir()] in ([], ["idle"])
    # Something else keeps the disk full: the lap is recorded red, the run stops with one line,
    # and a resume goes on from the next lap, not this one again.
    (small_disk / "ballast").write_bytes(bytes(40 << 20))
    stopped = ralph(repo, "run", "--name", "kept-full", env=env)
    assert stopped.returncode == 1
    assert stopped.stderr.count("\n") == 1 and "Traceback" not in stopped.stdout + stopped.stderr
    assert "is full" in stopped.stderr and "not with lap 1's files (deleted)" in stopped.stderr, stopped.stderr
    assert [lap["status"] for lap in lap_notes(repo, "kept-full")] == ["red"]
    first = git(repo, "rev-parse", "refs/ralph/kept-full/laps/1")
    (small_disk / "ballast").unlink()
    resumed = ralph(repo, "run", "--name", "kept-full", env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    laps = lap_notes(repo, "kept-full")
    assert [(lap["lap"], lap["status"]) for lap in laps] == [(1, "red"), (2, "green"), (3, "green")]
    assert "not with the lap's files" in laps[0]["reason"]
    assert git(repo, "rev-parse", "refs/ralph/kept-full/laps/1") == first
    assert git(repo, "show", "ralph/kept-full:work.txt") == "3"


# --- folders nested past what git and Python reach -----------------------------------------

DEEP = (
    TICK
    + r"""
def chain(top, name, levels, at=None, leaf=None):
    # `levels` folders, one in the other, made from inside (no path is ever too long to name);
    # `at` (level, folder, file): a file put in a folder at that level.
    here = os.getcwd()
    os.makedirs(top, exist_ok=True)
    os.chdir(top)
    for level in range(levels):
        if at and level == at[0]:
            os.mkdir(at[1])
            pathlib.Path(at[1], at[2]).write_bytes(b"bytecode")
        os.mkdir(name)
        os.chdir(name)
    if leaf:
        pathlib.Path(leaf).write_text("x")
    os.chdir(here)

if os.environ["RALPH_LAP"] == "1":  # past PATH_MAX, untracked: ralph cannot look into it
    chain("long", "n" * 250, 20, leaf="leaf.txt")
if os.environ["RALPH_LAP"] == "2":  # 2,500 deep, ignored: past Python's recursion, bytecode near PATH_MAX
    chain("build/deep", "a", 2500, at=(2016, "__pycache__", "m.pyc"), leaf="report.xml")
"""
)
JUNIT = """
import pathlib
pathlib.Path("reports").mkdir(exist_ok=True)
pathlib.Path("reports/junit.xml").write_text('<testsuite name="s"><testcase classname="c" name="t"/></testsuite>')
"""


def test_folders_nested_past_what_git_and_python_reach_are_handled(tmp_path: Path):
    check = {"run": f"{PY} check.py", "junit": "**/*.xml"}  # every folder looked into for reports
    files = {"check.py": JUNIT, ".gitignore": "build/\nreports/\n"}
    repo = repo_for(tmp_path, DEEP, files, checks=[check])
    result = ralph(repo, "run", "--name", "deep", "--max-laps", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    laps = lap_notes(repo, "deep")
    assert [lap["status"] for lap in laps] == ["green", "green"], [lap["reason"] for lap in laps]
    # What lies past PATH_MAX ralph cannot look into, so it is deleted before git meets it.
    assert "long/" not in git(repo, "ls-tree", "-r", "--name-only", laps[0]["commit"])
    assert laps[1]["checks"][0]["tests"]["counts"]["passed"] == 1  # its JUnit report found, the deep folders walked
    assert "build/" not in git(repo, "ls-tree", "-r", "--name-only", "ralph/deep")
    assert ralph_workspaces(repo) == []  # the workspace, 2,500 folders deep, deleted


# --- TODO.md: a folder, and lines as markdown counts them (laps side by side) -----------------

SIDE_BY_SIDE = r"""
import os, pathlib, re, time
items = [line for line in os.environ["RALPH_ITEMS"].splitlines() if line]
prompt = pathlib.Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
todo = pathlib.Path("TODO.md")
text = todo.read_text()
for item in items:
    time.sleep(2 if item == "Write b.txt" else 0.2)  # b lands last: rebased onto a moved line
    name = re.match(r"Write (\S+)", item)[1]
    pathlib.Path(name).write_text(item)
    text = text.replace(f"- [ ] {item}", f"- [x] {item}")
if "Write c.txt" in items and "was red" not in prompt:  # its first lap: TODO.md made a folder
    todo.unlink()
    todo.mkdir()
    for line in re.findall(r"^- \[[ x]\] .*$", text, re.MULTILINE):  # its listing reads as the checklist
        (todo / line).write_text("")
else:
    todo.write_text(text)
"""


@needs_bwrap  # laps side by side run sandboxed only
def test_a_todo_made_a_folder_is_red_and_ticks_land_on_their_own_lines(tmp_path: Path):
    # U+2028 above the items: str.splitlines() would see a line there that markdown does not.
    checklist = "# TODO\n\u2028 (a line separator)\n- [ ] Write a.txt\n- [ ] Write b.txt\n- [ ] Write c.txt\n"
    repo = repo_for(tmp_path, SIDE_BY_SIDE, {"TODO.md": checklist, "PROGRESS.md": ""})
    result = ralph(repo, "run", "--name", "p", "--parallel", "2")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "internal error" not in output and "Traceback" not in output  # no slot died
    laps = lap_notes(repo, "p")
    folder = [lap for lap in laps if lap["reason"].startswith("TODO.md is a folder in the lap's commit")]
    assert len(folder) == 1 and folder[0]["status"] == "red" and folder[0]["items"] == ["Write c.txt"], output
    assert any("rebased onto" in lap["reason"] for lap in laps if lap["status"] == "green")
    # Along the green line each commit ticks exactly the items whose files it adds.
    line = git(repo, "rev-list", "--reverse", "refs/ralph/p/base..ralph/p").split()
    for commit in line:
        added = git(repo, "diff", "--name-only", "--diff-filter=A", f"{commit}^", commit).split()
        ticked = set(re.findall(r"- \[x\] Write (\S+)", git(repo, "show", f"{commit}:TODO.md")))
        before = set(re.findall(r"- \[x\] Write (\S+)", git(repo, "show", f"{commit}^:TODO.md")))
        assert ticked - before == {name for name in added if name.endswith(".txt")}, commit
    final = git(repo, "show", "ralph/p:TODO.md")
    assert final.count("- [x]") == 3 and "\u2028 (a line separator)" in final
    assert all(git(repo, "show", f"ralph/p:{name}") == f"Write {name}" for name in ("a.txt", "b.txt", "c.txt"))


def test_todo_and_progress_lines_are_markdowns_lines():
    """Ticks put onto another TODO land on their items' lines whatever separators the text
    holds; an item's box may sit on the line after its marker; a nested item's lines are its
    own; a CRLF PROGRESS.md keeps each slot's section."""
    for separator in ("\u2028", "\u2029", "\x85", "\v", "\f", "\x1c", "\x1d", "\x1e"):
        text = f"# TODO{separator}\n{separator}\n- [ ] a\n- [ ] b\n- [ ] c\n"
        assert todo.combined(text, ["b"], []) == text.replace("[ ] b", "[x] b"), repr(separator)
    for end in ("\n", "\r\n", "\r"):
        text = end.join(["# TODO", "- [ ] a", "-", "  [ ] b", "- [ ] c", ""])
        added = todo.combined(text, ["b", "c"], ["- [ ] d" + end])
        assert added == text.replace("[ ] b", "[x] b").replace("[ ] c", "[x] c") + "- [ ] d" + end, repr(end)
    nested = todo.sources("- [ ] a\n  - [ ] b\n    wrapped\n\n- [ ] c\n")
    assert [source for _, _, source in nested] == ["- [ ] a\n", "  - [ ] b\n    wrapped\n", "- [ ] c\n"]
    theirs = "# Progress\r\n\r\n## Slot 1\r\nold\r\n## Slot 2\r\ntwo\r\n"
    assert (
        progress_with(theirs, "## Slot 1\r\nnew\r\n", 1) == "# Progress\r\n\r\n## Slot 1\r\nnew\r\n## Slot 2\r\ntwo\r\n"
    )


def test_a_git_folder_whose_head_is_a_folder_is_a_lap_like_any_other(tmp_path: Path):
    # What reads as a repository's files, each a folder: ralph reads only regular files there.
    made = "for name in ('HEAD', 'objects', 'refs', 'config'):\n    pathlib.Path('x/.git', name).mkdir(parents=True)\n"
    repo = repo_for(tmp_path, TICK + made)
    result = ralph(repo, "run", "--name", "g")
    output = result.stdout + result.stderr
    assert "internal error" not in output and "Traceback" not in output
    assert result.returncode == 0, output  # its folders are empty: nothing of them to commit
    assert [lap["status"] for lap in lap_notes(repo, "g")] == ["green", "green"]
    assert git(repo, "status", "--porcelain") == ""


# --- a PROGRESS.md of megabytes (the red team's, issue 38: every later prompt carried it) ----

HUGE_PROGRESS = r"""
import os, pathlib
lap = os.environ["RALPH_LAP"]
pathlib.Path("PROGRESS.md").write_text("done: a\n" + "padding line\n" * 200_000)  # 2.6 MB
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
pathlib.Path("work.txt").write_text(lap)
"""


def test_a_huge_progress_note_reaches_the_next_prompt_cut_and_said_so(tmp_path: Path):
    repo = repo_for(tmp_path, HUGE_PROGRESS)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    second = (repo / ".git" / "ralph" / "r" / "lap-2" / "prompt.md").read_text()
    assert len(second) < 40_000 and "done: a\npadding line\n" in second
    assert "[ralph: PROGRESS.md goes on for " in second and "read it in the work tree]" in second
