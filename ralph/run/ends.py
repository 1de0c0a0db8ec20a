"""How laps and runs end, told: the events, the end's table, the lifecycle hooks.

A run of laps ends by RunEnded, raised by whatever decides (fuses.Fuses.check, or a
coordinator once its slots are done) and caught in one place, loop._take_part, which says it.
A run an error or an interrupt stopped is told here too (`failed`, `stopped_by`).
"""

from __future__ import annotations

from pathlib import Path

from ralph.config.sections import LifecycleHooks
from ralph.errors import Exit, Interrupted, RalphError
from ralph.lap.caller import Stop
from ralph.lap.context import RunContext
from ralph.records import ledger
from ralph.records.formats import LapRecord
from ralph.records.ledger import RunState
from ralph.run import lifecycle, summary
from ralph.show import events, ui


class RunEnded(Exception):
    """The run is done, or a fuse blew: its exit code, why, and the run as it was then."""

    def __init__(self, code: Exit, reason: str, state: RunState) -> None:
        super().__init__(reason)
        self.code, self.reason, self.state = code, reason, state


def said(ctx: RunContext, ended: RunEnded) -> Exit:
    """The run's end, said: the laps table, the last event, the lifecycle hooks."""
    code, reason, state = ended.code, ended.reason, ended.state
    summary.laps_table(state)
    for line in [] if code == Exit.DONE else summary.what_is_left(ctx.top, state):
        ui.say(f"[yellow]left:[/] {ui.safe(line)}")
    how = {Exit.DONE: "done", Exit.INTERRUPTED: "interrupted"}.get(code, "fuse")  # interrupted: by a ralph.api caller
    events.emit("run_ended", exit=int(code), reason=reason, stopped_by=how, flaky=state.flaky_checks())
    last = state.last_record()
    facts = dict(run=ctx.run_name, lap=last.lap if last else 0, status=code.status, reason=reason)
    if code == Exit.DONE:
        lifecycle.fire(ctx.config.hooks, "on_done", ctx.top, ctx.env, **facts)
    lifecycle.fire(ctx.config.hooks, "on_stop", ctx.top, ctx.env, **facts, exit=int(code))
    return code


def lap_ended(ctx: RunContext, record: LapRecord) -> None:
    """A lap's end, told: its event, then hooks.on_lap_end."""
    events.emit(
        "lap_ended",
        status=record.status,
        agent=record.agent.name,
        cost_usd=record.agent.usage.cost_usd,
        reason=record.reason,
        duration_s=record.duration_s,
        tokens=record.agent.usage.total if record.agent.usage.requests else None,
        largest_prompt_tokens=record.agent.usage.largest_prompt_tokens,
        files_changed=record.files_changed,
        ticked=record.ticked,
        todo_done=record.todo.done,
        todo_total=record.todo.total,
        commit=record.commit,
        escalated=record.agent.name if record.escalated else None,
        split=record.split,
    )
    facts = dict(run=ctx.run_name, lap=record.lap, status=record.status, reason=record.reason)
    lifecycle.fire(ctx.config.hooks, "on_lap_end", ctx.top, ctx.env, **facts)


def told_the_caller(ctx: RunContext, state: RunState, record: LapRecord) -> None:
    """A ralph.api caller's lap callback, told of the lap just recorded (a copy: the run's own
    stays as it was saved). When it raises Stop, or the caller's code raised in the lap, the run
    ends here as an interrupted one does (the same run resumes later), unless this lap made it
    done: done is the repository's to say."""
    caller = ctx.caller
    try:
        if caller.on_lap is not None:
            caller.on_lap(record.model_copy(deep=True))
        if caller.kept.first is not None:
            where, raised = caller.kept.first
            raise Stop(f"{where} raised {type(raised).__name__}: {raised}")
    except Stop as stop:
        if not state.is_done:
            reason = f"stopped by the caller: {stop}" if str(stop) else "stopped by the caller"
            raise RunEnded(Exit.INTERRUPTED, reason, state) from None


def failed(stopped: BaseException) -> None:
    """The last event of a run an error, an interrupt or a bug of ralph's ended."""
    if isinstance(stopped, KeyboardInterrupt | Interrupted | SystemExit):  # SystemExit: a ralph.api caller's
        code, how, reason = Exit.INTERRUPTED, "interrupted", "interrupted"
    elif isinstance(stopped, RalphError):
        code, how, reason = stopped.exit_code, "error", str(stopped)
    else:
        code, how, reason = Exit.ERROR, "error", "internal error (a bug in ralph)"
    events.emit("run_ended", exit=int(code), reason=reason, stopped_by=how, flaky=[])


def stopped_by(stopped: BaseException, top: Path, hooks: LifecycleHooks, name: str, env: dict[str, str]) -> None:
    """hooks.on_stop, told of a run an error or an interrupt stopped."""
    code = stopped.exit_code if isinstance(stopped, RalphError) else Exit.INTERRUPTED
    status = "error" if isinstance(stopped, RalphError) else "interrupted"
    last = ledger.load(top, name)
    lap = last.laps[-1].number if last and last.laps else 0
    facts = dict(run=name, lap=lap, status=status, reason=str(stopped) or status, exit=int(code))
    lifecycle.fire(hooks, "on_stop", top, env, **facts)
