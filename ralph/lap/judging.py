"""The lap's verdict phase: the evidence for it gathered, and the verdict decided on it (green,
red, error or limited) by verdict/decide.py. The checks run in between (checking.py), and the
judge role after them, unless the verdict is clear without them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ralph import git
from ralph.agents.base import AgentResult
from ralph.agents.judge import JudgeRecord, material, signals
from ralph.lap import checking
from ralph.lap.commit import LapCommit
from ralph.lap.context import RunContext
from ralph.lap.turn import Turn
from ralph.records.formats import LapStatus
from ralph.records.ledger import RunState
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
    ctx: RunContext, state: RunState, lap: LapCommit, agent: AgentResult, number: int, log_dir: Path
) -> Verdict:
    """The verdict on one commit of the lap's (verdict/decide.py), from the agent's outcome and
    the commit alone when they settle it, else from the guard, the checks and (roles.judge) the
    judge: the evidence gathered here, phase by phase, as far as the verdict needs it."""
    evidence = Evidence(
        agent=agent,
        commit=lap.facts(_nested_repositories(ctx, lap)),
        last_green=state.green_checks(),
        strict=ctx.config.strict,
    )
    if not wants_checks(evidence):
        return decide(evidence)
    report = _guard(ctx, state, lap)
    try:
        checked: Checked | CannotCheck = checking.checks_on(ctx, lap, number, log_dir)
    except CannotCheck as cannot:
        checked = cannot
    evidence = replace(evidence, guard=report, checks=checked)
    verdict = decide(evidence)
    if ctx.judge is None or not wants_judge(verdict):
        return verdict
    scored = _ask_the_judge(ctx, state, log_dir, lap, agent, verdict)
    return decide(replace(evidence, judge=scored, threshold=ctx.judge.role.threshold))


def _guard(ctx: RunContext, state: RunState, lap: LapCommit) -> guard_module.GuardReport:
    config, files = ctx.config, ctx.config.files
    scope = Scope(
        tuple(config.scope) if config.scope is not None else None,
        tuple(config.check_commands),
        (config.mcp.from_,) if config.mcp.from_ else (),
    )
    return guard_module.check_lap(
        ctx.top, lap.parent, lap.sha, lap.changes, config.protect, files.todo, files.progress, state.record.base, scope
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


def _ask_the_judge(
    ctx: RunContext, state: RunState, log_dir: Path, lap: LapCommit, agent: AgentResult, green: Verdict
) -> JudgeRecord:
    """The judge role's record of a lap the checks passed, its cost priced."""
    assert ctx.judge is not None
    seen = material(ctx.config, ctx.top, state.green, lap.sha, lap.changes, lap.ticked, agent.summary)
    measured = signals(
        seen,
        all_pass(green.checks),
        passing_tests(state.green_checks()),
        passing_tests(green.checks),
        ctx.config.files.progress in lap.changes,
    )
    events.emit("phase_changed", phase="judge")
    scored = ctx.judge.score(seen, measured, log_dir)
    usage = scored.usage
    cost = ctx.config.cost_of(ctx.judge.config.model, usage.prompt_tokens, usage.completion_tokens)
    scored.usage = usage.model_copy(update={"cost_usd": cost})
    return scored
