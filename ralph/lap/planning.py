"""The planner, whoever it is: roles.planner's model, else the agent the laps run (a stuck
item's split asks the planner role only: `role`, never the agent that got stuck).

A model (roles.planner's, or a built-in agent's) plans through its read-only tools over the
tree at the commit (agents/planner.py). An agent CLI has no such tools: it runs as a lap's
agent would, sandboxed in the context's workspace checked out at the commit, told to write the
checklist to TODO.md and its reasoning to PLAN.md, and ralph reads those two files back.
Whatever else it changed there is never committed, and the workspace is a scratch one of its
own (`ralph plan`'s, `ralph run --issue`'s), removed after: an ignored file it leaves, which a
checkout would keep, reaches no lap and no check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ralph import todo
from ralph.agents.base import LapTask, Usage
from ralph.agents.planner import GOOD_ITEMS, THE_JOB, Plan, PlanFailed, Planner
from ralph.config import Config
from ralph.config.agent import AgentConfig
from ralph.isolation.files import regular_text
from ralph.lap.context import RunContext
from ralph.lap.watch import watching_the_repository
from ralph.show import ui
from ralph.show.text import printable

NOTES_FILE = "PLAN.md"  # where an agent CLI writes what it weighed; read back, never committed
READ_CAP = 256 * 1024  # bytes of TODO.md or PLAN.md read back
NOTES_SHOWN = 4000  # characters of PLAN.md shown and kept
MAX_ITEMS = 200  # as the planner's write_plan takes

COMMAND_PROMPT = """\
{job} This folder is a scratch copy of the repository: look at it as you like, weigh two or
three approaches, then write the plan into two files here, and stop. Nothing else you change
here is kept, so change nothing else.
- {todo}: a line "# TODO", a blank line, a line "Goal: <the goal>", a blank line, then the
  checklist for the approach you recommend, in order, one line an item: "- [ ] <item>".
- {notes}: the approaches you weighed, their pros and cons, and which you recommend and why.
{items}

The goal: {goal}
"""


@dataclass(frozen=True)
class Planned:
    """A plan: its items; what the planner weighed (a model's write_plan, an agent CLI's PLAN.md)."""

    items: list[str]
    by: str  # who planned: roles.planner's model, or the agent's name
    plan: Plan | None = None  # a model's: its approaches and recommendation
    notes: str = ""  # an agent CLI's PLAN.md
    usage: Usage = field(default_factory=Usage)


def role(cfg: Config) -> AgentConfig | None:
    """The planner role's endpoint: roles.planner's model, else the built-in agent's (a
    conversation of its own, with read-only tools); None with an agent CLI and no roles.planner."""
    return cfg.role_endpoint(cfg.roles.planner)


def planner_name(ctx: RunContext) -> str:
    endpoint = role(ctx.config)
    return f"the model {endpoint.model}" if endpoint is not None else f"the agent ({ctx.config.agent.name})"


def ask(ctx: RunContext, commit: str, task: str, folder: Path) -> Planned:
    """The planner's plan for `task` over the tree at `commit`; its transcript or log in `folder`.
    Raises PlanFailed (or EndpointUnusable) when it gives none."""
    if role(ctx.config) is None:
        return _by_the_agent(ctx, commit, task, folder)
    return by_the_role(ctx, commit, task, folder)


def by_the_role(ctx: RunContext, commit: str, task: str, folder: Path) -> Planned:
    """The planner role's plan, looking at the tree at `commit` read only; PlanFailed where
    there is no planner role (an agent CLI does not plan this)."""
    endpoint = role(ctx.config)
    if endpoint is None:
        raise PlanFailed("there is no planner role (roles.planner.model) to ask")
    mcp = ctx.mcp if "planner" in ctx.config.mcp.roles else None
    planner = Planner(endpoint, ctx.top, commit, folder, mcp)
    made = planner.run(task)
    return Planned(items=made.todo, by=f"the model {endpoint.model}", plan=made, usage=planner.usage)


def _by_the_agent(ctx: RunContext, commit: str, task: str, folder: Path) -> Planned:
    """The agent CLI (config.agent) as the planner, in the workspace at `commit`, sandboxed as a
    lap's agent is; its TODO.md and PLAN.md read back."""
    cfg, workspace = ctx.config, ctx.workspace
    workspace.checkout(commit, bytecode=False)
    workspace.fresh_lap_git(commit, keep_modules=False)
    for name in (cfg.files.todo, NOTES_FILE):  # what it writes is its own, never the commit's
        (workspace.tree / name).unlink(missing_ok=True)
    prompt = COMMAND_PROMPT.format(job=THE_JOB, items=GOOD_ITEMS, todo=cfg.files.todo, notes=NOTES_FILE, goal=task)
    lap = LapTask(
        run=ctx.run_name,
        lap=0,
        workspace=workspace.tree,
        prompt=prompt,
        timeout=cfg.limits.lap_timeout,
        log_dir=folder,
        env=ctx.env,
        jail=ctx.jail("agent"),
        idle_timeout=cfg.limits.idle_timeout,
    )
    with watching_the_repository(ctx, 0):
        result = ctx.agents[0].run_lap(lap)
    by = f"the agent ({cfg.agent.name})"
    if result.outcome != "ok":
        raise PlanFailed(f"{by} did not plan ({result.outcome}): {ui.one_line(result.detail, 300)}")
    items = read_items(workspace.tree / cfg.files.todo, cfg.files.todo, by)
    notes = regular_text(workspace.tree / NOTES_FILE, READ_CAP) or ""
    return Planned(items=items, by=by, notes=notes.strip()[:NOTES_SHOWN], usage=result.usage)


def read_items(path: Path, name: str, by: str) -> list[str]:
    """The checklist a planner wrote: open items only, one line each, at least one, at most 200."""
    text = regular_text(path, READ_CAP)
    if text is None and not os.path.lexists(path):
        raise PlanFailed(f"{by} wrote no {name}")
    if text is None:
        raise PlanFailed(
            f"the {name} {by} wrote is not a regular file of at most {READ_CAP // 1024} KiB "
            "(a link, a folder, or longer)"
        )
    items = todo.parse(text)
    if not items:
        raise PlanFailed(f"{by} wrote {name} without a checklist item (`- [ ] …` lines)")
    ticked = [item.text for item in items if item.done]
    if ticked:
        raise PlanFailed(
            f"{by} wrote {name} with items ticked already ({ui.one_line(ticked[0], 80)}): a plan is all open"
        )
    if len(items) > MAX_ITEMS:
        raise PlanFailed(f"{by} wrote {len(items)} items to {name}: a plan has at most {MAX_ITEMS}")
    return [" ".join(printable(item.text).split()) for item in items]  # no escape code reaches TODO.md
