"""`ralph status`: where a run stands: its green tip, laps and fuses, what is left, who works on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ralph import git, todo
from ralph.errors import Exit
from ralph.git.layout import RunRefs
from ralph.records import ledger
from ralph.records.ledger import RunState
from ralph.run import claims
from ralph.run.summary import what_is_left
from ralph.show import ui


def status(cwd: Path, run: str | None, *, as_json: bool, remote: str | None = None) -> Exit:
    top = git.find_repo(cwd).top
    if remote is not None:
        from ralph.run import workers  # its network and process code, for a remote's run only

        run = workers.fetch_runs(top, remote, run)
        for problem in ledger.read_runs(top)[1]:  # anyone may push to a remote: each said, none hides the rest
            ui.warn(problem)
    state = ledger.resolve(top, run)
    # The green tip's TODO, not the last lap's: a red lap's ticks are not the run's.
    on_line = todo.count(todo.parse(git.show_file(top, state.green, state.record.config.files.todo)))
    summary = _summary(state, on_line)
    under_way = claims.under_way(top, state.name) if _has_refs(state, RunRefs(state.name).started) else []
    if as_json:
        summary.update(under_way=under_way, laps_by_slot=_laps_by_slot(state))
        summary.update(workers=_workers(top, state, under_way))
        ui.print_json(summary)
        return Exit.DONE
    _say_progress(top, state, summary, on_line)
    _say_parallel(top, state, under_way)
    _say_spending(state, summary)
    if state.flaky_checks():
        ui.say(f"  flaky       {ui.safe(', '.join(state.flaky_checks()))}")
    ui.say(f"  review      git log ralph/{state.name}   ·   ralph log   ·   ralph land")
    return Exit.DONE


def _summary(state: RunState, on_line: todo.Counts) -> dict[str, Any]:
    """The run's standing as `--json` gives it (the text is read from it too)."""
    limits = state.record.config.limits
    return {
        "run": state.name,
        "issue": state.record.issue.model_dump() if state.record.issue else None,
        "base": state.record.base,
        "green": state.green,
        "green_laps": state.green_laps(),
        "laps": len(state.laps),
        "max_laps": limits.max_laps,
        "without_progress": state.laps_without_progress(),
        "stagnation": limits.stagnation,
        "errors_in_a_row": state.errors_in_a_row(),
        "done": state.is_done,
        "todo": on_line.model_dump() if state.last_record() else None,
        "still_failing": state.still_failing(),
        "flaky": state.flaky_checks(),
        "tokens": state.tokens_used(),
        "max_tokens": limits.max_tokens,
        "cost_usd": state.cost_used()[0],
        "laps_of_unknown_cost": state.cost_used()[1],
        "max_cost_usd": limits.max_cost_usd,
        "context": dict(zip(("this_lap", "one_session"), state.context_bars(), strict=True)),
    }


def _say_progress(top: Path, state: RunState, summary: dict[str, Any], on_line: todo.Counts) -> None:
    """Done or not, the green tip, the laps against their fuses, and what is left."""
    done = summary["done"]
    ui.say(f"run [bold]{state.name}[/]: {'[green]done[/]' if done else 'not done'}")
    issue = state.record.issue
    if issue is not None:
        ui.say(f"  issue       #{issue.number} {ui.safe(issue.title)} ({ui.safe(issue.url)})")
    ui.say(f"  last green  {state.green[:10]} (base {state.record.base[:10]}), {summary['green_laps']} green lap(s)")
    limited = state.limited_laps()
    also = f" (and {limited} limited, not counted)" if limited else ""
    ui.say(f"  laps        {state.counted_laps()} of max {summary['max_laps']}{also}")
    ui.say(f"  stagnation  {summary['without_progress']} of {summary['stagnation']} laps without progress")
    if state.last_record():
        ui.say(f"  TODO        {on_line.done} done, {on_line.open} open (on the green line)")
    for line in [] if done else what_is_left(top, state):
        ui.say(f"  left        {ui.safe(line)}")


def _say_parallel(top: Path, state: RunState, under_way: list[dict]) -> None:
    """A parallel run's laps by slot and laps under way; a `--remote` run's workers."""
    by_slot = _laps_by_slot(state)
    if by_slot:
        counts = ", ".join(f"slot {slot}: {count}" for slot, count in by_slot.items())
        ui.say(f"  slots       laps by slot: {ui.safe(counts)}")
    for lap in under_way:
        items = "; ".join(lap["items"]) or "?"
        ui.say(f"  under way   lap {lap['lap']} (slot {lap['slot']}): {ui.safe(items)}")
    for worker in _workers(top, state, under_way):
        beat = f"beat {worker['beat_s_ago']}s ago" if worker["beat_s_ago"] is not None else "no beat"
        said = f"worker {worker['number']}  {worker['worker']}, {beat}, {worker['laps']} lap(s)"
        ui.say(f"  workers     {ui.safe(said)}")


def _say_spending(state: RunState, summary: dict[str, Any]) -> None:
    """Tokens and cost so far, against their caps."""
    if summary["tokens"]:
        cap = f" of max {summary['max_tokens']:,}" if summary["max_tokens"] else ""
        ui.say(f"  tokens      {summary['tokens']:,}{cap} (prompt + completion, all laps)")
        bars = state.context_bars()
        if bars[1]:  # an agent CLI tells no request's size: no bars of 0 tokens
            ui.context_bars(*bars)
    spent, unknown = state.cost_used()
    max_cost = summary["max_cost_usd"]
    if spent or max_cost:
        cap = f" of max ${max_cost:g}" if max_cost else ""
        also = f"; {unknown} lap(s) of unknown cost not counted" if unknown else ""
        ui.say(f"  cost        ${spent:.2f}{cap}{also}")


def _laps_by_slot(state: RunState) -> dict[int, int]:
    slots = [lap.record.slot for lap in state.laps if lap.record and lap.record.slot is not None]
    return {slot: slots.count(slot) for slot in sorted(set(slots))}


def _has_refs(state: RunState, folder: str) -> bool:
    """Whether the run had refs in `folder` as its state was read: none, none to read again."""
    return any(ref.startswith(folder) for ref in state.refs)


def _workers(top: Path, state: RunState, under_way: list[dict]) -> list[dict]:
    """A `--remote` run's workers present (their refs), each with its laps under way and its laps."""
    if not _has_refs(state, RunRefs(state.name).workers):
        return []
    from ralph.run import workers

    laps = [lap.record.worker for lap in state.laps if lap.record and lap.record.worker]
    return [
        dict(worker, laps=laps.count(name), under_way=[lap for lap in under_way if lap["worker"] == name])
        for worker in workers.roster(top, state.name)
        for name in [worker["worker"]]
    ]
