"""The lap engine end to end: a scripted command agent, real git, real checks."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers.repos import PY, SANDBOX_MODES, git, make_repo
from helpers.running import ralph, ralph_workspaces, snapshot

CALC = """\
def add(a, b):
    return a + b


def mul(a, b):
    raise NotImplementedError


def sub(a, b):
    raise NotImplementedError
"""
TODO = """\
# TODO
- [ ] Implement mul
- [ ] Implement sub
- [ ] Document calc in NOTES.md
"""
SUB_CHECK = f'{PY} -c "import calc; assert calc.sub(5, 3) == 2"'
# mul and sub fail at the base and give no per-test results: marked expected red, as a user would.
CHECKS: list[str | dict[str, object]] = [
    f'{PY} -c "import calc; assert calc.add(2, 3) == 5"',
    {"run": f'{PY} -c "import calc; assert calc.mul(2, 3) == 6"', "expect_red": True},
    {"run": SUB_CHECK, "expect_red": True},
]

# One script, three laps: fix item 1 (green), break a passing check (red), finish (green, done).
AGENT = r"""
import os, pathlib, sys
lap = int(os.environ["RALPH_LAP"])
prompt = sys.stdin.read()
assert pathlib.Path(os.environ["RALPH_PROMPT_FILE"]).read_text() == prompt
hang = os.environ.get("HANG_ONCE_MARKER")
if hang and lap == 2 and not os.path.exists(hang):
    pathlib.Path(hang).write_text(str(os.getpid()))
    import time; time.sleep(60)
calc = pathlib.Path("calc.py")
todo = pathlib.Path("TODO.md")
def tick(item):
    todo.write_text(todo.read_text().replace(f"- [ ] {item}", f"- [x] {item}"))
if lap == 1:
    calc.write_text(calc.read_text().replace("def mul(a, b):\n    raise NotImplementedError",
                                             "def mul(a, b):\n    return a * b"))
    tick("Implement mul")
    pathlib.Path("PROGRESS.md").write_text("done: mul\nnext: sub\n")
elif lap == 2:
    calc.write_text(calc.read_text().replace("return a + b", "return a - b"))
    tick("Implement sub")
else:
    pathlib.Path("seen-prompt.txt").write_text(prompt)
    calc.write_text(calc.read_text().replace("def sub(a, b):\n    raise NotImplementedError",
                                             "def sub(a, b):\n    return a - b"))
    pathlib.Path("NOTES.md").write_text("calc: add, mul, sub\n")
    tick("Implement sub")
    tick("Document calc in NOTES.md")
    pathlib.Path("PROGRESS.md").write_text("done: everything\n")
print(f"lap {lap} finished")
"""


def config(agent_cmd: str, checks=CHECKS, **limits) -> str:
    lines = [
        'goal: "Finish the calc module"',
        "agent:",
        "  kind: command",
        f"  command: {json.dumps(agent_cmd)}",
        "checks:",
        *[f"  - {json.dumps(c)}" for c in checks],
    ]
    if limits:
        lines += ["limits:", *[f"  {k}: {v}" for k, v in limits.items()]]
    return "\n".join(lines) + "\n"


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    return make_repo(
        tmp_path / "repo", {"calc.py": CALC, "TODO.md": TODO, "PROGRESS.md": "", "ralph.yaml": config(f"{PY} {agent}")}
    )


def note(repo: Path, commit: str) -> dict:
    return json.loads(git(repo, "notes", "--ref", "ralph", "show", commit))


def test_green_red_green_run_ends_done(calc_repo: Path):
    before = snapshot(calc_repo)
    result = ralph(calc_repo, "run", "--name", "calc")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "done at lap 3" in result.stdout

    # The green line holds exactly the two green laps, as ordinary commits with trailers.
    base = git(calc_repo, "rev-parse", "refs/ralph/calc/base")
    green = git(calc_repo, "rev-list", f"{base}..ralph/calc").split()
    assert len(green) == 2
    assert [git(calc_repo, "log", "-1", "--format=%(trailers:key=Ralph-Lap,valueonly)", c).strip() for c in green] == [
        "3",
        "1",
    ]
    assert git(calc_repo, "log", "-1", "--format=%s", green[1]) == "Implement mul"
    assert git(calc_repo, "log", "-1", "--format=%(trailers:key=Ralph-Run,valueonly)", green[0]).strip() == "calc"
    assert [note(calc_repo, c)["status"] for c in green] == ["green", "green"]
    # Lap 1 left sub's check red, marked expected red: its line says that check judged nothing.
    assert note(calc_repo, green[1])["reason"] == (
        f"no check regressed; `{SUB_CHECK}` judged nothing (red, no per-test results)"
    )

    # The red lap is kept for review under its lap ref, off the green line.
    red = git(calc_repo, "rev-parse", "refs/ralph/calc/laps/2")
    assert red not in green
    red_note = note(calc_repo, red)
    assert red_note["status"] == "red"
    assert "calc.add(2, 3) == 5" in red_note["reason"]
    assert red_note["parent"] == green[1]
    assert {
        "run",
        "lap",
        "status",
        "reason",
        "started_at",
        "duration_s",
        "checks",
        "agent",
        "todo",
        "commit",
        "parent",
    } <= red_note.keys()

    # Lap 3 was told what lap 2 tried and why it failed.
    seen = git(calc_repo, "show", "ralph/calc:seen-prompt.txt")
    assert "lap 2" in seen and "check regressed" in seen and "AssertionError" in seen and "calc.py" in seen

    final = note(calc_repo, green[0])
    assert final["done"] is True and final["todo"] == {"open": 0, "done": 3}
    assert [c["exit_code"] for c in final["checks"]] == [0, 0, 0]
    assert git(calc_repo, "show", "ralph/calc:NOTES.md") == "calc: add, mul, sub"

    assert snapshot(calc_repo) == before
    assert ralph_workspaces(calc_repo) == []

    log = json.loads(ralph(calc_repo, "log", "--json").stdout)
    assert [lap["status"] for lap in log["laps"]] == ["green", "red", "green"]
    shown = ralph(calc_repo, "show", "2")
    assert shown.returncode == 0 and "red" in shown.stdout and "calc.py" in shown.stdout
    status = json.loads(ralph(calc_repo, "status", "--json").stdout)
    assert status["done"] is True and status["laps"] == 3 and status["green"] == green[0]


def test_land_squash_brings_the_green_line_onto_the_users_branch(calc_repo: Path):
    assert ralph(calc_repo, "run", "--name", "calc").returncode == 0
    result = ralph(calc_repo, "land")
    assert result.returncode == 0, result.stderr
    assert git(calc_repo, "rev-list", "--count", "HEAD") == "2"
    assert "return a * b" in (calc_repo / "calc.py").read_text()
    assert git(calc_repo, "status", "--porcelain") == ""
    assert "Ralph-Run: calc" in git(calc_repo, "log", "-1", "--format=%B")


def test_land_refuses_an_unfinished_run_without_partial_and_a_moved_branch_without_rebase(calc_repo: Path):
    assert ralph(calc_repo, "run", "--name", "calc", "--max-laps", "2").returncode == 3  # lap 1 green, lap 2 red
    head = git(calc_repo, "rev-parse", "HEAD")
    refused = ralph(calc_repo, "land")
    assert refused.returncode == 1 and "run 'calc' is not done" in refused.stderr and "--partial" in refused.stderr
    git(calc_repo, "commit", "-q", "--allow-empty", "-m", "the user went on working")
    moved = ralph(calc_repo, "land", "--partial")
    assert moved.returncode == 1 and "main has commits the run never saw" in moved.stderr and "--rebase" in moved.stderr
    assert git(calc_repo, "rev-parse", "HEAD^") == head and git(calc_repo, "status", "--porcelain") == ""

    assert ralph(calc_repo, "land", "--partial", "--rebase").returncode == 0  # replayed onto the new commit
    assert git(calc_repo, "log", "--format=%s", "-2").splitlines() == ["Implement mul", "the user went on working"]
    git(calc_repo, "reset", "-q", "--hard", head)
    assert ralph(calc_repo, "land", "--partial").returncode == 0
    message = git(calc_repo, "log", "-1", "--format=%B")
    assert message.startswith(
        "ralph: Finish the calc module\n\nThe green laps of run calc (partial: the run is not done):\n"
    )
    assert "- lap 1: Implement mul\n" in message and "lap 2" not in message and "Ralph-Run: calc" in message
    again = ralph(calc_repo, "land", "--partial")
    assert again.returncode == 1 and "every green lap of run 'calc' is landed already" in again.stderr

    # The run goes on to done; the next land brings what came since, as checked.
    assert ralph(calc_repo, "run", "--name", "calc", "--max-laps", "3").returncode == 0
    assert ralph(calc_repo, "land").returncode == 0
    assert git(calc_repo, "rev-parse", "HEAD^{tree}") == git(calc_repo, "rev-parse", "ralph/calc^{tree}")
    message = git(calc_repo, "log", "-1", "--format=%B")
    assert "The green laps of run calc:\n- lap 3: Implement sub; Document calc in NOTES.md\n" in message, message


def test_clean_refs_removes_everything_of_the_run(calc_repo: Path):
    assert ralph(calc_repo, "run", "--name", "calc").returncode == 0
    assert ralph(calc_repo, "clean", "--refs").returncode == 0
    assert git(calc_repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""
    assert not (calc_repo / ".git" / "ralph" / "calc").exists()
    assert ralph(calc_repo, "log").returncode == 1


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_sigkill_mid_lap_then_resume_reaches_the_same_end(calc_repo: Path, tmp_path: Path, sandbox: str):

    (tmp_path / "out").mkdir()
    with (calc_repo / "ralph.yaml").open("a") as yaml:
        yaml.write(f"sandbox: {{mode: {sandbox}, writable: [{tmp_path / 'out'}]}}\nenv: {{pass: [HANG_ONCE_MARKER]}}\n")
    git(calc_repo, "commit", "-qam", "sandbox setting")
    before = snapshot(calc_repo)
    marker = tmp_path / "out" / "hanging"
    env = dict(os.environ, HANG_ONCE_MARKER=str(marker))
    proc = subprocess.Popen(
        [PY, "-m", "ralph", "run", "--name", "calc"],
        cwd=calc_repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no cleanup runs
    proc.wait()
    assert len(ralph_workspaces(calc_repo)) == 1  # the dead lap's workspace, left on disk

    def alive() -> bool:
        return bool(subprocess.run(["pgrep", "-f", f"{tmp_path}/agent.py"], capture_output=True).stdout)

    deadline = time.monotonic() + 5  # the PID namespace goes down a moment after ralph
    while alive() and sandbox != "off" and time.monotonic() < deadline:
        time.sleep(0.05)
    agent_alive = alive()
    # Sandboxed, the agent died with ralph (its PID namespace went down); unsandboxed it
    # outlived ralph, and the resume stops it.
    assert agent_alive == (sandbox == "off")

    resumed = ralph(calc_repo, "run", "--name", "calc", env={"HANG_ONCE_MARKER": str(marker)})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming run calc at lap 2" in resumed.stdout
    assert ("stopped processes left running by an earlier `ralph run` of calc" in resumed.stderr) == agent_alive
    assert not subprocess.run(["pgrep", "-f", f"{tmp_path}/agent.py"], capture_output=True).stdout
    assert ralph_workspaces(calc_repo) == []
    assert snapshot(calc_repo) == before

    # Same end as an uninterrupted run: the same tree, the same laps.
    log = json.loads(ralph(calc_repo, "log", "--json").stdout)
    assert [lap["status"] for lap in log["laps"]] == ["green", "red", "green"]
    fresh = make_repo(
        tmp_path / "fresh",
        {"calc.py": CALC, "TODO.md": TODO, "PROGRESS.md": "", "ralph.yaml": (calc_repo / "ralph.yaml").read_text()},
    )
    git(fresh, "commit", "-q", "--allow-empty", "-m", "sandbox setting")
    assert ralph(fresh, "run", "--name", "calc").returncode == 0
    assert git(fresh, "rev-parse", "ralph/calc^{tree}") == git(calc_repo, "rev-parse", "ralph/calc^{tree}")


def test_land_merge_and_rebase_and_dirty_refusal(calc_repo: Path, tmp_path: Path):
    assert ralph(calc_repo, "run", "--name", "calc").returncode == 0
    (calc_repo / "calc.py").write_text("dirty")
    refused = ralph(calc_repo, "land", "--merge")
    assert refused.returncode == 1 and "uncommitted changes" in refused.stderr
    git(calc_repo, "checkout", "-q", "calc.py")

    git(calc_repo, "branch", "-q", "replay")
    assert ralph(calc_repo, "land", "--merge").returncode == 0
    assert git(calc_repo, "log", "-1", "--format=%p", "HEAD").count(" ") == 1  # a merge commit
    git(calc_repo, "checkout", "-q", "replay")
    assert ralph(calc_repo, "land", "--rebase").returncode == 0
    subjects = git(calc_repo, "log", "--format=%s", "-3").splitlines()
    assert subjects[0].startswith("Implement sub") and subjects[1] == "Implement mul"
    assert git(calc_repo, "rev-parse", "HEAD^{tree}") == git(calc_repo, "rev-parse", "ralph/calc^{tree}")


def test_no_git_identity_is_refused_before_any_lap(calc_repo: Path, isolated_home: Path, monkeypatch):
    # useConfigOnly: git must not guess an identity from the host name either.
    (isolated_home / ".gitconfig").write_text("[user]\n\tuseConfigOnly = true\n")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name)
    result = ralph(calc_repo, "run")
    assert result.returncode == 1 and "git does not know who you are" in result.stderr
    assert git(calc_repo, "for-each-ref", "refs/ralph/") == ""


def test_clean_refs_refuses_a_checked_out_run_branch(calc_repo: Path, tmp_path: Path):
    assert ralph(calc_repo, "run", "--name", "calc").returncode == 0
    git(calc_repo, "worktree", "add", "-q", str(tmp_path / "review"), "ralph/calc")
    result = ralph(calc_repo, "clean", "--refs")
    assert result.returncode == 1 and "is checked out in" in result.stderr
    assert git(calc_repo, "rev-parse", "--verify", "-q", "ralph/calc")


def test_a_land_that_fails_is_undone(calc_repo: Path):
    assert ralph(calc_repo, "run", "--name", "calc").returncode == 0
    hook = calc_repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'not today'\nexit 1\n")
    hook.chmod(0o755)
    before = snapshot(calc_repo)
    result = ralph(calc_repo, "land")
    assert result.returncode == 1 and "landing stopped and was undone" in result.stderr
    hook.unlink()
    after = snapshot(calc_repo)
    # Same branch, refs and files; the index holds the same entries (git rewrote its stat data).
    assert {k: v for k, v in after.items() if k != "index"} == {k: v for k, v in before.items() if k != "index"}
    assert git(calc_repo, "status", "--porcelain") == ""
