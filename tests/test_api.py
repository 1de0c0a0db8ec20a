"""ralph as a library (ralph.api): real runs driven through the API alone, then read back by the
API and by the command line, in the test's own process, as a caller's program would run them."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo
from helpers.running import ralph, snapshot

from ralph import api
from ralph.agents.scripted import Reply, ScriptedServer, Step, finish, tool_call

FILES = {
    "calc.py": "def add(a, b):\n    return 0\n\n\ndef sub(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
    "def test_sub():\n    assert sub(3, 1) == 2\n",
    "PROGRESS.md": "",
}
FIXED = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
CHECKS = [f"{PY} -m pytest -q -p no:cacheprovider test_calc.py"]
LIBRARY_DOC = Path(__file__).parent.parent / "docs" / "library.md"


def config(agent: Mapping[str, object] | None = None) -> dict[str, object]:
    return {"goal": "Fix calc", "agent": agent or {"kind": "command", "command": "true"}, "checks": CHECKS}


def repo(tmp_path: Path, items: list[str], **options: object) -> Path:
    return make_repo(tmp_path / "repo", FILES, todo=items, **options)  # type: ignore[arg-type]


def edit(path: str, old: str, new: str) -> Reply:
    return tool_call(
        "str_replace_based_edit_tool", {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
    )


class Ticker:
    """A Python agent: fixes add, writes a file of its own, ticks the first open item and notes the
    lap in PROGRESS.md; `made` holds the agents made."""

    made: list[Ticker] = []

    def __init__(self) -> None:
        Ticker.made.append(self)

    def run_lap(self, task: api.LapTask) -> api.AgentResult:
        (task.workspace / "calc.py").write_text(FIXED)
        (task.workspace / f"lap-{task.lap}.txt").write_text("work\n")
        todo = task.workspace / "TODO.md"
        todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
        with (task.workspace / "PROGRESS.md").open("a") as progress:
            progress.write(f"lap {task.lap}\n")
        return api.AgentResult(kind="mine", outcome="ok", duration_s=0.01, summary=f"lap {task.lap}")


@pytest.fixture(autouse=True)
def fresh_ticker():
    Ticker.made = []


def process_state() -> dict[str, object]:
    """What a library must leave of its caller's process as it found it."""
    libc = ctypes.CDLL(None, use_errno=True)
    return {
        "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "handlers": [signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)],
        "dumpable": libc.prctl(3, 0, 0, 0, 0),  # PR_GET_DUMPABLE
    }


def test_a_run_with_the_built_in_agent_ends_done_and_leaves_the_caller_as_it_was(tmp_path: Path, capfd):
    script: list[Step] = [
        edit("calc.py", "return 0", "return a + b"),
        edit("TODO.md", "- [ ] Fix add", "- [x] Fix add"),
        finish(),
    ]
    with ScriptedServer(script) as server:
        agent = {"kind": "openai", "model": "scripted-1", "base_url": server.base_url}
        work = repo(tmp_path, ["Fix add"])  # no ralph.yaml: the configuration is given as a mapping
        before, state = snapshot(work), process_state()
        heard: list[str] = []
        result = api.run(work, config=config(agent), name="a", on_event=lambda event: heard.append(event["type"]))
    assert (result.done, result.exit_code, result.laps, result.green_laps) == (True, api.Exit.DONE, 1, 1)
    assert result.stop_reason.startswith("done at lap 1")
    assert result.green == git(work, "rev-parse", "ralph/a")
    assert (result.tests_before, result.tests_after) == (1, 2)
    assert result.tokens > 0 and result.records[0].agent.kind == "openai"
    assert heard[0] == "run_started" and heard[-1] == "run_ended" and "lap_ended" in heard
    assert snapshot(work) == before and process_state() == state
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == ""  # display: off


def test_the_callers_is_done_holds_back_done_until_it_holds(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config())
    asked: list[tuple[bool, int, str]] = []

    def is_done(tree: Path, status: api.RunStatus) -> bool:
        asked.append(((tree / "calc.py").read_text() == FIXED, status.laps, status.run))
        return len(asked) > 1  # not on the first lap that would be done: on the next one

    result = api.run(work, agent=Ticker, is_done=is_done, name="d")
    first, second = result.records
    assert asked == [(True, 0, "d"), (True, 1, "d")]
    assert not first.done and "the caller's is_done does not hold" in first.reason and first.status == "green"
    assert second.done and result.done and result.laps == 2
    assert len({id(agent) for agent in Ticker.made}) == 2  # a fresh agent a lap
    assert all(record.agent.kind == "python" for record in result.records)


def test_a_callback_stops_the_run_and_the_same_run_resumes_then_the_command_line_shows_it(tmp_path: Path):
    work = repo(tmp_path, ["Fix add", "Say so"], config=config())

    def stop(record: api.LapRecord) -> None:
        raise api.Stop(f"enough after lap {record.lap}")

    stopped = api.run(work, agent=Ticker, on_lap=stop, name="s")
    assert (stopped.done, stopped.exit_code, stopped.laps) == (False, api.Exit.INTERRUPTED, 1)
    assert stopped.stop_reason == "stopped by the caller: enough after lap 1"
    assert git(work, "rev-parse", "ralph/s") == stopped.green
    resumed = api.run(work, agent=Ticker, name="s")
    assert (resumed.done, resumed.laps, [record.lap for record in resumed.records]) == (True, 2, [1, 2])
    assert api.status(work, "s").done and api.lap(work, 2, "s").diffstat
    shown = ralph(work, "log", "--run", "s")
    assert shown.returncode == 0 and "lap" in shown.stdout and "green" in shown.stdout
    status = ralph(work, "status", "--run", "s")
    assert status.returncode == 0 and "done" in status.stdout
    again = ralph(work, "run", "--name", "s")  # its agent is the caller's: not the command line's to run
    assert again.returncode == 1 and "ralph.api.run(agent=...)" in again.stderr


def test_errors_are_ralphs_own_with_the_command_lines_words(tmp_path: Path):
    nowhere = tmp_path / "plain"
    nowhere.mkdir()
    with pytest.raises(api.RalphError) as raised:
        api.run(nowhere)
    said = ralph(nowhere, "run")
    assert said.returncode == 1 and said.stderr.strip() == f"ralph: {raised.value}"
    work = repo(tmp_path, ["Fix add"])
    with pytest.raises(api.RalphError, match="the configuration given: agent: required key is missing"):
        api.run(work, config={"goal": "x", "checks": CHECKS})
    with pytest.raises(api.RalphError, match="limits.max_laps"):
        api.run(work, config=config(), overrides={"limits": {"max_laps": 0}})


def test_a_callbacks_own_error_reaches_the_caller_and_the_lap_stays_recorded(tmp_path: Path):
    work = repo(tmp_path, ["Fix add", "Say so"], config=config())

    def broken(record: api.LapRecord) -> None:
        raise ValueError("the caller's bug")

    with pytest.raises(ValueError, match="the caller's bug"):
        api.run(work, agent=Ticker, on_lap=broken, name="b")
    assert [one.lap for one in api.laps(work, "b")] == [1]
    assert api.run(work, agent=Ticker, name="b").done


EXAMPLES = dict(
    (name, code) for code, name in re.findall(r"```python\n(# example: (\S+)\n.*?)```", LIBRARY_DOC.read_text(), re.S)
)
SAID = {
    "built_in_agent.py": ["done: True, laps: 1, tests 0 -> 1"],
    "own_done_check.py": [
        "lap 1: green, done: False (all checks pass; not done: the caller's is_done does not hold)",
        "lap 2: green, done: True (all checks pass)",
        "done at lap 2: every check passes and every TODO item is ticked (exit 0)",
    ],
}


@pytest.mark.parametrize("name", sorted(SAID))
def test_the_examples_in_the_docs_run_as_they_are(tmp_path: Path, name: str):
    script = tmp_path / name
    script.write_text(EXAMPLES[name])
    path = f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}"  # `python` is the Python running the tests
    ran = subprocess.run(
        [PY, str(script)], cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PATH=path)
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert all(line in lines for line in SAID[name]), ran.stdout
    assert ran.stderr == ""


def test_the_examples_in_the_docs_pass_mypy_strict(tmp_path: Path):
    for name, code in EXAMPLES.items():
        (tmp_path / name).write_text(code)
    # An editable install is an import hook mypy cannot follow: ralph is found from the checkout, as an
    # installed copy with its py.typed would be; its own modules' errors are not the examples'.
    strict = [PY, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / ".mypy")]
    root = str(LIBRARY_DOC.parent.parent)
    checked = subprocess.run(
        [*strict, *sorted(EXAMPLES)], cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, MYPYPATH=root)
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert sorted(EXAMPLES) == sorted(SAID)
