"""`ralph plan`: a scripted model reads the repository through read-only tools and writes TODO.md."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.gh_stand_in import StandInGh
from helpers.repos import PY, git, make_repo, needs_bwrap, python_agent
from helpers.running import ralph, ralph_on_a_terminal, ralph_workspaces

from ralph import todo
from ralph.agents.scripted import Hang, ScriptedServer, Step, tool_call

GOOD_PLAN = {
    "approaches": [
        {"name": "Fix in place", "pros": ["small diff"], "cons": ["keeps the old API"]},
        {"name": "Rewrite calc", "pros": ["cleaner"], "cons": ["risky", "breaks callers"]},
    ],
    "recommendation": "Fix in place: the tests pin the API.",
    "todo": ["Make test_mul pass in tests/test_calc.py", "Make test_sub\npass"],
}
FILES = {
    "calc.py": "def mul(a, b):\n    raise NotImplementedError\n",
    "tests/test_calc.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
}


def repo_with(tmp_path: Path, agent: dict, **config: object) -> Path:
    settings = {"goal": "Finish calc", "agent": agent, "checks": ["true"], **config}
    repo = make_repo(tmp_path / "repo", FILES, config=settings)
    (repo / ".env").write_text("TOKEN=secret-untracked\n")  # untracked: the planner cannot read it
    return repo


def tool_results(request: dict) -> list[str]:
    return [message["content"] for message in request["messages"] if message["role"] == "tool"]


def test_the_planner_reads_the_repository_and_writes_the_checklist(tmp_path: Path):
    script: list[Step] = [
        tool_call("list", {"path": "."}),
        tool_call("view", {"path": "calc.py"}),
        tool_call("view", {"path": ".env"}),
        tool_call("view", {"path": "../../etc/passwd"}),
        tool_call("search", {"pattern": "def test_"}),
        tool_call("write_plan", {"approaches": [], "recommendation": "", "todo": ["x"]}),  # malformed
        tool_call("write_plan", GOOD_PLAN),
    ]
    with ScriptedServer(script) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        result = ralph(repo, "plan", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    text = (repo / "TODO.md").read_text()
    assert [item.text for item in todo.parse(text)] == [
        "Make test_mul pass in tests/test_calc.py",
        "Make test_sub pass",
    ]
    assert "Goal: Finish calc" in text
    assert "approach: Rewrite calc" in result.stdout and "- breaks callers" in result.stdout
    assert "recommended: Fix in place: the tests pin the API." in result.stdout
    assert "review it, commit it, then `ralph run`" in result.stdout

    seen = tool_results(server.requests[-1].body)
    assert "calc.py" in seen[0] and "tests/test_calc.py" in seen[0] and ".env" not in seen[0]
    assert "raise NotImplementedError" in seen[1]
    assert seen[2].startswith("error: .env: no such file") and "secret-untracked" not in json.dumps(seen)
    assert seen[3].startswith("error: ../../etc/passwd: paths are relative")
    assert "tests/test_calc.py:4:def test_mul():" in seen[4]
    assert seen[5].startswith("format error: the plan does not fit")
    assert all(request.body["tools"][-1]["function"]["name"] == "write_plan" for request in server.requests)

    folder = Path(result.stdout.split("what it read: ")[1].split()[0])
    saved = json.loads((folder / "plan.json").read_text())
    assert saved["files_read"] == ["calc.py"] and saved["goal"] == "Finish calc"
    assert saved["plan"]["recommendation"] == GOOD_PLAN["recommendation"] and saved["by"] == "the model planner-1"
    assert (folder / "transcript.jsonl").is_file() and folder.parent == repo / ".git" / "ralph" / "plans"


def test_without_yes_and_no_terminal_the_plan_is_shown_and_nothing_written(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        result = ralph(repo, "plan", "Another goal")
    assert result.returncode == 1
    assert "Make test_mul pass" in result.stdout
    assert "TODO.md not written — `ralph plan 'Another goal' --yes` writes this plan" in result.stdout
    assert not (repo / "TODO.md").exists()
    assert "The goal: Another goal" in server.requests[0].body["messages"][1]["content"]
    result = ralph(repo, "plan", todo.PLACEHOLDER_GOAL)  # no plan for words meant to be replaced
    assert result.returncode == 1 and "the goal is still `ralph init`'s placeholder" in result.stderr


def test_a_checklist_with_items_is_never_replaced_without_force(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        (repo / "TODO.md").write_text("- [ ] Mine\n")
        result = ralph(repo, "plan", "--yes")
        assert result.returncode == 1 and result.stderr.strip() == (
            "ralph: TODO.md already has 1 items — `ralph plan --force` replaces it"
        )
        assert (repo / "TODO.md").read_text() == "- [ ] Mine\n" and server.requests == []
        assert ralph(repo, "plan", "--yes", "--force").returncode == 0
    assert "- [ ] Make test_sub pass" in (repo / "TODO.md").read_text()


def test_the_planner_has_a_model_of_its_own_beside_a_command_agent(tmp_path: Path):
    repo = repo_with(tmp_path, {"kind": "command", "command": "true"})
    result = ralph(repo, "plan", "--yes")  # the agent itself plans, and this one writes nothing
    assert result.returncode == 1 and result.stderr == "ralph: the agent (command) wrote no TODO.md\n"
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)]) as server:
        roles = {"planner": {"model": "big-planner", "base_url": server.base_url}}
        (repo / "ralph.yaml").write_text(json.dumps({**json.loads((repo / "ralph.yaml").read_text()), "roles": roles}))
        git(repo, "commit", "-qam", "planner")
        result = ralph(repo, "plan", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.requests[0].body["model"] == "big-planner"


def test_odd_replies_and_odd_checklists_get_a_clear_answer_never_a_crash(tmp_path: Path):
    script: list[Step] = [
        tool_call("view", {"path": "calc.py", "view_range": ["²", 5]}),  # isdigit, yet no int
        tool_call("write_plan", "[" * 100_000),  # nested deeper than any parser recurses
        tool_call("write_plan", GOOD_PLAN),
    ]
    with ScriptedServer(script) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        result = ralph(repo, "plan", "--yes")
        assert result.returncode == 0, result.stdout + result.stderr
        seen = tool_results(server.requests[-1].body)
        assert seen[0].startswith("error: ValueError") and seen[1].startswith("format error: the arguments are nested")

        (repo / "TODO.md").unlink()
        (repo / "TODO.md").symlink_to(tmp_path / "outside.md")  # a link: written through, it leaves the repo
        result = ralph(repo, "plan", "--yes")
        assert result.returncode == 1 and "TODO.md is not a regular file" in result.stderr
        assert not (tmp_path / "outside.md").exists() and len(server.requests) == 3

    settings = json.loads((repo / "ralph.yaml").read_text())
    (repo / "ralph.yaml").write_text(json.dumps({**settings, "files": {"todo": "../outside.md"}}))
    result = ralph(repo, "plan", "--yes")
    assert (
        result.returncode == 1 and "files.todo: '../outside.md' must be a path inside the repository" in result.stderr
    )


def test_the_checklist_ralph_init_wrote_is_a_placeholder_plan_may_replace(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        assert ralph(repo, "init").returncode == 0 and "First slice of the job" in (repo / "TODO.md").read_text()
        result = ralph(repo, "plan", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Make test_mul pass" in (repo / "TODO.md").read_text()
    (repo / "TODO.md").write_text("Notes of mine, no items yet.\n")
    result = ralph(repo, "plan", "--yes")
    assert result.returncode == 1 and "TODO.md already has text of yours" in result.stderr


def test_a_checklist_of_headings_and_blank_lines_is_empty_to_plan(tmp_path: Path):
    """A `# TODO` written to be filled in holds nothing of the user's; a line under it does."""
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        (repo / "TODO.md").write_text("# TODO\r\n\n  ## Now ##\n \t\n###\n#### Later\n\n")
        result = ralph(repo, "plan", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "- [ ] Make test_mul pass" in (repo / "TODO.md").read_text()
    for mine in ("# TODO\n\nGoal: fix it\n", "#TODO\n", "    # indented: code\n", "# TODO\n\u00a0\n"):
        (repo / "TODO.md").write_text(mine)
        result = ralph(repo, "plan", "--yes")
        assert result.returncode == 1 and "TODO.md already has text of yours" in result.stderr, mine
        assert (repo / "TODO.md").read_text() == mine


def test_a_goal_given_to_plan_replaces_ralph_inits_placeholder_goal(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)] * 2) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        settings = json.loads((repo / "ralph.yaml").read_text())
        rest = "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items() if key != "goal")
        (repo / "ralph.yaml").write_text(f'# mine\ngoal: "{todo.PLACEHOLDER_GOAL}"      # required\n{rest}')
        assert ralph(repo, "plan", "Make mul work", "--yes").returncode == 0
        assert (repo / "ralph.yaml").read_text() == f'# mine\ngoal: "Make mul work"      # required\n{rest}'
        (repo / "TODO.md").unlink()
        assert ralph(repo, "plan", "Something else", "--yes").returncode == 0  # a goal of the user's stays
        assert (repo / "ralph.yaml").read_text() == f'# mine\ngoal: "Make mul work"      # required\n{rest}'


# An agent CLI as the planner: it looks around, writes its plan, and tries what it should not.
CLI_PLANNER = """\
import os, pathlib, sys
prompt = sys.stdin.read()
pathlib.Path(os.environ["PLANNER_SAW"]).write_text(prompt + "\\n--cwd " + os.getcwd())
assert "raise NotImplementedError" in pathlib.Path("calc.py").read_text()
pathlib.Path("calc.py").write_text("edited by the planner\\n")  # a scratch copy: never kept
pathlib.Path("stray.txt").write_text("x")
try:
    pathlib.Path(USER_REPO, "calc.py").write_text("reached the user's tree\\n")
except OSError:
    pass
pathlib.Path("TODO.md").write_text("# TODO\\n\\nGoal: Finish calc\\n\\n- [ ] Make mul work\\n- [ ]   Then   \\x1b[31mdiv\\n")
pathlib.Path("PLAN.md").write_text("Weighed: fix in place, or rewrite.\\nRecommend: fix in place.\\n")
"""


@needs_bwrap
def test_the_agent_cli_plans_sandboxed_in_a_scratch_workspace_at_head(tmp_path: Path):
    repo = tmp_path / "repo"
    agent = python_agent(tmp_path / "planner.py", CLI_PLANNER.replace("USER_REPO", repr(str(repo))))
    sandbox = {"mode": "required", "writable": [str(tmp_path / "saw")]}
    repo = repo_with(tmp_path, agent, sandbox=sandbox, env={"pass": ["PLANNER_SAW"]})
    (tmp_path / "saw").mkdir()
    result = ralph(repo, "plan", "--yes", env={"PLANNER_SAW": str(tmp_path / "saw" / "prompt")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert [item.text for item in todo.parse((repo / "TODO.md").read_text())] == ["Make mul work", "Then div"]
    assert "planning with the agent (command)" in result.stdout and "Recommend: fix in place." in result.stdout
    assert (repo / "calc.py").read_text() == FILES["calc.py"] and not (repo / "stray.txt").exists()
    assert git(repo, "status", "--porcelain") == "?? .env\n?? TODO.md"
    saw = (tmp_path / "saw" / "prompt").read_text()
    assert "The goal: Finish calc" in saw and "write the plan into two files here" in saw
    assert str(repo) not in saw.split("--cwd ")[1]  # it worked in a workspace of ralph's, not the user's tree
    folder = Path(result.stdout.split("what it read: ")[1].split()[0])
    saved = json.loads((folder / "plan.json").read_text())
    assert saved["by"] == "the agent (command)" and saved["notes"].startswith("Weighed:") and saved["written"]


@pytest.mark.parametrize(
    ("writes", "said"),
    [
        ("pathlib.Path('TODO.md').write_text('- [x] done already\\n- [ ] b\\n')", "with items ticked already"),
        ("pathlib.Path('TODO.md').symlink_to('/etc/passwd')", "is not a regular file"),
        ("pathlib.Path('TODO.md').mkdir()", "is not a regular file"),
        ("pathlib.Path('TODO.md').write_text('no items, just prose\\n')", "without a checklist item"),
        ("pathlib.Path('TODO.md').write_text('- [ ] x\\n' * 201)", "201 items to TODO.md"),
        ("print('not logged in'); sys.exit(3)", "did not plan (failed)"),
    ],
)
def test_a_plan_an_agent_cli_writes_wrong_is_one_line_and_writes_nothing(tmp_path: Path, writes: str, said: str):
    agent = python_agent(tmp_path / "planner.py", f"import pathlib, sys\n{writes}\n")
    repo = repo_with(tmp_path, agent)
    result = ralph(repo, "plan", "--yes")
    assert result.returncode == 1 and said in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (repo / "TODO.md").exists()


def test_plan_yes_writes_the_plan_shown_without_asking_the_planner_again(tmp_path: Path):
    again = dict(GOOD_PLAN, todo=["A plan made anew"])
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN), tool_call("write_plan", again)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        shown = ralph(repo, "plan")  # no terminal: shown, not written
        assert shown.returncode == 1 and "`ralph plan --yes` writes this plan without asking again" in shown.stdout
        result = ralph(repo, "plan", "--yes")
        assert result.returncode == 0 and len(server.requests) == 1, result.stdout + result.stderr
        assert "the plan shown before for this goal" in result.stdout and "recommended: Fix in place" in result.stdout
        assert "- [ ] Make test_sub pass" in (repo / "TODO.md").read_text()
        (repo / "TODO.md").unlink()
        result = ralph(repo, "plan", "--yes")  # written once: the next plan is a new one
        assert "- [ ] A plan made anew" in (repo / "TODO.md").read_text() and len(server.requests) == 2


CLAUDE_STAND_IN = """#!PYTHON
import json, os, pathlib, sys
prompt = sys.stdin.read()
seen = {"argv": sys.argv[1:], "goal": "The goal: Finish calc" in prompt}  # (the sandbox: no file but here)
pathlib.Path("PLAN.md").write_text(json.dumps(seen))
pathlib.Path("TODO.md").write_text("# TODO\\n\\nGoal: Finish calc\\n\\n- [ ] Make mul work\\n")
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "planned",
                  "total_cost_usd": 0.05, "usage": {"input_tokens": 40, "output_tokens": 9}}))
"""


def test_ralph_init_then_ralph_plan_plans_with_the_claude_preset(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(CLAUDE_STAND_IN.replace("PYTHON", PY))
    (bin_dir / "claude").chmod(0o755)
    repo = make_repo(tmp_path / "repo", FILES)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    assert ralph(repo, "init", env=env).returncode == 0  # the claude preset, ralph init's default
    result = ralph(repo, "plan", "Finish calc", "--yes", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "planning with the agent (claude)" in result.stdout and "(planned by the agent (claude))" in result.stdout
    folder = Path(result.stdout.split("what it read: ")[1].split()[0])
    saved = json.loads((folder / "plan.json").read_text())
    saw = json.loads(saved["notes"])
    assert saw["argv"][:2] == ["-p", "--output-format"] and "--strict-mcp-config" in saw["argv"] and saw["goal"]
    assert [item.text for item in todo.parse((repo / "TODO.md").read_text())] == ["Make mul work"]
    assert 'goal: "Finish calc"' in (repo / "ralph.yaml").read_text()  # init's placeholder goal replaced
    usage = saved["usage"]
    assert usage["prompt_tokens"] == 40 and usage["completion_tokens"] == 9 and usage["cost_usd"] == 0.05


def test_plan_of_an_issue_takes_its_task_list_or_else_plans_its_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    gh = StandInGh.install(tmp_path / "gh")
    monkeypatch.setenv("PATH", f"{gh.bin}{os.pathsep}{os.environ['PATH']}")
    gh.add_issue(7, "Finish calc", "Steps:\n\n- [x] Read calc\n- [ ] Make mul work\n")
    gh.add_issue(8, "Make div", "We need div too: `$(touch PWNED)`")
    gh.add_issue(9, "Old", "- [ ] x", state="CLOSED")
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        result = ralph(repo, "plan", "--issue", "7", "--yes")
        assert result.returncode == 0 and server.requests == [], result.stdout + result.stderr  # its list is the plan
        text = (repo / "TODO.md").read_text()
        assert todo.parse(text) == [todo.Item("Read calc", True), todo.Item("Make mul work", False)]
        assert "Goal: Finish calc\nFrom issue #7: https://github.com/owner/repo/issues/7\n" in text
        (repo / "TODO.md").unlink()
        result = ralph(repo, "plan", "--issue", "8", "--yes")
        assert result.returncode == 0 and "We need div too" in server.requests[0].body["messages"][1]["content"]
        assert "- [ ] Make test_mul pass" in (repo / "TODO.md").read_text() and not (repo / "PWNED").exists()
    (repo / "TODO.md").unlink()
    result = ralph(repo, "plan", "--issue", "9", "--yes")
    assert result.returncode == 1 and "issue #9 is closed" in result.stderr and not (repo / "TODO.md").exists()


def test_a_models_items_and_an_edited_plan_json_reach_todo_md_without_escape_codes(tmp_path: Path):
    hostile = dict(GOOD_PLAN, todo=["Clear \x1b[2Jthe \x1b]0;owned\x07screen\x00", "Right\u202eto left"])
    with ScriptedServer([tool_call("write_plan", hostile)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        shown = ralph(repo, "plan")
        assert shown.returncode == 1 and "\x1b" not in shown.stdout
        folder = Path(shown.stdout.split("what it read: ")[1].split()[0])
        saved = json.loads((folder / "plan.json").read_text())
        saved["items"].append("Edited \x1b]8;;https://x.example\x07in\x1b]8;;\x07 by hand")
        (folder / "plan.json").write_text(json.dumps(saved))
        result = ralph(repo, "plan", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    written = (repo / "TODO.md").read_text()
    assert "- [ ] Clear the screen\n- [ ] Rightto left\n- [ ] Edited in by hand\n" in written


# A planner proposing to open what the scope keeps shut: the user's test and the checks' config.
GRANTING_PLAN = dict(
    GOOD_PLAN,
    todo=["Make test_mul pass (may change: tests/test_calc.py)", "Loosen the checks (may change: ralph.yaml)"],
)


def test_a_planners_grants_are_shown_and_with_yes_none_is_written(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", GRANTING_PLAN)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        result = ralph(repo, "plan", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "grants proposed by the model planner-1" in result.stdout
    assert "- Loosen the checks (may change: ralph.yaml)" in result.stdout
    assert "grants taken off the items (--yes takes none)" in result.stdout
    written = (repo / "TODO.md").read_text()
    assert [item.text for item in todo.parse(written)] == ["Make test_mul pass", "Loosen the checks"]
    assert "may change" not in written


def test_a_planners_grants_are_written_only_when_the_user_keeps_them_on_a_terminal(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", GRANTING_PLAN)] * 2) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        kept = ralph_on_a_terminal(repo, "plan", typed="y\ny\n")  # write these items? keep these grants?
        assert kept.returncode == 0, kept.stdout + kept.stderr
        assert "keep these grants?" in kept.stdout and "grants kept" in kept.stdout
        assert [item.text for item in todo.parse((repo / "TODO.md").read_text())] == GRANTING_PLAN["todo"]
        (repo / "TODO.md").unlink()
        refused = ralph_on_a_terminal(repo, "plan", "--force", typed="y\n\n")  # Enter: the default, no
    assert refused.returncode == 0, refused.stdout + refused.stderr
    assert "grants taken off the items (not kept)" in refused.stdout
    assert [item.text for item in todo.parse((repo / "TODO.md").read_text())] == [
        "Make test_mul pass",
        "Loosen the checks",
    ]


def test_an_issues_grants_reach_todo_md_through_plan_only_when_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    gh = StandInGh.install(tmp_path / "gh")
    monkeypatch.setenv("PATH", f"{gh.bin}{os.pathsep}{os.environ['PATH']}")
    gh.add_issue(7, "Finish calc", "- [x] Read calc (may change: .github/)\n- [ ] Make mul work (may change: **)\n")
    repo = repo_with(tmp_path, {"kind": "command", "command": "true"})
    result = ralph(repo, "plan", "--issue", "7", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "grants proposed by the task list of issue #7" in result.stdout
    assert todo.parse((repo / "TODO.md").read_text()) == [
        todo.Item("Read calc", True),
        todo.Item("Make mul work", False),
    ]


def _plan_workspaces(repo: Path) -> list[str]:
    return [name for name in ralph_workspaces(repo) if "plan" in name]


def _killed_while_planning(repo: Path, server: ScriptedServer) -> None:
    """A real `ralph plan`, killed (-9) while its planner (a model that never answers) plans."""
    asked = len(server.requests)
    planning = subprocess.Popen(
        [sys.executable, "-m", "ralph", "plan", "--yes"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(server.requests) == asked and planning.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(planning.pid, signal.SIGKILL)
    planning.wait()
    assert _plan_workspaces(repo), "the plan was killed before it made its workspace"


def test_a_killed_plans_workspace_is_reclaimed_by_clean_and_by_the_next_plan(tmp_path: Path):
    # not strict: the killed plans' hanging requests hold no slot the next plan waits for
    with ScriptedServer([Hang(600), Hang(600), tool_call("write_plan", GOOD_PLAN)], strict=False) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        _killed_while_planning(repo, server)
        cleaned = ralph(repo, "clean")  # no run yet: the plan's leftover is all there is to clean
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert "removed the workspace a killed `ralph plan` left" in cleaned.stdout
        assert _plan_workspaces(repo) == []
        assert ralph(repo, "clean").returncode == 1  # nothing left: as before, no run to clean

        _killed_while_planning(repo, server)
        again = ralph(repo, "plan", "--yes")
        assert again.returncode == 0, again.stdout + again.stderr
    assert _plan_workspaces(repo) == [] and "Make test_mul pass" in (repo / "TODO.md").read_text()
