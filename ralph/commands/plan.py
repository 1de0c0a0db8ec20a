"""`ralph plan`: the planner turns the goal into TODO.md, looking at the repository at HEAD.

The planner is roles.planner's model, else the agent the laps run (lap/planning.py): a model
looks through read-only tools and calls `write_plan`; an agent CLI runs sandboxed in a scratch
workspace at HEAD and writes TODO.md and PLAN.md there, which ralph reads back. ralph shows the
plan and writes the checklist to the user's TODO.md when the user says so; `--yes` later writes
the plan shown, without asking the planner again, while HEAD, the goal and TODO.md are as they
were. What the planner read and why it chose is kept in `<git-common-dir>/ralph/plans/<time>/`:
its transcript or log, and plan.json. `--issue N` takes the goal from a GitHub issue, and its
task list, when it has one, as the plan.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ralph import config as config_module
from ralph import git, todo
from ralph.agents import limiter, transcript
from ralph.agents.base import Agent
from ralph.agents.kinds import make_agent
from ralph.agents.mcp_tools import McpTools
from ralph.agents.planner import Plan
from ralph.commands.init import TODO_TEMPLATE
from ralph.errors import Exit, RalphError
from ralph.git import layout
from ralph.isolation import proc
from ralph.isolation.files import remove_path, replace_with
from ralph.lap import planning
from ralph.lap.context import RunContext
from ralph.lap.planning import Planned
from ralph.run.loop import sandboxed
from ralph.run.start import accepted, issue_todo, user_says_yes
from ralph.show import ui
from ralph.workspace.places import folder_for
from ralph.workspace.workspace import Workspace

if TYPE_CHECKING:
    from ralph.git.github import Issue

PLAN_FORMAT = 1  # plan.json: 1, a plan waiting to be written by `ralph plan --yes`
# The scratch workspace of this repository's plans: no run's name (those start with a letter or digit).
PLAN_WORKSPACE = "_plan"
# A markdown ATX heading (up to three spaces before it, `#` to `######`, then a space or the line's end)
_HEADING = re.compile(r"[ ]{0,3}#{1,6}(?:[ \t].*)?")


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    """`ralph plan`'s options, as the command line gave them."""

    goal: str | None = None  # GOAL: instead of ralph.yaml's
    config: Path | None = None
    yes: bool = False  # write TODO.md without asking: the plan waiting for this goal, else a new one
    force: bool = False  # replace a TODO.md that has items
    anew: bool = False  # --new: ask the planner even when a plan for this goal is waiting
    issue: int | None = None  # --issue: the goal (and the task list, if any) from this GitHub issue


def plan(cwd: Path, options: PlanOptions) -> Exit:
    repo = git.open_repo(cwd)
    config_path = options.config or repo.top / config_module.CONFIG_FILE
    cfg = config_module.load(config_path)
    todo_path = repo.top / cfg.files.todo
    before = _todo_before(todo_path, cfg.files.todo, force=options.force)
    found = _issue(repo.top, options.issue) if options.issue is not None else None
    goal = found.title if found else (options.goal or cfg.goal).strip()
    if goal == todo.PLACEHOLDER_GOAL:
        raise RalphError(
            'the goal is still `ralph init`\'s placeholder — `ralph plan "the goal"`, or write it in ralph.yaml'
        )
    plans = layout.ralph_dir(repo.common_dir) / "plans"
    waiting = None if options.anew or not options.yes else _waiting(plans, goal, repo.head, before)
    if waiting is not None:
        folder, made = waiting
        ui.say(f"the plan shown before for this goal ({ui.safe(folder.name)}), as it was — `--new` asks again")
    else:
        folder = plans / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise RalphError(
                f"cannot make {folder} for the plan: {exc.strerror or exc} — is {plans} a folder?"
            ) from None
        made = _planned(repo, cfg, goal, folder, found)
        _save(folder, made, goal, repo.head, before)
    _show(made, cfg.files.todo)
    ui.say(f"the planner's reasoning and what it read: {ui.safe(folder)}")
    if not options.yes and not user_says_yes(f"write these {len(made.items)} items to {cfg.files.todo}?"):
        again = shlex.join(["ralph", "plan", *([options.goal] if options.goal else []), *_issue_flag(options), "--yes"])
        ui.say(f"{ui.safe(cfg.files.todo)} not written — `{ui.safe(again)}` writes this plan without asking again")
        return Exit.ERROR
    ticked = found.ticked if found is not None else []
    kept = accepted([*ticked, *made.items], made.by, ask=not options.yes)
    text = (
        checklist(goal, kept)
        if found is None
        else issue_todo(goal, found.url, found.number, kept[: len(ticked)], kept[len(ticked) :])
    )
    todo_path.write_text(text, encoding="utf-8")
    _mark_written(folder)
    ui.say(f"wrote {ui.safe(cfg.files.todo)} ({len(made.items)} items): review it, commit it, then `ralph run`")
    if cfg.goal.strip() == todo.PLACEHOLDER_GOAL and goal != todo.PLACEHOLDER_GOAL:
        _set_goal(config_path, goal)
    return Exit.DONE


def _issue_flag(options: PlanOptions) -> list[str]:
    return ["--issue", str(options.issue)] if options.issue is not None else []


def _issue(top: Path, number: int) -> Issue:
    from ralph.git import github  # gh, only when an issue is asked for

    found = github.issue(top, number)
    if not found.is_open:
        raise RalphError(f'issue #{number} is closed — reopen it to plan for it, or `ralph plan "the goal"`')
    return found


def _todo_before(path: Path, name: str, *, force: bool) -> str:
    """TODO.md as it is, which the plan may replace: only a file, and one of the user's items only with --force."""
    if path.is_symlink() or (os.path.lexists(path) and not path.is_file()):
        raise RalphError(f"{name} is not a regular file (a link, a folder) — ralph plan writes only a file")
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    if not _nothing_written(text) and not force:
        items = len(todo.parse(text))
        what = f"already has {items} items" if items else "already has text of yours"
        raise RalphError(f"{name} {what} — `ralph plan --force` replaces it")
    return text


def _nothing_written(text: str) -> bool:
    """TODO.md holds no work of the user's: empty, `ralph init`'s placeholder, or nothing but
    headings and blank lines (a `# TODO` written to be filled in)."""
    if text == TODO_TEMPLATE:
        return True
    return all(not line.strip(" \t\r\n") or _HEADING.fullmatch(line.rstrip("\r\n")) for line in todo.lines(text))


def _planned(repo: git.RepoInfo, cfg: config_module.Config, goal: str, folder: Path, found: Issue | None) -> Planned:
    """The plan: an issue's own task list as it is, else the planner's for the goal."""
    if found is not None and found.items:
        return Planned(items=found.items, by=f"the task list of issue #{found.number}")
    task = goal if found is None else f"{goal}\n\nFrom issue #{found.number} ({found.url}):\n{found.body}"
    limiter.configure(cfg.limits.requests_per_minute)
    with contextlib.ExitStack() as cleanup:
        cleanup.enter_context(planning_alone(repo.common_dir))
        ctx = _scratch(repo, cfg, folder, cleanup)
        ui.say(f"planning with {ui.safe(planning.planner_name(ctx))} …")
        return planning.ask(ctx, repo.head, task, folder)


def _scratch(repo: git.RepoInfo, cfg: config_module.Config, folder: Path, cleanup: contextlib.ExitStack) -> RunContext:
    """What the planner runs with, as a lap's agent would: the sandbox, the agent checked, the MCP
    servers, a workspace of its own (removed with `cleanup`)."""
    env = proc.lap_env(tuple(cfg.env.pass_))
    endpoint = cfg.role_endpoint(cfg.roles.planner)
    agents = () if endpoint is not None else (_agent(cfg),)
    mcp = McpTools.start(cfg.mcp, repo.top, env, folder) if cfg.mcp.offered_to("planner") else None
    if mcp is not None:
        cleanup.callback(mcp.close)
    workspace = Workspace.create(repo.top, repo.common_dir, PLAN_WORKSPACE)  # what a killed plan left: removed
    cleanup.callback(workspace.remove)
    return RunContext(
        repo=repo,
        run_name=f"plan-{folder.name}",
        config=cfg,
        run_dir=folder,
        agents=agents,
        env=env,
        workspace=workspace,
        sandboxed=endpoint is None and sandboxed(repo, cfg),
        mcp=mcp,
    )


@contextlib.contextmanager
def planning_alone(common_dir: Path) -> Iterator[None]:
    """One `ralph plan` at a time in a repository, so its workspace can have one name: whatever
    a killed plan (`kill -9`) left there, the next plan's Workspace.create or `ralph clean`
    removes. The kernel lets go of the lock with the process that held it."""
    lock = layout.ralph_dir(common_dir) / "plan.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RalphError("another `ralph plan` is planning in this repository — wait for it to end") from None
        yield


def reclaim(common_dir: Path) -> bool:
    """The workspace a killed `ralph plan` left, removed (never one a plan works in now): was there one?"""
    workspace = folder_for(common_dir, PLAN_WORKSPACE)
    if not os.path.lexists(workspace):
        return False
    try:
        with planning_alone(common_dir):
            remove_path(workspace)
    except RalphError:
        return False
    return True


def _agent(cfg: config_module.Config) -> Agent:
    """The laps' agent, as the planner: its keys kept from it as from a lap's, its tool there."""
    agent = make_agent(cfg.agent, cfg.kept_from_agent_clis)
    agent.check_endpoint(time.monotonic() + cfg.limits.lap_timeout)
    return agent


def _save(folder: Path, made: Planned, goal: str, head: str, before: str) -> None:
    saved = {
        "format": PLAN_FORMAT,
        "goal": goal,
        "head": head,  # what it planned on, and the TODO.md it would replace: a plan waits for both
        "todo_before": _digest(before),
        "items": made.items,
        "by": made.by,
        "plan": made.plan.model_dump() if made.plan else None,
        "notes": made.notes,
        "files_read": files_read(folder),
        "usage": made.usage.model_dump(),
        "written": False,
    }
    (folder / "plan.json").write_text(json.dumps(saved, indent=1), encoding="utf-8")


def _waiting(plans: Path, goal: str, head: str, before: str) -> tuple[Path, Planned] | None:
    """The newest plan, when it waits to be written: for this goal, made on this HEAD, over the
    TODO.md there is now, and not written yet. A plan.json that is not one ralph wrote is none."""
    newest = max(plans.iterdir(), default=None) if plans.is_dir() else None
    if newest is None:
        return None
    expected = {"format": PLAN_FORMAT, "written": False, "goal": goal, "head": head, "todo_before": _digest(before)}
    try:
        saved = json.loads((newest / "plan.json").read_text(encoding="utf-8"))
        if any(saved.get(key) != value for key, value in expected.items()):
            return None
        plan = Plan.model_validate(saved["plan"]) if saved["plan"] is not None else None
        items = Plan.model_validate({"approaches": [{"name": "-"}], "recommendation": "-", "todo": saved["items"]})
        return newest, Planned(items=items.todo, by=str(saved["by"]), plan=plan, notes=str(saved["notes"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):  # not ralph's: plan anew
        return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _mark_written(folder: Path) -> None:
    path = folder / "plan.json"
    saved = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(dict(saved, written=True), indent=1), encoding="utf-8")


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
    """The files a model planner read, from its transcript (an agent CLI's planning has none)."""
    seen: list[str] = []
    if not (folder / "transcript.jsonl").is_file():
        return seen
    for event in transcript.read(folder / "transcript.jsonl"):
        path = event.get("arguments", {}).get("path") if event.get("event") == "tool" else None
        if event.get("name") == "view" and event.get("ok") and isinstance(path, str) and path not in seen:
            seen.append(path)
    return seen


def _show(made: Planned, todo_name: str) -> None:
    for approach in made.plan.approaches if made.plan else []:
        ui.say(f"[bold]approach:[/] {ui.safe(approach.name)}")
        for pro in approach.pros:
            ui.say(f"  + {ui.safe(pro)}")
        for con in approach.cons:
            ui.say(f"  - {ui.safe(con)}")
    if made.plan is not None:
        ui.say(f"[bold]recommended:[/] {ui.safe(made.plan.recommendation)}")
    if made.notes:
        ui.say(f"[bold]{ui.safe(made.by)} weighed ({planning.NOTES_FILE}):[/]")
        for line in made.notes.splitlines():
            ui.say(f"  {ui.safe(line)}")
    ui.say(f"[bold]{ui.safe(todo_name)}[/] (planned by {ui.safe(made.by)}):")
    for item in made.items:
        ui.say(f"  - [ ] {ui.safe(item)}")
