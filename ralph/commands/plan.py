"""`ralph plan`: a model turns the goal into TODO.md, looking at the repository read-only.

The planner (agents/planner.py) looks at the committed tree and ends by calling `write_plan`
with the approaches it weighed, its recommendation and the checklist. ralph shows the plan
and writes the checklist to TODO.md when the user says so. What the planner read and why it
chose is kept in `<git-common-dir>/ralph/plans/<time>/`: its transcript and plan.json.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from ralph import config as config_module
from ralph import git, todo
from ralph.agents import limiter, transcript
from ralph.agents.mcp_tools import McpTools
from ralph.agents.planner import Plan, Planner
from ralph.commands.init import TODO_TEMPLATE
from ralph.errors import Exit, RalphError
from ralph.git import layout
from ralph.isolation import proc
from ralph.isolation.files import replace_with
from ralph.show import ui


def plan(cwd: Path, goal: str | None, config_path: Path | None, yes: bool, force: bool) -> Exit:
    repo = git.open_repo(cwd)
    cfg = config_module.load(config_path or repo.top / config_module.CONFIG_FILE)
    goal = (goal or cfg.goal).strip()
    endpoint = cfg.role_endpoint(cfg.roles.planner)
    if endpoint is None:
        raise RalphError(
            "ralph plan needs a model: set roles.planner.model (and base_url, api_key_env) in "
            "ralph.yaml, or use the built-in agent (agent.kind: openai), whose model it then uses"
        )
    todo_path = repo.top / cfg.files.todo
    if todo_path.is_symlink() or (os.path.lexists(todo_path) and not todo_path.is_file()):
        raise RalphError(f"{cfg.files.todo} is not a regular file (a link, a folder) — ralph plan writes only a file")
    text = todo_path.read_text(encoding="utf-8", errors="replace") if todo_path.exists() else ""
    if text.strip() and text != TODO_TEMPLATE and not force:  # `ralph init`'s placeholder is no one's work
        items = len(todo.parse(text))
        what = f"already has {items} items" if items else "already has text of yours"
        raise RalphError(f"{cfg.files.todo} {what} — `ralph plan --force` replaces it")
    limiter.configure(cfg.limits.requests_per_minute)
    folder = layout.ralph_dir(repo.common_dir) / "plans" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    folder.mkdir(parents=True)
    mcp = None
    if cfg.mcp.offered_to("planner"):
        env = proc.clean_env(allow=tuple(cfg.env.pass_), secrets=cfg.key_variables)
        mcp = McpTools.start(cfg.mcp, repo.top, env, folder)
    try:
        planner = Planner(endpoint, repo.top, repo.head, folder, mcp)
        made = planner.run(goal)
    finally:
        if mcp is not None:
            mcp.close()
    saved = dict(made.model_dump(), goal=goal, files_read=files_read(folder), usage=planner.usage.model_dump())
    (folder / "plan.json").write_text(json.dumps(saved, indent=1), encoding="utf-8")
    _show(made, cfg.files.todo)
    ui.say(f"the planner's reasoning and what it read: {ui.safe(folder)}")
    if not yes and not _confirmed(f"write these {len(made.todo)} items to {cfg.files.todo}?"):
        ui.say(f"{ui.safe(cfg.files.todo)} not written — `ralph plan --yes` writes it without asking")
        return Exit.ERROR
    todo_path.write_text(checklist(goal, made.todo), encoding="utf-8")
    ui.say(f"wrote {ui.safe(cfg.files.todo)} ({len(made.todo)} items): review it, commit it, then `ralph run`")
    if cfg.goal.strip() == todo.PLACEHOLDER_GOAL and goal != todo.PLACEHOLDER_GOAL:
        _set_goal(config_path or repo.top / config_module.CONFIG_FILE, goal)
    return Exit.DONE


def _set_goal(path: Path, goal: str) -> None:
    """ralph.yaml's goal, still `ralph init`'s placeholder, becomes the one planned for: that line
    alone is rewritten, its comment and every other line as the user has them."""
    text = path.read_text(encoding="utf-8")
    quoted = rf"[\"']?{re.escape(todo.PLACEHOLDER_GOAL)}[\"']?"
    placeholder = re.compile(rf"^goal:[ \t]*{quoted}(?=[ \t]*(#|$))", re.MULTILINE)
    written, found = placeholder.subn(lambda _: f"goal: {json.dumps(goal)}", text, count=1)
    if found:
        replace_with(path, written)
        ui.say(f"set the goal in {ui.safe(path.name)}: {ui.safe(goal)}")


def checklist(goal: str, items: list[str]) -> str:
    return f"# TODO\n\nGoal: {goal}\n\n" + "".join(f"- [ ] {item}\n" for item in items)


def files_read(folder: Path) -> list[str]:
    """The files the planner read, from its transcript."""
    seen = []
    for event in transcript.read(folder / "transcript.jsonl"):
        path = event.get("arguments", {}).get("path") if event.get("event") == "tool" else None
        if event.get("name") == "view" and event.get("ok") and isinstance(path, str) and path not in seen:
            seen.append(path)
    return seen


def _show(made: Plan, todo_name: str) -> None:
    for approach in made.approaches:
        ui.say(f"[bold]approach:[/] {ui.safe(approach.name)}")
        for pro in approach.pros:
            ui.say(f"  + {ui.safe(pro)}")
        for con in approach.cons:
            ui.say(f"  - {ui.safe(con)}")
    ui.say(f"[bold]recommended:[/] {ui.safe(made.recommendation)}")
    ui.say(f"[bold]{ui.safe(todo_name)}:[/]")
    for item in made.todo:
        ui.say(f"  - [ ] {ui.safe(item)}")


def _confirmed(question: str) -> bool:
    """The user's yes, asked on the terminal; no terminal, no yes."""
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:  # Ctrl-D
        return False
