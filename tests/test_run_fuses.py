"""Every way `ralph run` stops, with its exit code, and the lap outcomes that lead there."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from helpers.repos import PY, git, make_repo
from helpers.running import lap_notes, ralph, ralph_workspaces, snapshot

from ralph.agents.base import AgentResult
from ralph.records.formats import LapRecord, LapStatus
from ralph.records.ledger import Lap, RunState
from ralph.todo import Counts

TICK_ONE = f"""{PY} -c "
import os, pathlib
t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', '- [x]', 1))
pathlib.Path('lap-' + os.environ['RALPH_LAP']).write_text('x')
" """


def repo_with(tmp_path: Path, agent: str, *, items: int = 5, checks=("true",), **limits) -> Path:
    (tmp_path / "out").mkdir(parents=True, exist_ok=True)  # where agents may leave a sign they started
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": list(checks),
        "limits": limits,
        "sandbox": {"writable": [str(tmp_path / "out")]},
    }
    return make_repo(tmp_path / "repo", config=config, todo=[f"item {n}" for n in range(1, items + 1)])


def notes(repo: Path, run: str) -> list[dict]:
    return lap_notes(repo, run)


def test_done_exits_0(tmp_path: Path):
    repo = repo_with(tmp_path, TICK_ONE, items=2)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [lap["status"] for lap in notes(repo, "r")] == ["green", "green"]


def test_max_laps_exits_3(tmp_path: Path):
    repo = repo_with(tmp_path, TICK_ONE, max_laps=2)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 3
    assert "max_laps (2) reached" in result.stdout
    assert len(notes(repo, "r")) == 2


def test_max_laps_flag_overrides_the_file_and_resume_continues_numbering(tmp_path: Path):
    repo = repo_with(tmp_path, TICK_ONE, max_laps=1)
    assert ralph(repo, "run", "--name", "r").returncode == 3
    again = ralph(repo, "run", "--name", "r", "--max-laps", "3")
    assert again.returncode == 3
    assert "resuming run" in again.stdout
    laps = notes(repo, "r")
    assert [lap["lap"] for lap in laps] == [1, 2, 3]
    assert git(repo, "rev-list", "--count", "refs/ralph/r/base..ralph/r") == "3"


def test_idle_agent_stagnates_with_exit_4(tmp_path: Path):
    repo = repo_with(tmp_path, "true", stagnation=2)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 4
    laps = notes(repo, "r")
    assert [(lap["status"], lap["reason"]) for lap in laps] == [("red", "the lap changed nothing")] * 2
    assert git(repo, "rev-parse", "ralph/r") == git(repo, "rev-parse", "refs/ralph/r/base")


def test_green_laps_without_ticks_count_toward_stagnation(tmp_path: Path):
    busy = f"{PY} -c \"import os; open('f' + os.environ['RALPH_LAP'], 'w').write('x')\""
    repo = repo_with(tmp_path, busy, stagnation=3)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 4
    laps = notes(repo, "r")
    assert [lap["status"] for lap in laps] == ["green"] * 3 and not any(lap["progress"] for lap in laps)


def test_max_minutes_exits_5(tmp_path: Path):
    repo = repo_with(tmp_path, f"sleep 0.3; {TICK_ONE}", max_minutes=0.002)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 5
    assert "max_minutes" in result.stdout
    assert len(notes(repo, "r")) == 1


def test_agent_failure_and_timeout_make_red_laps(tmp_path: Path):
    script = "if [ $RALPH_LAP = 1 ]; then echo boom; exit 7; fi; sleep 30"
    repo = repo_with(tmp_path, script, max_laps=2, lap_timeout=1)
    started = time.monotonic()
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 3
    assert time.monotonic() - started < 20
    laps = notes(repo, "r")
    assert laps[0]["status"] == "red" and laps[0]["reason"] == "agent exited with code 7"
    assert "boom" in laps[0]["output_tail"]
    assert laps[1]["status"] == "red" and "timed out after 1s" in laps[1]["reason"]
    assert laps[0]["checks"] == [] and laps[1]["checks"] == []


def test_hung_check_is_killed_and_the_lap_is_red(tmp_path: Path):
    repo = repo_with(tmp_path, TICK_ONE, checks=["test ! -e lap-1 || sleep 30"], max_laps=1, check_timeout=1)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 3
    lap = notes(repo, "r")[0]
    assert lap["status"] == "red" and "timed out" in lap["reason"]
    assert lap["checks"][0]["timed_out"] is True


def test_sigint_and_sigterm_exit_130_and_leave_no_worktree(tmp_path: Path):
    for sig in (signal.SIGINT, signal.SIGTERM):
        repo = repo_with(tmp_path / sig.name, f"touch {tmp_path}/{sig.name}/out/started; sleep 30")
        before = snapshot(repo)
        proc = subprocess.Popen(
            [PY, "-m", "ralph", "run", "--name", "r"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(tmp_path / sig.name / "out" / "started")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "interrupted" in err
        assert ralph_workspaces(repo) == []
        assert snapshot(repo) == before
        assert git(repo, "rev-parse", "ralph/r") == git(repo, "rev-parse", "refs/ralph/r/base")


def _wait_for(path: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_lock_refuses_a_second_run_of_the_same_name(tmp_path: Path):
    repo = repo_with(tmp_path, f"touch {tmp_path}/out/started; sleep 30")
    first = subprocess.Popen(
        [PY, "-m", "ralph", "run", "--name", "r"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(tmp_path / "out" / "started")
        second = ralph(repo, "run", "--name", "r")
        assert second.returncode == 1
        assert "already running" in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)


def test_a_resumed_run_ignores_the_users_uncommitted_work(tmp_path: Path):
    repo = repo_with(tmp_path, TICK_ONE, max_laps=1)
    assert ralph(repo, "run", "--name", "r").returncode == 3
    (repo / "scratch.txt").write_text("the user kept working")
    git(repo, "checkout", "-q", "--detach")
    again = ralph(repo, "run", "--name", "r", "--max-laps", "2")
    assert again.returncode == 3, again.stderr
    assert len(notes(repo, "r")) == 2
    assert (repo / "scratch.txt").read_text() == "the user kept working"


def test_without_a_name_the_latest_unfinished_run_of_the_goal_resumes(tmp_path: Path):
    repo = repo_with(tmp_path, TICK_ONE, max_laps=1)
    assert ralph(repo, "run", "--name", "20200101-started-long-ago").returncode == 3
    again = ralph(repo, "run", "--max-laps", "2")
    assert "resuming run 20200101-started-long-ago at lap 2" in again.stdout


def test_endpoint_failures_are_waited_out_not_counted_as_agent_errors():
    """Two laps the endpoint failed, then one the model failed: not three agent errors in a row
    (the outage is limits.outage_wait's to judge), though three model failures are."""

    def lap(number: int, endpoint_failed: bool) -> Lap:
        agent = AgentResult(kind="openai", outcome="error", duration_s=1, endpoint_failed=endpoint_failed)
        record = LapRecord(
            run="r",
            lap=number,
            status=LapStatus.ERROR,
            reason="agent error",
            started_at="",
            duration_s=1,
            commit=f"{number:040x}",
            parent="0" * 40,
            agent=agent,
            todo=Counts(open=1, done=0),
        )
        return Lap(number, f"{number:040x}", record)

    state = RunState("r", record=None, green="g", laps=[lap(1, True), lap(2, True), lap(3, False)])  # type: ignore[arg-type]
    assert state.errors_in_a_row() == 1
    state.laps += [lap(4, True), lap(5, False), lap(6, False)]
    assert state.errors_in_a_row() == 3
