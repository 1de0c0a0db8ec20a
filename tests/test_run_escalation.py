"""Stuck items: agent.escalate after escalate_after red laps on one item, back to the agent after
a green lap; the planner's split of the item, an ordinary lap commit on TODO.md; a split the
planner gets wrong refused; the keys' mistakes one line each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo
from helpers.running import lap_notes, ralph

from ralph import config as config_module
from ralph.agents.scripted import ScriptedServer, tool_call
from ralph.errors import RalphError
from ralph.run.split import SplitRefused, split_text

# Red on purpose: leaves the file the check refuses.
BREAKS = f"{PY} -c \"open('broken', 'w').write('x')\""
# Green: ticks the first open item and leaves a file that says who did it.
TICKS = f"""{PY} -c "
import os, pathlib
t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', '- [x]', 1))
pathlib.Path('done-' + os.environ['RALPH_LAP']).write_text('{{who}}')
" """
# Green only on a child of a split: ticks the first open item when it is one, else breaks.
ON_CHILDREN = f"""{PY} -c "
import pathlib, re
t = pathlib.Path('TODO.md'); text = t.read_text()
first = re.search(r'- \\[ \\] (.*)', text).group(1)
if first.startswith('child'):
    t.write_text(text.replace('- [ ] ' + first, '- [x] ' + first, 1)); pathlib.Path('did').write_text(first)
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


def test_a_stuck_item_is_split_by_the_planner_and_the_next_lap_works_on_a_child(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", plan("child A: the parser", "child B: the printer"))]) as server:
        planner = {"model": "planner-1", "base_url": server.base_url, "api_key_env": "NO_SUCH_KEY"}
        agent = {"command": ON_CHILDREN, "escalate_after": 2}
        repo = repo_with(tmp_path, agent, roles={"planner": planner}, limits={"max_laps": 4})
        result = ralph(repo, "run", "--name", "r", "--plain")
        asked = server.requests[0].body["messages"][-1]["content"]
    assert result.returncode == 3, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [(lap["status"], lap["split"]) for lap in laps] == [
        ("red", None),
        ("red", None),
        ("green", "item 1 wrapped"),
        ("green", None),
    ]
    split = laps[2]
    assert split["reason"] == "split into 2 items; all checks pass" and split["progress"]
    # The one item's lines replaced, in place; every other byte as it was.
    assert git(repo, "show", f"{split['commit']}:TODO.md") + "\n" == TODO.replace(
        "- [ ] item 1\n  wrapped\n", "- [ ] child A: the parser\n- [ ] child B: the printer\n"
    )
    assert git(repo, "diff", "--name-only", split["parent"], split["commit"]) == "TODO.md"
    assert "Ralph-Split: item 1 wrapped" in git(repo, "log", "-1", "--format=%B", split["commit"])
    assert laps[3]["ticked"] == ["child A: the parser"]
    assert git(repo, "rev-parse", "ralph/r") == laps[3]["commit"]
    assert "lap 3 of at most 4 split of item 1 wrapped" in result.stdout
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
        (["a", "b\x00"], "would not read back as they are"),  # markdown reads a NUL as U+FFFD
    ],
)
def test_a_planner_answer_that_is_not_a_split_of_the_one_item_is_refused(children: list[str], why: str):
    with pytest.raises(SplitRefused, match=re.escape(why)):
        split_text("- [ ] item 1\n- [ ] item 2\n```\n- [ ] in a fence\n```\n", "item 1", children)


def test_a_split_keeps_the_bullet_and_line_ends_of_the_item():
    text = "1. [x] done\r\n2. [ ] item 1\r\n3. [ ] item 2\r\n"
    assert split_text(text, "item 1", ["a", "b"]) == "1. [x] done\r\n2. [ ] a\r\n2. [ ] b\r\n3. [ ] item 2\r\n"


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
