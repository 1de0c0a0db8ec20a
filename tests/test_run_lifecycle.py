"""Lifecycle hooks (`hooks:`) and `ralph tell`: what the user hears from a run, and says to it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import lap_notes, ralph

from ralph import todo
from ralph.config.sections import LifecycleHooks
from ralph.run import lifecycle

AGENT = r"""
import os, pathlib
lap = os.environ["RALPH_LAP"]
todo = pathlib.Path("TODO.md")
if lap == "2":
    todo.write_text(todo.read_text().replace("- [ ] One", "- [x] One"))
pathlib.Path("work.txt").write_text(lap)
"""
HOOK = (
    f"{PY} -c \"import json, os; print(json.dumps({{k: v for k, v in os.environ.items() if k.startswith('RALPH_')}}))\""
)


def repo_for(tmp_path: Path, **config: object) -> Path:
    settings = {"goal": "Do one", "agent": python_agent(tmp_path / "agent.py", AGENT), "checks": ["true"], **config}
    return make_repo(tmp_path / "repo", config=settings, todo=["One"])


def test_hooks_hear_every_lap_and_the_end_and_a_failing_hook_is_only_a_warning(tmp_path: Path):
    heard = tmp_path / "heard.jsonl"
    hooks = {
        "on_lap_end": f"{HOOK} >> {heard}; exit 7",  # fails: a warning, the lap stays what it is
        "on_done": f"{HOOK} | sed 's/^/done /' >> {heard}",
        "on_stop": f"{HOOK} | sed 's/^/stop /' >> {heard}",
    }
    repo = repo_for(tmp_path, hooks=hooks)
    result = ralph(repo, "run", "--name", "h")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: hooks.on_lap_end" in result.stderr and "failed (exit 7)" in result.stderr
    lines = heard.read_text().splitlines()
    laps = [json.loads(line) for line in lines if line.startswith("{")]
    assert [(lap["RALPH_LAP"], lap["RALPH_STATUS"]) for lap in laps] == [("1", "green"), ("2", "green")]
    assert laps[0]["RALPH_RUN"] == "h" and laps[1]["RALPH_REASON"] == "all checks pass"
    done = json.loads(next(line for line in lines if line.startswith("done ")).removeprefix("done "))
    stop = json.loads(next(line for line in lines if line.startswith("stop ")).removeprefix("stop "))
    assert done["RALPH_STATUS"] == "done" and "done at lap 2" in done["RALPH_REASON"]
    assert stop["RALPH_EXIT"] == "0" and stop["RALPH_LAP"] == "2"
    assert [note["status"] for note in lap_notes(repo, "h")] == ["green", "green"]


def test_a_message_told_to_a_run_reaches_its_next_lap_exactly_once(tmp_path: Path):
    repo = repo_for(tmp_path, limits={"stagnation": 10})
    assert ralph(repo, "run", "--name", "t", "--max-laps", "1").returncode == 3
    told = ralph(repo, "tell", "use the new API, not the old one", "--run", "t")
    assert told.returncode == 0 and "told run t" in told.stdout
    assert ralph(repo, "run", "--name", "t", "--max-laps", "3").returncode == 0
    prompts = {lap: (repo / ".git" / "ralph" / "t" / f"lap-{lap}" / "prompt.md").read_text() for lap in (1, 2)}
    assert "From the user" not in prompts[1]
    assert "# From the user\nWhile the job runs, the user asks:\n- use the new API, not the old one" in prompts[2]
    assert [note["told"] for note in lap_notes(repo, "t")] == [[], ["use the new API, not the old one"]]
    assert git(repo, "for-each-ref", "refs/ralph/t/told/") == ""
    assert "told    use the new API" in ralph(repo, "show", "2", "--run", "t").stdout
    assert ralph(repo, "tell", "  ", "--run", "t").returncode == 1


def test_on_stop_hears_of_a_run_that_ends_in_an_error(tmp_path: Path):
    heard = tmp_path / "heard.json"
    repo = repo_for(tmp_path, setup=["exit 3"], hooks={"on_stop": f"{HOOK} > {heard}"})
    result = ralph(repo, "run", "--name", "e")
    assert result.returncode == 1 and "setup `exit 3` failed" in result.stderr
    told = json.loads(heard.read_text())
    assert told["RALPH_EXIT"] == "1" and told["RALPH_STATUS"] == "error" and "setup `exit 3`" in told["RALPH_REASON"]


def test_a_hook_gets_a_reason_as_a_model_or_a_lap_may_write_it(tmp_path: Path):
    """A NUL and a reason of 300,000 characters (a judge's blocking items, a lap's output) reach
    the hook cut and cleaned, rather than failing to start it."""

    heard = tmp_path / "heard.json"
    hooks = LifecycleHooks(on_lap_end=f"{HOOK} > {heard}")
    lifecycle.fire(hooks, "on_lap_end", tmp_path, {"PATH": os.environ["PATH"]}, reason="a\0b" + "x" * 300_000)
    reason = json.loads(heard.read_text())["RALPH_REASON"]
    assert reason.startswith("abxx") and len(reason) == lifecycle.VALUE_CAP


def test_a_run_says_when_ralph_inits_placeholders_are_still_the_job(tmp_path: Path):
    agent = {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && echo done > notes.txt"}
    config = {"goal": todo.PLACEHOLDER_GOAL, "agent": agent, "checks": ["true"]}
    repo = make_repo(tmp_path / "repo", config=config, todo=list(todo.PLACEHOLDER_ITEMS))
    result = ralph(repo, "run", "--name", "p")
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert "the goal is still `ralph init`'s placeholder ('Describe the whole job in one sentence')" in said
    assert "TODO.md still holds `ralph init`'s placeholder items (First slice of the job; Second slice" in said
    config["goal"] = "Write notes"
    other = make_repo(tmp_path / "other", config=config, todo=["Write notes.txt"])
    quiet = ralph(other, "run", "--name", "p")
    assert quiet.returncode == 0 and "placeholder" not in quiet.stdout + quiet.stderr
