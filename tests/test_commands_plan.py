"""`ralph plan`: a scripted model reads the repository through read-only tools and writes TODO.md."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.repos import git, make_repo
from helpers.running import ralph

from ralph import todo
from ralph.agents.scripted import ScriptedServer, Step, tool_call

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
    assert saved["recommendation"] == GOOD_PLAN["recommendation"]
    assert (folder / "transcript.jsonl").is_file() and folder.parent == repo / ".git" / "ralph" / "plans"


def test_without_yes_and_no_terminal_the_plan_is_shown_and_nothing_written(tmp_path: Path):
    with ScriptedServer([tool_call("write_plan", GOOD_PLAN)]) as server:
        repo = repo_with(tmp_path, {"kind": "openai", "model": "planner-1", "base_url": server.base_url})
        result = ralph(repo, "plan", "Another goal")
    assert result.returncode == 1
    assert "Make test_mul pass" in result.stdout and "TODO.md not written — `ralph plan --yes`" in result.stdout
    assert not (repo / "TODO.md").exists()
    assert "The goal: Another goal" in server.requests[0].body["messages"][1]["content"]


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
    result = ralph(repo, "plan", "--yes")
    assert result.returncode == 1 and "ralph plan needs a model: set roles.planner.model" in result.stderr
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
