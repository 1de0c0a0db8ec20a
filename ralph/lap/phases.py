"""One lap, as its phases: prepare → agent → commit (hooks) → checks → verdict → record → land.

Each phase is a module of its own with a typed input and output; what one phase learned (the
TODO before and after, the commit's changes) is handed on, not read through git again.
"""

from __future__ import annotations

from ralph.errors import RalphError
from ralph.isolation import crashpoint
from ralph.lap import advance, agent, commit, disk, judging, prepare, record
from ralph.lap.commit import LapCommit
from ralph.lap.context import RunContext
from ralph.lap.turn import Turn
from ralph.lap.watch import watching_the_repository
from ralph.records.formats import LapRecord
from ralph.records.ledger import RunState
from ralph.show import events, ui
from ralph.verdict.decide import Overrule, Verdict, overruled
from ralph.workspace.workspace import WorkspaceTampered


def run_lap(ctx: RunContext, state: RunState, turn: Turn) -> LapRecord:
    """Lap `turn.number`, as `turn` says: by which agent, on which items, in which slot."""
    prepared = prepare.start_lap(ctx, state, turn.number)
    worked = agent.work(ctx, state, turn, prepared)
    with watching_the_repository(ctx, turn.number) as tampered:
        events.emit("phase_changed", phase="committing")
        lap, judged = _commit_and_judge(ctx, state, turn, prepared, worked)
    judged = judging.after_the_lap(judged, turn, lap.ticked, worked.tampered + tampered)
    facts = _facts(ctx, turn, prepared, worked)
    recorded = advance.as_candidate(record.lap_record(ctx, state, facts, lap, judged), turn.best_of)
    record.save(ctx, recorded, worked.told, judged.stop)
    return advance.land(ctx, turn, facts, recorded)


def _facts(ctx: RunContext, turn: Turn, prepared: prepare.Prepared, worked: agent.Worked) -> record.LapFacts:
    return record.LapFacts(
        number=turn.number,
        started=prepared.started,
        started_at=prepared.started_at,
        prepare_s=prepared.prepare_s,
        agent=worked.result,
        told=list(worked.told.values()),
        agent_index=turn.agent_index,
        slot=turn.slot,
        items=list(turn.items),
        worker=ctx.worker,
        escalated=turn.escalated,
    )


def _commit_and_judge(
    ctx: RunContext, state: RunState, turn: Turn, prepared: prepare.Prepared, worked: agent.Worked
) -> tuple[LapCommit, Verdict]:
    """The lap committed, checked and judged. Where that fails on a full disk, a red lap: of its
    commit, or (none made yet) of the last green tree, nothing of the lap trusted; its files
    deleted."""
    made, number = None, turn.number
    try:
        made = commit.commit_lap(ctx, state, number, worked.result, prepared.todo_before, turn.escalated)
        crashpoint.reached("commit")
        return made, judging.verdict_on(ctx, state, made, worked.result, number, prepared.log_dir)
    except (RalphError, OSError) as failed:
        if isinstance(failed, WorkspaceTampered) or not disk.full(ctx, failed):
            raise
        cause = ui.one_line(str(failed), 300)
    lap = made or commit.unjudged(ctx, state, number, worked.result, prepared.todo_before, turn.escalated)
    ctx.workspace.delete_the_laps_files()
    if not disk.full(ctx):
        return lap, overruled(None, Overrule.DISK_FREED, disk.free(ctx), output_tail=cause)
    return lap, overruled(None, Overrule.DISK_FULL, disk.full_disk(ctx), number, output_tail=cause)
