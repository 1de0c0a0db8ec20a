"""One lap, as its phases: prepare → agent → commit (hooks) → checks → verdict → record → advance.

Each phase is a module of its own with a typed input and output; what one phase learned (the
TODO before and after, the commit's changes) is handed on, not read through git again. The lap
itself is handed on as one value (ThisLap), made once its workspace is ready.
"""

from __future__ import annotations

from ralph.errors import RalphError
from ralph.isolation import crashpoint
from ralph.lap import advance, agent, commit, disk, judging, prepare, record
from ralph.lap.commit import LapCommit
from ralph.lap.context import RunContext
from ralph.lap.this_lap import ThisLap
from ralph.lap.turn import Turn
from ralph.lap.watch import watching_the_repository
from ralph.records.formats import LapRecord
from ralph.records.ledger import RunState
from ralph.show import events, ui
from ralph.verdict.decide import Overrule, Verdict, overruled
from ralph.workspace.workspace import WorkspaceTampered


def run_lap(ctx: RunContext, state: RunState, turn: Turn) -> LapRecord:
    """Lap `turn.number`, as `turn` says: by which agent, on which items, in which slot."""
    lap = ThisLap(ctx, state, turn, prepare.start_lap(ctx, state, turn.number))
    worked = agent.work(lap)
    with watching_the_repository(ctx, turn.number) as tampered:
        events.emit("phase_changed", phase="committing")
        own, lap, made, judged = _commit_and_judge(lap, worked)
    # Ticks as the agent made them, and as the rebase put them onto the line: an item it added
    # ticked ("- [x] X") reads as a tick there when X is open on the line.
    ticked = list(dict.fromkeys([*own.ticked, *made.ticked]))
    judged = judging.after_the_lap(judged, turn, ticked, worked.tampered + tampered)
    facts = _facts(lap, worked)
    recorded = advance.as_candidate(record.lap_record(ctx, lap.state, facts, made, judged), turn.best_of)
    if record.save(ctx, recorded, worked.told, judged.stop, advance.landing(lap, recorded)):
        return recorded
    return advance.advance(lap, facts, recorded)


def _facts(lap: ThisLap, worked: agent.Worked) -> record.LapFacts:
    turn, prepared = lap.turn, lap.prepared
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
        worker=lap.ctx.worker,
        escalated=turn.escalated,
    )


def _commit_and_judge(lap: ThisLap, worked: agent.Worked) -> tuple[LapCommit, ThisLap, LapCommit, Verdict]:
    """The lap committed (its own commit), then checked and judged: that commit, or (the line
    moved under a slot's lap) it rebased onto the line, with the lap as of that line. Where that
    fails on a full disk, a red lap: of its commit, or (none made yet) of the last green tree,
    nothing of the lap trusted; its files deleted."""
    ctx, own = lap.ctx, None
    try:
        own = commit.commit_lap(lap, worked.result)
        crashpoint.reached("commit")
        on, made = advance.onto_the_line(lap, own)
        verdict = judging.verdict_on(on, made, worked.result)
        return own, on, made, verdict if made is own else advance.rebased(verdict, made.parent)
    except (RalphError, OSError) as failed:
        if isinstance(failed, WorkspaceTampered) or not disk.full(ctx, failed):
            raise
        cause = ui.one_line(str(failed), 300)
    own = own or commit.unjudged(lap, worked.result)
    ctx.workspace.delete_the_laps_files()
    if not disk.full(ctx):
        return own, lap, own, overruled(None, Overrule.DISK_FREED, disk.free(ctx), output_tail=cause)
    return own, lap, own, overruled(None, Overrule.DISK_FULL, disk.full_disk(ctx), lap.number, output_tail=cause)
