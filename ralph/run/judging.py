"""The lap's verdict phase: green, red, error or limited, and the evidence for it. The checks
run in between (checking.py), unless the verdict is clear without them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ralph import git
from ralph.agents.base import AgentResult
from ralph.agents.judge import JudgeRecord, material, next_lap_text, signals
from ralph.git.ledger import RunState
from ralph.git.records import LapStatus
from ralph.run import checking
from ralph.run.commit import LapCommit
from ralph.run.context import LapTurn, RunContext
from ralph.show import events
from ralph.verdict import guard as guard_module
from ralph.verdict import ratchet
from ralph.verdict.checks import CheckResult, all_pass, passing_tests
from ralph.verdict.scope import Scope


@dataclass(frozen=True, kw_only=True)
class Judged:
    """A lap's verdict and the evidence for it."""

    status: LapStatus
    reason: str
    output_tail: str = ""
    checks: list[CheckResult] = field(default_factory=list)
    files_changed: int = 0
    guard: guard_module.GuardReport = field(default_factory=guard_module.GuardReport)
    comparison: ratchet.Comparison = field(default_factory=ratchet.Comparison)
    removed: list[str] = field(default_factory=list)
    judge: JudgeRecord | None = None
    stop: str = ""  # why the run cannot go on after this lap (a disk that stays full): the error it stops with


def judge(ctx: RunContext, state: RunState, lap: LapCommit, agent: AgentResult, number: int, log_dir: Path) -> Judged:
    """The verdict on one commit of the lap's: from the agent's outcome and the commit alone when
    they settle it, else from the guard, the checks and (roles.judge) the judge."""
    known = _before_checks(ctx, lap, agent)
    if known is not None:
        return known
    config, files = ctx.config, ctx.config.files
    scope = Scope(
        tuple(config.scope) if config.scope is not None else None,
        tuple(config.check_commands),
        (config.mcp.from_,) if config.mcp.from_ else (),
    )
    report = guard_module.check_lap(
        ctx.top, lap.parent, lap.sha, lap.changes, config.protect, files.todo, files.progress, state.record.base, scope
    )
    try:
        checked = checking.checks_on(ctx, lap, number, log_dir)
    except checking.CannotCheck as cannot:  # what the lap may not change first: often the cause (a manifest)
        reason = "; ".join([*report.problems, cannot.reason])
        return Judged(status=LapStatus.RED, reason=reason, output_tail=cannot.detail, files_changed=len(lap.changes))
    return _after_checks(ctx, state, lap, agent, report, checked, log_dir)


def overruled(judged: Judged, turn: LapTurn, ticked: list[str], tampered: list[str]) -> Judged:
    """Red, whatever the checks said, for a lap that ticked items another lap may be doing right
    now, or reached outside its workspace."""
    stray = [item for item in ticked if item not in turn.items] if turn.slot is not None else []
    if stray and judged.status == LapStatus.GREEN:
        judged = _red(judged, f"ticked items it did not claim, which other laps work on: {'; '.join(stray[:3])}")
    if tampered:
        judged = _red(judged, f"the lap changed the repository outside its workspace, restored: {', '.join(tampered)}")
    return judged


def _red(judged: Judged, reason: str) -> Judged:
    return Judged(status=LapStatus.RED, reason=reason, files_changed=judged.files_changed)


def _before_checks(ctx: RunContext, lap: LapCommit, agent: AgentResult) -> Judged | None:
    """The verdict when the agent's outcome or the commit settles it: nothing to check."""
    changed = len(lap.changes)
    if agent.outcome != "ok":
        status = {"error": LapStatus.ERROR, "limited": LapStatus.LIMITED}.get(agent.outcome, LapStatus.RED)
        reason = f"agent error: {_first_line(agent.detail)}" if agent.outcome == "error" else _first_line(agent.detail)
        return Judged(status=status, reason=reason, output_tail=agent.detail, files_changed=changed)
    if lap.refusal is not None:
        return Judged(status=LapStatus.RED, reason=lap.refusal[0], output_tail=lap.refusal[1], files_changed=changed)
    if not changed:
        return Judged(status=LapStatus.RED, reason="the lap changed nothing")
    nested = _nested_repositories(ctx, lap)
    if nested:
        return Judged(
            status=LapStatus.RED,
            reason=f"the lap made repositories inside the tree, whose files no commit holds: "
            f"{', '.join(nested[:5])} — commit their files in the repository itself",
            files_changed=changed,
        )
    return None


def _nested_repositories(ctx: RunContext, lap: LapCommit) -> list[str]:
    """A repository the lap made inside the tree is committed as a gitlink to a commit that exists
    nowhere; its files would reach the checks but not the commit (a declared submodule is
    checked out anew from its gitlink instead)."""
    gitlinks = {path for path, (_, mode) in lap.changes.items() if mode == "160000"}
    return sorted(gitlinks - set(git.submodule_paths(ctx.top, lap.sha))) if gitlinks else []


def _after_checks(
    ctx: RunContext,
    state: RunState,
    lap: LapCommit,
    agent: AgentResult,
    report: guard_module.GuardReport,
    checked: checking.Checked,
    log_dir: Path,
) -> Judged:
    results, removed = checked.results, checked.removed
    comparison = ratchet.compare(state.green_checks(), results, report)
    problems = comparison.unrun + report.problems + comparison.problems
    if report.idle_ticks and not _made_something_pass(state.green_checks(), results, comparison):
        problems.append(report.idle_ticks)
    if problems and removed and ctx.config.strict:
        problems.append(f"files the commit lacks were deleted before the checks: {', '.join(removed[:5])}")
    green = Judged(
        status=LapStatus.GREEN,
        reason=ratchet.green_reason(results),
        checks=results,
        files_changed=len(lap.changes),
        guard=report,
        comparison=comparison,
        removed=removed,
    )
    if problems:
        return replace(green, status=LapStatus.RED, reason="; ".join(problems), output_tail=comparison.failing_output)
    return _ask_the_judge(ctx, state, log_dir, lap, agent, green) if ctx.judge else green


def _ask_the_judge(
    ctx: RunContext, state: RunState, log_dir: Path, lap: LapCommit, agent: AgentResult, green: Judged
) -> Judged:
    """The judge's verdict on a lap the checks passed: held back, it is red."""
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
    verdict = ctx.judge.score(seen, measured, log_dir)
    usage = verdict.usage
    cost = ctx.config.cost_of(ctx.judge.config.model, usage.prompt_tokens, usage.completion_tokens)
    verdict.usage = usage.model_copy(update={"cost_usd": cost})
    if verdict.status == "unavailable":
        return replace(green, judge=verdict, reason=f"{green.reason}; {verdict.detail} (judged by the checks alone)")
    if verdict.status == "passed":
        return replace(green, judge=verdict, reason=f"{green.reason}; the judge scored {verdict.score}")
    threshold = ctx.judge.role.threshold
    low = verdict.score is not None and verdict.score < threshold
    why = [f"score {verdict.score} below {threshold}"] if low else []
    why += [f"blocking: {'; '.join(verdict.blocking)}"] if verdict.blocking else []
    reason = f"judge: {', '.join(why)}"
    return replace(green, judge=verdict, status=LapStatus.RED, reason=reason, output_tail=next_lap_text(verdict))


def _made_something_pass(before: list[CheckResult], now: list[CheckResult], comparison: ratchet.Comparison) -> bool:
    """Is a test, or a check, passing now that was not on the last green commit? That is work,
    however small the diff (a whitespace fix inside a string literal)."""
    passed_before = {check.command for check in before if check.passed}
    return bool(comparison.newly_passing) or any(check.passed and check.command not in passed_before for check in now)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no detail")
