"""ralph as a library (ralph.api): real runs driven through the API alone, then read back by the
API and by the command line, in the test's own process, as a caller's program would run them."""

from __future__ import annotations

import ctypes
import dataclasses
import enum
import inspect
import math
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pydantic
import pytest
from helpers.repos import PY, git, make_repo, needs_bwrap
from helpers.running import ralph, snapshot

from ralph import api
from ralph.agents.scripted import Reply, ScriptedServer, Step, finish, tool_call
from ralph.records import ledger

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
    assert (result.tests_before, result.tests_passing) == (1, 2)
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
    assert stopped.left == ["1 TODO item(s) open: Say so"]
    assert git(work, "rev-parse", "ralph/s") == stopped.green
    resumed = api.run(work, agent=Ticker, name="s")
    assert (resumed.done, resumed.laps, [record.lap for record in resumed.records]) == (True, 2, [1, 2])
    second = api.lap(work, 2, "s")
    assert api.status(work, "s").done and "lap-2.txt" in second.diffstat and "+work" in second.diff
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
    with pytest.raises(api.RalphError, match="the configuration given with overrides: limits.max_laps"):
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


def test_the_examples_in_the_docs_and_the_public_module_pass_mypy_strict(tmp_path: Path):
    for name, code in EXAMPLES.items():
        (tmp_path / name).write_text(code)
    # An editable install is an import hook mypy cannot follow: ralph is found from the checkout, as an
    # installed copy with its py.typed would be; its own modules' errors are not the examples'.
    strict = [PY, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / ".mypy")]
    root = str(LIBRARY_DOC.parent.parent)
    checked = subprocess.run(
        [*strict, f"{root}/ralph/api.py", *sorted(EXAMPLES)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, MYPYPATH=root),
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert sorted(EXAMPLES) == sorted(SAID)


def test_what_on_event_raises_ends_the_run_after_its_lap_and_reaches_the_caller(tmp_path: Path):
    work = repo(tmp_path, ["Fix add", "Say so"], config=config())

    def broken(event: api.Event) -> None:
        if event["type"] == "phase_changed" and event.get("phase") == "agent":
            raise KeyError("the caller's other bug")

    with pytest.raises(KeyError, match="the caller's other bug"):
        api.run(work, agent=Ticker, on_event=broken, name="e")
    (only,) = api.laps(work, "e")
    assert only.record is not None and only.record.status == "green"  # the lap itself is not blamed
    assert api.run(work, agent=Ticker, name="e").done


def test_what_is_done_raises_is_not_done_and_reaches_the_caller_after_the_lap(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config())

    def broken(tree: Path, status: api.RunStatus) -> bool:
        raise OSError("the caller's disk")

    with pytest.raises(OSError, match="the caller's disk"):
        api.run(work, agent=Ticker, is_done=broken, name="i")
    (only,) = api.laps(work, "i")
    assert only.record is not None and only.record.status == "green" and not only.record.done
    assert not api.status(work, "i").done


def test_the_public_surface_is_the_one_the_docs_list():
    listed = set(re.findall(r"^\| `(\w+)[`(,]", LIBRARY_DOC.read_text(), re.MULTILINE))
    listed |= {
        name
        for row in re.findall(r"^\| (`\w+`(?:, `\w+`)+) \|", LIBRARY_DOC.read_text(), re.MULTILINE)
        for name in re.findall(r"`(\w+)`", row)
    }
    assert listed == set(api.__all__)
    assert all(hasattr(api, name) for name in api.__all__)


SURFACE = Path(__file__).parent / "fixtures" / "public_api.txt"


def public_surface() -> str:
    """Every public name of ralph.api with its signature, or its fields (a dataclass, a pydantic
    model), or its members (an enum): what a caller's code may rely on."""
    lines = []
    for name in sorted(api.__all__):
        thing = getattr(api, name)
        if isinstance(thing, type) and issubclass(thing, enum.Enum):
            lines.append(f"{name}: {', '.join(f'{member.name}={member.value!r}' for member in thing)}")
        elif isinstance(thing, type) and issubclass(thing, pydantic.BaseModel):
            fields = [f"{key}: {_named(field.annotation)}" for key, field in thing.model_fields.items()]
            lines.append(f"{name}: {', '.join(fields)}")
        elif dataclasses.is_dataclass(thing):
            lines.append(
                f"{name}: {', '.join(f'{field.name}: {_named(field.type)}' for field in dataclasses.fields(thing))}"
            )
        elif isinstance(thing, type):  # a protocol, an exception: its bases and its own methods
            bases = ", ".join(base.__name__ for base in thing.__bases__)
            methods = [
                f"{key}{inspect.signature(value)}"
                for key, value in vars(thing).items()
                if inspect.isfunction(value) and not key.startswith("_")
            ]
            lines.append(f"{name}({bases}): {', '.join(methods)}")
        elif inspect.isfunction(thing):
            lines.append(f"{name}{inspect.signature(thing)}")
        else:
            lines.append(f"{name} = {_named(thing)}")
    return "\n".join(lines) + "\n"


def _named(annotation: object) -> str:
    """A type as its name alone, whatever module it lives in and however this Python prints it."""
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b(?:[a-z_]\w*\.)+(\w+)", r"\1", str(annotation))


def test_a_change_to_the_public_surface_is_a_change_of_the_recorded_one():
    # Changed on purpose? Write the new surface to tests/fixtures/public_api.txt and say what
    # changed for callers in CHANGELOG.md: ralph.api is versioned by both.
    assert public_surface() == SURFACE.read_text()


@needs_bwrap
def test_a_sandboxed_lap_sees_none_of_the_callers_keys(tmp_path: Path):
    """A caller's process started with its keys in its environment, which /proc shows for as long as
    it lives (ralph cannot re-execute it without them): a lap's code finds them neither in its own
    environment nor in any process it can see. (Unsandboxed, a lap running as root would read
    them there: with `sandbox: "off"` in place of "required" this test fails as root.)"""
    canary = f"sk-canary-{tmp_path.name}"
    (tmp_path / "fixed.py").write_text(FIXED)
    look = (
        f"cp {tmp_path / 'fixed.py'} calc.py && sed -i 's/- \\[ \\]/- [x]/' TODO.md && "
        f"{{ grep -l {canary} /proc/*/environ 2>/dev/null; env | grep -c {canary}; }} > seen.txt; true"
    )
    settings = config({"kind": "command", "command": look}) | {
        "sandbox": {"mode": "required", "readable": [str(tmp_path)]}
    }
    work = repo(tmp_path, ["Fix add"], config=settings)
    caller = "import sys\nfrom ralph import api\nresult = api.run(sys.argv[1], name='k')\nprint(result.done)\n"
    ran = subprocess.run(
        [PY, "-c", caller, str(work)], capture_output=True, text=True, env=dict(os.environ, OPENAI_API_KEY=canary)
    )
    assert ran.stdout == "True\n", ran.stdout + ran.stderr
    assert git(work, "show", "ralph/k:seen.txt") == "0"  # no /proc/*/environ named, and no line of env


def test_the_agents_own_exception_is_an_error_lap_and_reaches_the_caller(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config())
    heard: list[api.Event] = []

    class Raises:
        def run_lap(self, task: api.LapTask) -> api.AgentResult:
            raise ValueError("the caller's agent's bug")

    with pytest.raises(ValueError, match="the caller's agent's bug"):
        api.run(work, agent=Raises, name="r", on_event=heard.append)
    (only,) = api.laps(work, "r")
    assert only.record is not None and only.record.agent.outcome == "error"
    assert only.record.agent.detail == "ValueError: the caller's agent's bug"
    (ended,) = [event for event in heard if event["type"] == "run_ended"]
    assert ended["reason"] == "stopped by the caller: the agent raised ValueError: the caller's agent's bug"
    assert ledger.audit(work, "r") == []


@pytest.mark.parametrize(
    "returned",
    [None, {"outcome": "ok"}, api.AgentResult(kind="x", outcome="ok", duration_s=math.nan)],
    ids=["None", "a dict", "NaN"],
)
def test_a_result_no_note_can_keep_is_refused_and_the_notes_stay_readable(tmp_path: Path, returned: object):
    work = repo(tmp_path, ["Fix add"], config=config())

    class Junk(Ticker):
        def run_lap(self, task: api.LapTask) -> api.AgentResult:
            super().run_lap(task)
            return returned  # type: ignore[return-value]

    with pytest.raises(api.RalphError, match="the agent's run_lap returned"):
        api.run(work, agent=Junk, name="j")
    assert ledger.audit(work, "j") == [] and api.laps(work, "j")[0].record is not None


def test_the_python_agent_works_in_the_laps_workspace_and_the_callers_checkout_is_left_alone(
    tmp_path: Path, monkeypatch
):
    work = repo(tmp_path, ["Fix add"], config=config())
    monkeypatch.chdir(work)  # a script run from its own repository
    seen: list[str] = []

    class Relative:
        def run_lap(self, task: api.LapTask) -> api.AgentResult:
            seen.append(os.getcwd())
            Path("calc.py").write_text(FIXED)  # relative: the lap's checkout, as a command agent's
            Path("TODO.md").write_text("- [x] Fix add\n")
            return api.AgentResult(kind="x", outcome="ok", duration_s=0.0)

    assert api.run(work, agent=Relative, name="w").done
    assert seen != [str(work)] and os.getcwd() == str(work)
    assert git(work, "status", "--porcelain") == ""


def test_on_lap_gets_a_copy_its_changes_reach_no_record(tmp_path: Path):
    work = repo(tmp_path, ["Fix add", "Say so"], config=config())

    def cheat(record: api.LapRecord) -> None:
        record.done, record.checks = True, []

    result = api.run(work, agent=Ticker, on_lap=cheat, name="m")
    assert [record.done for record in result.records] == [False, True]  # done at lap 2, not by the cheat at 1
    assert all(record.checks for record in result.records)


def test_one_run_at_a_time_in_a_process(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config())

    def again(record: api.LapRecord) -> None:
        api.run(work, agent=Ticker, name="other")

    with pytest.raises(api.RalphError, match="already running in this process"):
        api.run(work, agent=Ticker, on_lap=again, name="one")
    assert ledger.audit(work, "one") == [] and api.run(work, agent=Ticker, name="one").done


BAD_ARGUMENTS: dict[str, tuple[Callable[[Path], object], str]] = {
    "repo None": (lambda work: api.run(None), "repo: expected a path"),  # type: ignore[arg-type]
    "config an int": (lambda work: api.run(work, config=123), "config: expected a path, a Config"),  # type: ignore[arg-type]
    "overrides a list": (lambda work: api.run(work, overrides=[]), "overrides: expected a mapping"),  # type: ignore[arg-type]
    "name an int": (lambda work: api.run(work, name=5), "name: expected a run's name"),  # type: ignore[arg-type]
    "max_laps 0": (lambda work: api.run(work, max_laps=0), "max_laps: expected a whole number, 1 or more"),
    "max_laps a str": (lambda work: api.run(work, max_laps="3"), "max_laps: expected"),  # type: ignore[arg-type]
    "an agent, not its factory": (lambda work: api.run(work, agent=Ticker()), "agent: expected a factory"),  # type: ignore[arg-type]
    "display bogus": (lambda work: api.run(work, display="bogus"), "display: expected off, quiet"),  # type: ignore[arg-type]
    "status run an int": (lambda work: api.status(work, 5), "run: expected a run's name"),  # type: ignore[arg-type]
    "lap number a str": (lambda work: api.lap(work, "1"), "number: expected a lap's number"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_a_bad_argument_is_a_ralph_error_naming_it_and_nothing_is_recorded(tmp_path: Path, case: str):
    work = repo(tmp_path, ["Fix add"], config=config())
    call, said = BAD_ARGUMENTS[case]
    with pytest.raises(api.RalphError, match=re.escape(said)):
        call(work)
    assert git(work, "for-each-ref", "refs/ralph/") == ""


def test_no_git_process_or_pipe_is_left_in_the_callers_process(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config())

    def mine() -> tuple[set[str], set[str]]:
        tasks = os.listdir("/proc/self/task")
        children = {pid for task in tasks for pid in Path(f"/proc/self/task/{task}/children").read_text().split()}
        return children, set(os.listdir("/proc/self/fd"))

    children, fds = mine()
    api.run(work, agent=Ticker, name="p")
    api.status(work), api.laps(work), api.lap(work, 1)
    now = mine()
    assert now[0] - children == set() and now[1] - fds == set()  # (other tests' may have ended meanwhile)


def test_the_agent_changes_nothing_the_checks_or_the_caller_run_with(tmp_path: Path):
    """Its own copy of the lap's environment; the process's environment, umask and working folder
    put back after its lap; a check that passes only with a variable set stays red."""
    cheat = f"{PY} -c 'import os, sys; sys.exit(0 if os.environ.get(\"CHEAT\") else 1)'"
    work = repo(tmp_path, ["Fix add"], config=config() | {"checks": [*CHECKS, {"run": cheat, "expect_red": True}]})
    before = (dict(os.environ), os.umask(0o022), os.getcwd())
    os.umask(before[1])

    class Meddles(Ticker):
        def run_lap(self, task: api.LapTask) -> api.AgentResult:
            task.env["CHEAT"] = os.environ["CHEAT"] = "1"
            os.umask(0o000)
            os.chdir("/")
            return super().run_lap(task)

    result = api.run(work, agent=Meddles, name="m", max_laps=1)
    assert not result.done and result.records[0].checks[1].exit_code == 1  # as at the base: CHEAT reached no check
    now = (dict(os.environ), os.umask(0o022), os.getcwd())
    os.umask(now[1])
    assert now == before


def test_what_the_agent_leaves_running_ends_its_lap_an_error_so_nothing_after_the_commit_counts(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config())

    class Sneaky(Ticker):
        def run_lap(self, task: api.LapTask) -> api.AgentResult:
            (task.workspace / "TODO.md").write_text("- [x] Fix add\n")  # calc.py left broken ...
            threading.Thread(target=time.sleep, args=(2,), name="fixes-it-later", daemon=True).start()
            return api.AgentResult(kind="x", outcome="ok", duration_s=0.0)  # ... for a thread to fix after the commit

    with pytest.raises(api.RalphError, match="the agent left running after its lap: thread fixes-it-later"):
        api.run(work, agent=Sneaky, name="t")
    (only,) = api.laps(work, "t")
    assert only.record is not None and only.record.status != "green"
    assert git(work, "rev-parse", "ralph/t") == git(work, "rev-parse", "HEAD")  # the line never moved


@needs_bwrap
def test_the_agent_is_watched_like_an_unsandboxed_lap_in_a_sandboxed_run(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config() | {"sandbox": {"mode": "required"}})
    hook = work / ".git" / "hooks" / "post-checkout"

    class Plants(Ticker):
        def run_lap(self, task: api.LapTask) -> api.AgentResult:
            hook.write_text("#!/bin/sh\necho planted\n")
            return super().run_lap(task)

    result = api.run(work, agent=Plants, name="p", max_laps=1)
    assert not hook.exists() and result.records[0].status == "red"


def test_is_done_says_true_or_false(tmp_path: Path):
    work = repo(tmp_path, ["Fix add"], config=config())
    with pytest.raises(api.RalphError, match="is_done returned str 'no', not True or False"):
        api.run(work, agent=Ticker, is_done=lambda tree, status: "no", name="n")  # type: ignore[arg-type,return-value]
    assert not api.status(work, "n").done
