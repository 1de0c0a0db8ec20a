"""The lap's agent phase: the prompt, and the agent at work in the workspace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ralph import git
from ralph.agents.base import AgentResult, LapTask
from ralph.isolation import crashpoint
from ralph.lap import prompt
from ralph.lap.context import RunContext
from ralph.lap.this_lap import ThisLap
from ralph.lap.watch import watching_the_repository
from ralph.records import ledger
from ralph.records.formats import LapStatus
from ralph.records.ledger import RunState
from ralph.show import events
from ralph.verdict import guard as guard_module
from ralph.verdict import ratchet
from ralph.verdict.checks import CheckResult, all_pass
from ralph.verdict.decide import Checked, CommitFacts, Evidence, decide, wants_checks


@dataclass(frozen=True, kw_only=True)
class Worked:
    """What the agent did, as ralph saw it."""

    result: AgentResult  # its outcome, usage and summary, named after the agent of config.agents that ran
    told: dict[str, str]  # the user's messages (`ralph tell`) its prompt carried, by ref
    tampered: list[str]  # what it changed in the shared repository state (put back): unsandboxed laps only


def work(lap: ThisLap) -> Worked:
    """The agent's lap. Sandboxed, the lap cannot reach the repository. Without a sandbox, code
    the agent wrote runs as the user: whatever it does to the shared repository state is put
    back, here (before ralph's own git reads the repository's config to stage the lap) and
    again after the hooks and checks, which run the lap's code too."""
    ctx, turn = lap.ctx, lap.turn
    told = ledger.messages(ctx.top, lap.state)  # forgotten once this lap's note holds them
    task = _task(lap, list(told.values()))
    with watching_the_repository(ctx, turn.number) as tampered:
        crashpoint.reached("agent")
        events.emit("phase_changed", phase="agent")
        chosen = ctx.config.agents[turn.agent_index]
        # The caller's code, outside the sandbox, may still write the tree after the commit.
        ctx.workspace.stale_after_staging = chosen.kind == "python"
        result = (
            ctx.agents[turn.agent_index]
            .run_lap(task)
            .model_copy(update={"name": chosen.name, "model": chosen.model if chosen.kind == "openai" else None})
        )
    return Worked(result=result, told=told, tampered=tampered)


def _task(lap: ThisLap, told: list[str]) -> LapTask:
    ctx, state, turn = lap.ctx, lap.state, lap.turn
    limits, slot, items = ctx.config.limits, turn.slot, turn.items
    facts = prompt.PromptFacts(
        todo_text=lap.prepared.todo_text,
        progress_text=git.show_file(ctx.top, state.green, ctx.config.files.progress),
        failure=last_failure(ctx, state, items),
        told=told,
        items=items,
        slot=prompt.slot_heading(slot) if slot is not None and turn.best_of is None else None,
        whole_job=ctx.whole_job,
        best_of=turn.best_of.of if turn.best_of else 0,
    )
    log_dir = lap.log_dir
    return LapTask(
        ctx.run_name,
        turn.number,
        ctx.workspace.tree,
        prompt.build(ctx.config, facts),
        limits.lap_timeout,
        log_dir,
        dict(ctx.env, RALPH_ITEMS="\n".join(items), RALPH_SLOT=str(slot)) if slot is not None else ctx.env,
        check=lambda: _check_now(ctx, state, log_dir),
        jail=ctx.jail("agent"),
        idle_timeout=limits.idle_timeout,
        mcp=ctx.mcp if "agent" in ctx.config.mcp.roles else None,
    )


def _check_now(ctx: RunContext, state: RunState, log_dir: Path) -> str | None:
    """What is left on the agent's uncommitted work when it says it is done, for agents that fix
    red checks in the lap: what would make the lap red (verdict/decide.py, kind in_lap: no change
    at all, a check that regressed or could not run), else a check that still fails. None when
    nothing is."""
    evidence = Evidence(
        agent=None,
        commit=CommitFacts(files_changed=int(ctx.workspace.changed())),
        last_green=state.green_checks(),
        strict=ctx.config.strict,
        kind="in_lap",
    )
    if wants_checks(evidence):
        checks = Checked(results=ctx.check(log_dir), removed=[])
        evidence = replace(evidence, guard=guard_module.GuardReport(grants=_grants_now(ctx, state)), checks=checks)
        events.emit("phase_changed", phase="agent")
    verdict = decide(evidence)
    if verdict.status != LapStatus.GREEN:
        if evidence.checks is None:
            return "you changed no file, and a lap that changes nothing is red."
        return f"the repository's checks fail on your edits: {verdict.reason}\n{verdict.output_tail}"
    if all_pass(verdict.checks):
        return None
    failing = [check for check in verdict.checks if not check.passed]
    named = [f"`{check.command}`" + _failing_tests(check) for check in failing]
    return (
        f"these checks still fail: {'; '.join(named)}\n{failing[0].output_tail[-2000:]}\n"
        "If they are for later laps and your slice is done, call finish again."
    )


def _grants_now(ctx: RunContext, state: RunState) -> tuple[str, ...]:
    """What the user's items grant, as the lap's verdict will read them: a test file a grant
    names may lose its old test names, here as there (a migration's tests move out of their classes)."""
    return guard_module.base_grants(ctx.top, state.record.base, ctx.config.files.todo)


def _failing_tests(check: CheckResult) -> str:
    failing = check.tests.failing_ids if check.tests else []
    return f" ({ratchet.named(failing)})" if failing else ""


def last_failure(ctx: RunContext, state: RunState, items: Sequence[str] = ()) -> prompt.LastFailure | None:
    """The last lap, when it was red; in a parallel run, the last lap on any of these items,
    when it was red (a conflict among them: its hunks are the diff it could not rebase)."""
    record = state.last_record()
    if items:
        mine = [lap.record for lap in state.laps if lap.record and set(lap.record.items) & set(items)]
        record = mine[-1] if mine else None
    if record is None or record.status == LapStatus.GREEN:
        return None
    return prompt.LastFailure(
        record.lap, record.reason, git.diffstat(ctx.top, record.parent, record.commit), record.output_tail[-3000:]
    )
