"""Stuck items: agent.escalate after escalate_after red laps on one item, back to the agent after
a green lap; the planner role's split of the item into steps under it, an ordinary lap commit on
TODO.md, the item itself open until a lap ticks it; never a split by the agent that got stuck;
a split the planner gets wrong refused; the keys' mistakes one line each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo
from helpers.running import lap_notes, ralph

from ralph import config as config_module
from ralph.agents.scripted import ScriptedServer, finish, tool_call
from ralph.errors import RalphError
from ralph.lap.split import SplitRefused, split_text

# Red on purpose: leaves the file the check refuses.
BREAKS = f"{PY} -c \"open('broken', 'w').write('x')\""
# Green: ticks the first open item and leaves a file that says who did it.
TICKS = f"""{PY} -c "
import os, pathlib
t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', '- [x]', 1))
pathlib.Path('done-' + os.environ['RALPH_LAP']).write_text('{{who}}')
" """
# Ticks the first open step under an item (a split's) and writes a file of it; with none open,
# ticks the first open item at the top once a step was done (`did`), else breaks.
ON_STEPS = f"""{PY} -c "
import os, pathlib, re
t = pathlib.Path('TODO.md'); text = t.read_text()
step = re.search(r'^  - \\[ \\] (.*)$', text, re.M)
top = re.search(r'^- \\[ \\] (.*)$', text, re.M)
if step:
    t.write_text(text.replace(step.group(0), '  - [x] ' + step.group(1), 1)); pathlib.Path('did').write_text(step.group(1))
elif pathlib.Path('did').exists() and top:
    t.write_text(text.replace(top.group(0), '- [x] ' + top.group(1), 1))
    pathlib.Path('work-' + os.environ['RALPH_LAP']).write_text(top.group(1))
else:
    pathlib.Path('broken').write_text('x')
" """
TODO = "# TODO\n\nGoal: g\n\n- [ ] item 1\n  wrapped\n- [ ] item 2\n\nnotes stay\n"


def repo_with(tmp_path: Path, agent: dict, todo_text: str = TODO, **settings: object) -> Path:
    config = {
        "goal": "g",
        "agent": {"kind": "command", **agent},
        "checks": ["test ! -e broken"],
        **settings,
    }
    return make_repo(tmp_path / "repo", {"ralph.yaml": json.dumps(config), "TODO.md": todo_text})


def plan(*items: str) -> dict:
    return {"approaches": [{"name": "split"}], "recommendation": "smaller", "todo": list(items)}


def test_red_laps_escalate_and_a_green_lap_hands_back_to_the_agent(tmp_path: Path):
    escalate = {"kind": "command", "command": TICKS.replace("{who}", "escalate")}
    agent = {"command": BREAKS, "escalate": escalate, "escalate_after": 2, "split": False}
    repo = repo_with(tmp_path, agent, limits={"max_laps": 5, "stagnation": 4})
    result = ralph(repo, "run", "--name", "r", "--plain")
    assert result.returncode == 3, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [(lap["status"], lap["escalated"], lap["fallback"]) for lap in laps] == [
        ("red", False, 0),
        ("red", False, 0),
        ("green", True, 1),  # agent.escalate, which is config.agents[1]
        ("red", False, 0),  # a green lap: the agent again
        ("red", False, 0),
    ]
    assert laps[2]["ticked"] == ["item 1 wrapped"]
    assert git(repo, "show", f"{laps[2]['commit']}:done-3") == "escalate"
    assert "Ralph-Escalated: command" in git(repo, "log", "-1", "--format=%B", laps[2]["commit"])
    assert "Ralph-Escalated" not in git(repo, "log", "-1", "--format=%B", laps[3]["commit"])
    assert "lap 3 of at most 5 escalated to command" in result.stdout
    shown = ralph(repo, "show", "3", "--run", "r")
    assert "escalated: agent.escalate (command) ran it" in shown.stdout
    assert "lap 3: escalated to command" in ralph(repo, "log", "--run", "r").stdout


def test_a_stuck_item_is_split_by_the_planner_into_steps_under_it_and_stays_open_until_ticked(tmp_path: Path):
    # The planner role's steps: one claims a grant, which a split's step never carries.
    steps = plan("child A: the parser (may change: ralph.yaml, tests/)", "child B: the printer")
    with ScriptedServer([tool_call("write_plan", steps)]) as server:
        planner = {"model": "planner-1", "base_url": server.base_url, "api_key_env": "NO_SUCH_KEY"}
        agent = {"command": ON_STEPS, "escalate_after": 2}
        repo = repo_with(tmp_path, agent, roles={"planner": planner}, limits={"max_laps": 7})
        result = ralph(repo, "run", "--name", "r", "--plain")
        asked = server.requests[0].body["messages"][-1]["content"]
    assert result.returncode == 0, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [(lap["status"], lap["split"], lap["ticked"], lap["done"]) for lap in laps] == [
        ("red", None, [], False),
        ("red", None, [], False),
        ("green", "item 1 wrapped", [], False),
        ("green", None, ["child A: the parser"], False),
        ("green", None, ["child B: the printer"], False),  # every step ticked: the item is still open
        ("green", None, ["item 1 wrapped"], False),  # a lap ticked the item itself
        ("green", None, ["item 2"], True),
    ]
    split = laps[2]
    assert split["reason"] == "split into 2 steps; all checks pass" and split["progress"]
    # The steps nested under the item, whose own lines stay; every other byte as it was.
    assert git(repo, "show", f"{split['commit']}:TODO.md") + "\n" == TODO.replace(
        "  wrapped\n", "  wrapped\n  - [ ] child A: the parser\n  - [ ] child B: the printer\n"
    )
    assert "- [ ] item 1\n  wrapped\n  - [x] child A: the parser\n  - [x] child B: the printer\n" in git(
        repo, "show", f"{laps[4]['commit']}:TODO.md"
    )
    assert git(repo, "diff", "--name-only", split["parent"], split["commit"]) == "TODO.md"
    assert "Ralph-Split: item 1 wrapped" in git(repo, "log", "-1", "--format=%B", split["commit"])
    assert git(repo, "show", f"{laps[5]['commit']}:work-6") == "item 1"
    # Items added, none changed: the TODO rule of `ralph hook todo` takes the split as it is.
    (repo / "TODO.md").write_text(git(repo, "show", f"{split['commit']}:TODO.md") + "\n")
    git(repo, "add", "TODO.md")
    hook = ralph(repo, "hook", "todo")
    assert hook.returncode == 0, hook.stderr
    assert "lap 3 of at most 7 split of item 1 wrapped" in result.stdout
    # The planner was told the item, why the laps were red, and the rest.
    assert "The stuck item: item 1 wrapped" in asked and "lap 2: " in asked and "- [ ] item 2" in asked


def test_a_split_that_would_repeat_another_item_is_refused_and_the_run_goes_on(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", plan("child A", "item 2"))]) as server:
        planner = {"model": "planner-1", "base_url": server.base_url, "api_key_env": "NO_SUCH_KEY"}
        agent = {"command": BREAKS, "escalate_after": 1}
        repo = repo_with(tmp_path, agent, roles={"planner": planner}, limits={"max_laps": 3, "stagnation": 5})
        result = ralph(repo, "run", "--name", "r", "--plain")
    assert result.returncode == 3, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [(lap["status"], lap["split"]) for lap in laps] == [("red", None), ("red", "item 1 wrapped"), ("red", None)]
    assert laps[1]["reason"] == "the planner's split was refused: it repeats an item the TODO has: 'item 2'"
    assert git(repo, "rev-parse", f"{laps[1]['commit']}^{{tree}}") == git(repo, "rev-parse", "HEAD^{tree}")
    assert git(repo, "rev-parse", "ralph/r") == git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize(
    ("children", "why"),
    [
        ([], "0 item(s): a split gives 2 to 20"),
        (["only one"], "1 item(s): a split gives 2 to 20"),
        ([f"part {n}" for n in range(21)], "21 item(s)"),
        (["[x] done already", "b"], "an item is its text, not a checkbox"),
        (["a", "a"], "it gives one item twice"),
        (["a", "item 2"], "it repeats an item the TODO has"),
        (["a", "x" * 501], "an item must be one line"),
        (["a", "b\x00"], "would not read back under it"),  # markdown reads a NUL as U+FFFD
    ],
)
def test_a_planner_answer_that_is_not_a_split_of_the_one_item_is_refused(children: list[str], why: str):
    with pytest.raises(SplitRefused, match=re.escape(why)):
        split_text("- [ ] item 1\n- [ ] item 2\n```\n- [ ] in a fence\n```\n", "item 1", children)


@pytest.mark.parametrize(
    ("text", "written"),
    [
        # under the item's text, with its line ends; the list it is in goes on after the steps
        (
            "1. [x] done\r\n2. [ ] item 1\r\n3. [ ] item 2\r\n",
            "1. [x] done\r\n2. [ ] item 1\r\n   - [ ] a\r\n   - [ ] b\r\n3. [ ] item 2\r\n",
        ),
        ("- [ ] item 1", "- [ ] item 1\n  - [ ] a\n  - [ ] b\n"),  # the last line, without a line end
        ("- [ ] item 1\n  - [x] sub\n", "- [ ] item 1\n  - [ ] a\n  - [ ] b\n  - [x] sub\n"),  # before its own steps
        ("- x\n  - [ ] item 1\n  - [ ] y\n", "- x\n  - [ ] item 1\n    - [ ] a\n    - [ ] b\n  - [ ] y\n"),
    ],
)
def test_a_split_nests_its_steps_under_the_item_whose_line_stays(text: str, written: str):
    assert split_text(text, "item 1", ["a", "b"]) == written


def test_a_split_s_steps_grant_nothing():
    steps = ["a (may change: tests/test_calc.py)", "b (may change: ralph.yaml, .github/)"]
    assert split_text("- [ ] item 1 (may change: calc.py)\n", "item 1 (may change: calc.py)", steps) == (
        "- [ ] item 1 (may change: calc.py)\n  - [ ] a\n  - [ ] b\n"
    )


def test_a_split_that_would_move_the_item_s_own_steps_is_refused():
    with pytest.raises(SplitRefused, match="would not read back under it"):  # `sub` would go under `b`
        split_text("- [ ] item 1\n    - [ ] sub\n", "item 1", ["a", "b"])


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        ({"escalate": {"kind": "command", "command": "x"}}, "agent.escalate needs agent.escalate_after"),
        ({"escalate_after": 2, "split": False}, "needs agent.escalate, or agent.split: true"),
        ({"escalate_after": 0}, "agent.escalate_after"),
        (
            {"escalate_after": 1, "escalate": {"kind": "command", "command": "x", "escalate_after": 1}},
            "that agent has no fallback, escalate or escalate_after of its own",
        ),
        ({"escalate_after": 2}, "set limits.stagnation to 3 or more"),  # 2 red laps and the split: 3
        ({"escalate_after": 1, "fallback": [{"kind": "command", "command": "x", "escalate_after": 1}]}, "fallback"),
    ],
)
def test_a_mistake_in_the_stuck_keys_is_one_line(agent: dict, said: str):
    settings = {"goal": "g", "agent": {"kind": "command", "command": "true", **agent}, "limits": {"stagnation": 2}}
    with pytest.raises(RalphError) as raised:
        config_module.parse(json.dumps(settings), "ralph.yaml")
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_with_the_built_in_agent_the_split_is_the_planner_role_s_own_conversation(tmp_path: Path):
    # No roles.planner: the agent's model splits, as the planner role (read-only tools, no edit).
    breaks = tool_call("str_replace_based_edit_tool", {"command": "create", "path": "broken", "file_text": "x"})
    with ScriptedServer([breaks, finish("tried"), tool_call("write_plan", plan("part a", "part b"))]) as server:
        config = {
            "goal": "g",
            "agent": {
                "kind": "openai",
                "model": "m",
                "base_url": server.base_url,
                "escalate_after": 1,
                "fix_attempts": 0,
            },
            "checks": ["test ! -e broken"],
            "limits": {"max_laps": 2, "stagnation": 2},
        }
        repo = make_repo(tmp_path / "repo", {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] item 1\n"})
        result = ralph(repo, "run", "--name", "r", "--plain", env={"OPENAI_API_KEY": "k"})
        offered = [[tool["function"]["name"] for tool in request.body["tools"]] for request in server.requests]
    assert result.returncode == 3, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [(lap["status"], lap["split"]) for lap in laps] == [("red", None), ("green", "item 1")], laps[0]["reason"]
    assert "str_replace_based_edit_tool" in offered[0] and offered[2] == ["view", "list", "search", "write_plan"]
    assert git(repo, "show", "ralph/r:TODO.md") == "- [ ] item 1\n  - [ ] part a\n  - [ ] part b"


# A slot's lap: ticks the items it claimed (RALPH_ITEMS), but breaks on "hard" unless it is
# agent.escalate (WHO=escalate).
SLOT_AGENT = r"""
import os, pathlib, sys
items = [line for line in os.environ["RALPH_ITEMS"].splitlines() if line]
if "hard" in items and sys.argv[1] != "escalate":
    pathlib.Path("broken").write_text("x")
    sys.exit(0)
todo = pathlib.Path("TODO.md")
text = todo.read_text()
for item in items:
    text = text.replace(f"- [ ] {item}", f"- [x] {item}")
todo.write_text(text)
pathlib.Path(f"by-{sys.argv[1]}-{os.environ['RALPH_LAP']}").write_text("done\n")
"""


def test_a_slot_whose_item_is_stuck_escalates_and_the_other_slots_item_does_not(tmp_path: Path):
    script = tmp_path / "slot_agent.py"
    script.write_text(SLOT_AGENT)
    agent = {
        "command": f"{PY} {script} agent",
        "escalate": {"kind": "command", "command": f"{PY} {script} escalate"},
        "escalate_after": 2,
    }
    todo_text = "# TODO\n- [ ] hard\n- [ ] one easy\n- [ ] another easy\n"
    repo = repo_with(tmp_path, agent, todo_text, limits={"max_laps": 8, "stagnation": 6})
    result = ralph(repo, "run", "--name", "p", "--parallel", "2", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    laps = sorted(lap_notes(repo, "p"), key=lambda lap: lap["lap"])
    on_hard = [(lap["status"], lap["escalated"]) for lap in laps if lap["items"] == ["hard"]]
    assert on_hard == [("red", False), ("red", False), ("green", True)]  # two red, then agent.escalate's
    others = [lap for lap in laps if lap["items"] != ["hard"]]
    assert {lap["status"] for lap in others} == {"green"} and not any(lap["escalated"] for lap in others)
    (escalated,) = [lap for lap in laps if lap["escalated"]]
    assert "Ralph-Escalated: command" in git(repo, "log", "-1", "--format=%B", escalated["commit"])
    assert f"lap {escalated['lap']} of at most 8 escalated to command" in result.stdout


# The stuck agent as an attacker: asked to plan (lap 0: the planner's scratch workspace), it
# splits its stuck item into two trivial ones; given one of those, it ticks them all with an
# empty file; any other lap is red. On a run where it splits, that run would end done.
SPLITS_ITS_OWN = r"""
import os, pathlib, re
todo = pathlib.Path("TODO.md")
if os.environ["RALPH_LAP"] == "0":
    todo.write_text("# TODO\n\n- [ ] write a note\n- [ ] keep the note\n")
    pathlib.Path("PLAN.md").write_text("trivial on purpose\n")
    raise SystemExit(0)
text = todo.read_text()
if re.search(r"- \[ \] (write|keep) the note|- \[ \] write a note", text):
    text = re.sub(r"- \[ \] (write a note|keep the note)", r"- [x] \1", text)
    todo.write_text(text)
    pathlib.Path("note").write_text("")
else:
    pathlib.Path("broken").write_text("x")
"""


def test_the_stuck_command_agent_never_splits_its_own_item_so_the_run_is_not_done(tmp_path: Path):
    script = tmp_path / "attacker.py"
    script.write_text(SPLITS_ITS_OWN)
    agent = {
        "command": f"{PY} {script}",
        "escalate": {"kind": "command", "command": f"{PY} {script}"},
        "escalate_after": 1,
    }
    job = "# TODO\n\n- [ ] Implement the parser\n"
    repo = repo_with(tmp_path, agent, job, limits={"max_laps": 6, "stagnation": 4})
    result = ralph(repo, "run", "--name", "r", "--plain")
    assert result.returncode == 4, result.stdout + result.stderr  # the stagnation fuse, never done
    laps = lap_notes(repo, "r")
    assert [lap["split"] for lap in laps] == [None] * 4 and not any(lap["done"] for lap in laps)
    assert "roles.planner" in result.stdout  # said once why the stuck item is not split
    assert result.stdout.count("is not split") == 1
    assert git(repo, "show", "ralph/r:TODO.md") + "\n" == job
    status = ralph(repo, "status", "--run", "r").stdout
    assert "run r: not done" in status and "1 TODO item(s) open: Implement the parser" in status


def test_trivial_steps_of_a_planner_s_split_ticked_with_an_empty_file_leave_the_item_open(tmp_path: Path):
    script = tmp_path / "attacker.py"
    script.write_text(SPLITS_ITS_OWN)
    with ScriptedServer([tool_call("write_plan", plan("write a note", "keep the note"))]) as server:
        planner = {"model": "planner-1", "base_url": server.base_url, "api_key_env": "NO_SUCH_KEY"}
        agent = {"command": f"{PY} {script}", "escalate_after": 1}
        job = "# TODO\n\n- [ ] Implement the parser\n"
        repo = repo_with(tmp_path, agent, job, roles={"planner": planner}, limits={"max_laps": 5})
        result = ralph(repo, "run", "--name", "r", "--plain")
    assert result.returncode == 3, result.stdout + result.stderr  # max_laps, never done
    laps = lap_notes(repo, "r")
    assert [(lap["status"], lap["split"], lap["done"]) for lap in laps] == [
        ("red", None, False),
        ("green", "Implement the parser", False),
        ("green", None, False),  # both steps ticked, with an empty file: the item is open
        ("red", None, False),
        ("red", None, False),
    ]
    assert git(repo, "show", "ralph/r:TODO.md") + "\n" == (
        "# TODO\n\n- [ ] Implement the parser\n  - [x] write a note\n  - [x] keep the note\n"
    )
    status = ralph(repo, "status", "--run", "r").stdout
    assert "run r: not done" in status and "1 TODO item(s) open: Implement the parser" in status
