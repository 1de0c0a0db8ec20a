"""The lap's verdict phase: the evidence for it gathered, and the verdict decided on it (green,
red, error or limited) by verdict/decide.py. The checks run in between (checking.py), and the
judge role after them, unless the verdict is clear without them."""

from __future__ import annotations

from dataclasses import replace

from ralph import git
from ralph.agents.base import AgentResult
from ralph.agents.judge import JudgeRecord, material, signals
from ralph.lap import checking
from ralph.lap.commit import LapCommit
from ralph.lap.context import RunContext
from ralph.lap.this_lap import ThisLap
from ralph.lap.turn import Turn
from ralph.records.formats import LapStatus
from ralph.show import events
from ralph.verdict import guard as guard_module
from ralph.verdict.checks import all_pass, passing_tests
from ralph.verdict.decide import (
    CannotCheck,
    Checked,
    Evidence,
    Overrule,
    Verdict,
    decide,
    overruled,
    wants_checks,
    wants_judge,
)
from ralph.verdict.scope import Scope


def verdict_on(
    lap: ThisLap, made: LapCommit, agent: AgentResult, checked: Checked | CannotCheck | None = None
) -> Verdict:
    """The verdict on one commit of the lap's (verdict/decide.py), from the agent's outcome and
    the commit alone when they settle it, else from the guard, the checks and (roles.judge) the
    judge: the evidence gathered here, phase by phase, as far as the verdict needs it. `checked`:
    the checks' outcome on exactly `made`, run already (a lap checked ahead of its turn)."""
    ctx = lap.ctx
    evidence = Evidence(
        agent=agent,
        commit=made.facts(_nested_repositories(ctx, made)),
        last_green=lap.state.green_checks(),
        strict=ctx.config.strict,
    )
    if not wants_checks(evidence):
        return decide(evidence)
    report = guard(lap, made)
    if checked is None:
        try:
            checked = checking.checks_on(lap, made)
        except CannotCheck as cannot:
            checked = cannot
    evidence = replace(evidence, guard=report, checks=checked)
    verdict = decide(evidence)
    if ctx.judge is not None and wants_judge(verdict):
        scored = _ask_the_judge(lap, made, agent, verdict)
        evidence = replace(evidence, judge=scored, threshold=ctx.judge.role.threshold)
        verdict = decide(evidence)
    is_done = ctx.caller.is_done
    if is_done is None or not verdict.done:
        return verdict
    # The lap's commit is checked out in the workspace, made and checked: the caller only reads it.
    return decide(replace(evidence, caller_done=bool(is_done(ctx.workspace.tree, lap.state))))


def guard(lap: ThisLap, made: LapCommit) -> guard_module.GuardReport:
    """What the guard finds against one commit of the lap's, from the last green commit it was made on."""
    config, files = lap.ctx.config, lap.ctx.config.files
    scope = Scope(
        tuple(config.scope) if config.scope is not None else None,
        tuple(config.check_commands),
        (config.mcp.from_,) if config.mcp.from_ else (),
    )
    top, base = lap.ctx.top, lap.state.record.base
    return guard_module.check_lap(
        top,
        made.parent,
        made.sha,
        made.changes,
        config.protect,
        files.todo,
        files.progress,
        base,
        scope,
        todo_items=(made.todo_before, made.todo_after),  # the TODO at made.parent and in made.sha, read once
    )


def after_the_lap(verdict: Verdict, turn: Turn, ticked: list[str], tampered: list[str]) -> Verdict:
    """Overruled red, whatever the checks said, for a lap that ticked items another lap may be
    doing right now, or reached outside its workspace."""
    stray = [item for item in ticked if item not in turn.items] if turn.slot is not None else []
    if stray and verdict.status == LapStatus.GREEN:
        verdict = overruled(verdict, Overrule.STRAY_TICKS, "; ".join(stray[:3]))
    if tampered:
        verdict = overruled(verdict, Overrule.TAMPERED, ", ".join(tampered))
    return verdict


def _nested_repositories(ctx: RunContext, lap: LapCommit) -> list[str]:
    """A repository the lap made inside the tree is committed as a gitlink to a commit that exists
    nowhere; its files would reach the checks but not the commit (a declared submodule is
    checked out anew from its gitlink instead)."""
    gitlinks = {path for path, (_, mode) in lap.changes.items() if mode == "160000"}
    return sorted(gitlinks - set(git.submodule_paths(ctx.top, lap.sha))) if gitlinks else []


def _ask_the_judge(lap: ThisLap, made: LapCommit, agent: AgentResult, green: Verdict) -> JudgeRecord:
    """The judge role's record of a lap the checks passed, its cost priced."""
    ctx, state = lap.ctx, lap.state
    assert ctx.judge is not None
    seen = material(ctx.config, ctx.top, state.green, made.sha, made.changes, made.ticked, agent.summary)
    measured = signals(
        seen,
        all_pass=all_pass(green.checks),
        passing_before=passing_tests(state.green_checks()),
        passing_after=passing_tests(green.checks),
        progress_changed=ctx.config.files.progress in made.changes,
    )
    events.emit("phase_changed", phase="judge")
    scored = ctx.judge.score(seen, measured, lap.log_dir)
    usage = scored.usage
    cost = ctx.config.cost_of(ctx.judge.config.model, usage.prompt_tokens, usage.completion_tokens)
    scored.usage = usage.model_copy(update={"cost_usd": cost})
    return scored
