"""The lap's record phase: its verdict and facts made into the lap's note, which is saved."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ralph.agents.base import AgentResult
from ralph.config import Config
from ralph.errors import RalphError
from ralph.git.store import Changes
from ralph.lap.commit import LapCommit
from ralph.lap.context import RunContext
from ralph.records import ledger
from ralph.records.formats import LapRecord, LapStatus, TestChanges
from ralph.records.ledger import RunState
from ralph.verdict.checks import CheckResult, passing_tests
from ralph.verdict.decide import Verdict


@dataclass(frozen=True, kw_only=True)
class LapFacts:
    """What a lap did, whatever commit it ends up as (rebased, its facts stay)."""

    number: int
    started: float
    started_at: str
    prepare_s: float  # the workspace made ready at the lap's start: reset, copy, setup
    agent: AgentResult
    told: list[str]  # the user's messages the lap's prompt carried (`ralph tell`)
    agent_index: int  # which of config.agents ran it
    slot: int | None
    items: list[str]
    worker: str | None
    escalated: bool = False  # run by agent.escalate, on a stuck item
    split: str | None = None  # a split lap: the item the planner split


def lap_record(ctx: RunContext, state: RunState, facts: LapFacts, lap: LapCommit, verdict: Verdict) -> LapRecord:
    """The lap's note: what it did, the verdict (progress and done with it), and the evidence for it."""
    is_green = verdict.status == LapStatus.GREEN
    passing_before, passing_after = passing_tests(state.green_checks()), passing_tests(verdict.checks)
    return LapRecord(
        run=ctx.run_name,
        lap=facts.number,
        status=verdict.status,
        reason=verdict.reason,
        started_at=facts.started_at,
        duration_s=round(time.monotonic() - facts.started, 3),
        prepare_s=facts.prepare_s,
        commit=lap.sha,
        parent=lap.parent,
        checks=verdict.checks if is_green else [_without_passed_ids(check) for check in verdict.checks],
        agent=_priced(ctx.config, facts.agent),
        todo=lap.counts,
        ticked=lap.ticked,
        files_changed=verdict.files_changed,
        output_tail=verdict.output_tail[-4000:],
        progress=verdict.progress,
        done=verdict.done,
        protected_touched=verdict.guard.protected_touched,
        granted=verdict.guard.granted,
        tests=_test_changes(verdict, passing_before, passing_after),
        flaky=[check.command for check in verdict.checks if check.flaky],
        removed_before_checks=verdict.removed,
        judge=verdict.judge,
        told=facts.told,
        agent_index=facts.agent_index,
        slot=facts.slot,
        items=facts.items,
        worker=facts.worker,
        escalated=facts.escalated,
        split=facts.split,
    )


def save(ctx: RunContext, record: LapRecord, told: dict[str, str], stop: str, landing: Changes | None = None) -> bool:
    """The note saved (and with `landing`, the line moved as the lap is recorded: ledger.save_lap
    says whether it did); the messages it carried forgotten, unless the agent never worked (then
    the next lap hears them). A `stop` ends the run once the lap is recorded: `ralph run` goes
    on from the next lap, never this one again."""
    landed = ledger.save_lap(ctx.store, record, landing)
    if record.status not in (LapStatus.ERROR, LapStatus.LIMITED):
        for ref in told:
            ctx.store.delete(ref)
    if stop:
        raise RalphError(stop)
    return landed


def _priced(config: Config, agent: AgentResult) -> AgentResult:
    """The built-in agent's cost, from ralph.yaml's prices (a CLI's own report comes with it)."""
    if agent.model is None or agent.usage.cost_usd is not None:
        return agent
    cost = config.cost_of(agent.model, agent.usage.prompt_tokens, agent.usage.completion_tokens)
    return agent.model_copy(update={"usage": agent.usage.model_copy(update={"cost_usd": cost})})


def _test_changes(verdict: Verdict, passing_before: int, passing_after: int) -> TestChanges | None:
    if not any(check.tests for check in verdict.checks):
        return None
    return TestChanges(
        passing_before=passing_before,
        passing_after=passing_after,
        newly_failing=verdict.comparison.newly_failing,
        newly_passing=verdict.comparison.newly_passing,
    )


def _without_passed_ids(check: CheckResult) -> CheckResult:
    """Red laps are never a ratchet baseline: their notes need counts, not every passing test's
    id nor pytest's set-up."""
    if check.tests is None:
        return check
    return check.model_copy(update={"tests": check.tests.model_copy(update={"passed_ids": [], "setup": None})})
