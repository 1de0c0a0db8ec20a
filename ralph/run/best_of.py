"""`ralph run --best-of N`: N candidate laps on one item, side by side, from one green commit;
the green line advances to the best of them.

A round: the first open item at the green tip, as a plain lap would take it (every item ticked
but a check failing: the checks), and that tip, G. N slots — `ralph run --slot K` processes, as
`--parallel` starts them, each with a workspace of its own — each run one lap on that item
from G, with the same prompt. A candidate does not advance the line (advance.as_candidate): its note names its
round and keeps its progress and done aside, so no candidate counts for the run before it is
chosen. Once every candidate has ended, the green ones are ranked: progress first (one that
ticked nothing and made no test pass never beats one that did), then the most tests fixed
(failing on G, passing after: one gone is no gain), the judge's score, the smallest diff (lines, then files), the
lowest lap number. The
winner's note gets its progress and done back, and the green line moves to it by
compare-and-swap from G; nothing else moves the line during a round (the run's lock is held).
The others stay under their lap refs (`ralph show N`), their notes saying which lap won.
"""

from __future__ import annotations

import threading
from typing import NoReturn

from ralph import git, todo
from ralph.errors import Exit, Interrupted, RalphError
from ralph.git.layout import RunRefs
from ralph.isolation import proc
from ralph.isolation.files import remove_path
from ralph.lap.context import RunContext
from ralph.lap.modes import Candidate, Round, Rounds, slot_name
from ralph.lap.phases import run_lap
from ralph.lap.turn import Turn
from ralph.records import ledger
from ralph.records.formats import BestOf, LapRecord, LapStatus
from ralph.records.ledger import RunState
from ralph.run import ends, parallel
from ralph.run.ends import RunEnded
from ralph.run.fuses import Fuses, agent_for
from ralph.run.options import RunOptions
from ralph.show import events, ui
from ralph.verdict import ratchet
from ralph.verdict.checks import CheckResult
from ralph.workspace.places import folder_for


def coordinate(ctx: RunContext, mode: Rounds, options: RunOptions) -> NoReturn:
    """Rounds until the run is done or a fuse blows (RunEnded); max_laps counts every candidate."""
    fuses = Fuses(ctx.config.limits)
    _land_the_chosen(ctx)
    while True:
        state = ledger.load(ctx.top, ctx.run_name)
        assert state is not None  # started before its rounds
        fuses.check(ctx, state)
        fuses.wait_out(state, agent_for(ctx.config, state))
        this_round = _next_round(ctx, state, mode.of)
        try:
            codes = _run_candidates(ctx, options, this_round)
        except (KeyboardInterrupt, Interrupted):
            _interrupted(ctx, this_round)
            raise
        _decide(ctx, this_round)
        failed = [(slot, code) for slot, code in enumerate(codes, 1) if code != 0]
        if failed:
            slot, code = failed[0]
            raise RalphError(f"candidate {slot} of the round ended with exit code {code} — its lines above say why")


def candidate(ctx: RunContext, mode: Candidate) -> NoReturn:
    """A slot's one lap, as candidate of the round its coordinator gave it; the line not advanced to it."""
    this_round, lap = mode.round, mode.lap
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None  # the run was started before its slots
    if state.green != this_round.green:
        raise RalphError(f"ralph/{ctx.run_name} moved since the round began (by hand?) — run `ralph run` again")
    events.emit("lap_started", lap=lap, max_laps=ctx.config.limits.max_laps)
    round_of = BestOf(first_lap=this_round.first_lap, of=this_round.of)
    turn = Turn(
        number=lap,
        agent_index=agent_for(ctx.config, state),
        items=(this_round.item,),
        slot=mode.number,
        best_of=round_of,
    )
    record = run_lap(ctx, state, turn)
    ends.lap_ended(ctx, record)
    raise RunEnded(Exit.DONE, f"candidate lap {lap} ended", state)


def _next_round(ctx: RunContext, state: RunState, best_of: int) -> Round:
    """The next open item from the green tip; fewer candidates when max_laps leaves fewer laps."""
    text = git.show_file(ctx.top, state.green, ctx.config.files.todo)
    still_open = [item.text for item in todo.parse(text) if not item.done]
    left = ctx.config.limits.max_laps - state.counted_laps()  # >= 1: the fuses were checked
    item = still_open[0] if still_open else parallel.CHECKS_ITEM
    return Round(green=state.green, item=item, first_lap=state.next_lap, of=max(1, min(best_of, left)))


def _run_candidates(ctx: RunContext, options: RunOptions, this_round: Round) -> list[int]:
    """The round's slots started, their lines relayed, waited for: their exit codes. On a
    Ctrl-C, each one still running ends its lap (the line advances to none) and stops."""
    last = this_round.laps[-1]
    ui.say(f"best of {this_round.of}: laps {this_round.first_lap}–{last} on {ui.safe(this_round.item)!r}")
    children = [
        parallel.start_slot(ctx, options, slot, this_round.env(lap)) for slot, lap in enumerate(this_round.laps, 1)
    ]
    relays = [
        threading.Thread(target=parallel.relay, args=(child, slot), daemon=True)
        for slot, child in enumerate(children, 1)
    ]
    for thread in relays:
        thread.start()
    try:
        for child in children:
            child.wait()
    finally:
        proc.end([child for child in children if child.poll() is None], parallel.STOP_GRACE)
        for thread in relays:
            thread.join(5)
        for slot in range(1, this_round.of + 1):  # a slot killed outright left its workspace
            remove_path(folder_for(ctx.repo.common_dir, slot_name(ctx.run_name, slot)))
    return [child.wait() for child in children]  # (each has ended)


def _candidates(state: RunState, this_round: Round) -> list[LapRecord]:
    """The round's candidates that recorded their lap, by lap number."""
    return [lap.record for lap in state.laps if lap.number in this_round.laps and lap.record and lap.record.best_of]


def _decide(ctx: RunContext, this_round: Round) -> None:
    """The line advanced to the best green candidate; the others are kept, their notes saying which lap won."""
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None
    candidates = _candidates(state, this_round)
    green = [record for record in candidates if record.status == LapStatus.GREEN and record.parent == this_round.green]
    if state.green != this_round.green:  # nothing of ralph's moves it during a round
        _line_moved(ctx, green)
    laps = list(this_round.laps)
    if not green:
        ui.say(f"best of {this_round.of}: no candidate was green; the next round is told why")
        events.emit("round_ended", of=this_round.of, laps=laps, chosen=None, why="no candidate was green")
        return
    merits = {record.lap: _merit(ctx, record, state.green_checks()) for record in green}
    ranked = sorted(green, key=lambda record: merits[record.lap], reverse=True)
    _land(ctx, this_round, ranked, _why(ranked, merits))
    events.emit("round_ended", of=this_round.of, laps=laps, chosen=ranked[0].lap, why=_why(ranked, merits))
    kept = [str(record.lap) for record in candidates if record is not ranked[0]]
    named = f"lap {kept[0]}" if len(kept) == 1 else f"laps {', '.join(kept)}"
    also = f"; {named} kept for review (ralph show {kept[0]})" if kept else ""
    ui.say(f"[green]lap {ranked[0].lap} won best of {this_round.of}[/]: {ui.safe(_why(ranked, merits))}{also}")


def _land(ctx: RunContext, this_round: Round, ranked: list[LapRecord], why: str) -> None:
    """The notes say who won and why, then the line moves to the winner by compare-and-swap
    from the round's green commit. A crash between the two: the next `ralph run` moves it."""
    winner, won = ranked[0], f"best of {this_round.of}"
    for loser in ranked[1:]:
        _rewrite(ctx, loser, reason=f"not chosen: lap {winner.lap} won {won} ({why}) — {loser.reason}")
    ctx.store.add_note(winner.commit, _chosen(winner, f"won {won}: {why} — {winner.reason}").model_dump_json(indent=1))
    if not ctx.store.swap(RunRefs(ctx.run_name).branch, winner.commit, this_round.green):
        _line_moved(ctx, [winner])


def _line_moved(ctx: RunContext, green: list[LapRecord]) -> NoReturn:
    """Someone moved the green line during the round (by hand): it advances to no candidate, none is chosen."""
    for record in green:
        _rewrite(ctx, record, reason=f"not chosen: the green line moved during the round — {record.reason}")
    raise RalphError(
        f"ralph/{ctx.run_name} moved during the round, not by ralph: no candidate landed — `ralph run` goes on from it"
    )


def _chosen(record: LapRecord, reason: str) -> LapRecord:
    """The winner's note: its progress and done are the run's now."""
    assert record.best_of is not None
    best_of = record.best_of.model_copy(update=dict(chosen=True))
    update = dict(best_of=best_of, progress=best_of.progress, done=best_of.done, reason=reason)
    return record.model_copy(update=update)


def _rewrite(ctx: RunContext, record: LapRecord, reason: str) -> None:
    """A candidate's note, not chosen, with `reason`."""
    best_of = record.best_of.model_copy(update=dict(chosen=False)) if record.best_of else None
    update = dict(best_of=best_of, progress=False, done=False, reason=reason)
    ctx.store.add_note(record.commit, record.model_copy(update=update).model_dump_json(indent=1))


def _merit(ctx: RunContext, record: LapRecord, at_green: list[CheckResult]) -> tuple[float, ...]:
    """What ranks a green candidate, best highest: progress, tests fixed, the judge's score,
    fewer lines changed, fewer files, the lower lap number (_why names them in that order)."""
    assert record.best_of is not None
    score = record.judge.score if record.judge and record.judge.score is not None else -1.0
    lines, files = _diff_size(ctx, record)
    return (float(record.best_of.progress), _fixed(at_green, record), score, -lines, -files, -record.lap)


def _fixed(at_green: list[CheckResult], record: LapRecord) -> int:
    """The tests that failed on the round's green commit and pass after the lap, by the ratchet's
    own rule (ratchet.turned_passing): a failing test that is gone, or a test file's entry that
    passes because none of its tests ran, is no gain. Tests the lap wrote itself count for
    nothing: padding with trivial tests cannot win."""
    after = {check.command: check.tests for check in record.checks if check.tests}
    return sum(
        len(ratchet.turned_passing(check.tests, after[check.command]))
        for check in at_green
        if check.tests and check.command in after
    )


def _why(ranked: list[LapRecord], merits: dict[int, tuple[float, ...]]) -> str:
    """Why the first of `ranked` won, against the next best."""
    if len(ranked) == 1:
        return "the only green candidate"
    best, next_best = merits[ranked[0].lap], merits[ranked[1].lap]
    which = next(index for index, (mine, theirs) in enumerate(zip(best, next_best, strict=True)) if mine != theirs)
    other = f"lap {ranked[1].lap}"
    return [
        "the only one that made progress",
        f"+{best[1]:g} tests ({other}: +{next_best[1]:g})",
        f"the judge's score {best[2]:.2f} ({other}: {_score(next_best[2])})",
        f"the smallest diff, {-best[3]:g} lines ({other}: {-next_best[3]:g})",
        f"the smallest diff, {-best[4]:g} files ({other}: {-next_best[4]:g})",
        "equal to the others, and the first",
    ][which]


def _score(score: float) -> str:
    return f"{score:.2f}" if score >= 0 else "none"


def _diff_size(ctx: RunContext, record: LapRecord) -> tuple[int, int]:
    """Lines added and deleted, and files changed, from the lap's green commit to its commit;
    a binary file counts as one line."""
    numstat = git.out(ctx.top, "diff", "--numstat", "--no-renames", record.parent, record.commit, "--")
    rows = [line.split("\t", 2) for line in numstat.splitlines() if line]
    lines = sum(int(added) + int(deleted) if added.isdigit() and deleted.isdigit() else 1 for added, deleted, _ in rows)
    return lines, len(rows)


def _interrupted(ctx: RunContext, this_round: Round) -> None:
    """A round a Ctrl-C cut short chooses nothing: its green candidates are kept, not chosen."""
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None
    for record in _candidates(state, this_round):
        if record.status == LapStatus.GREEN:
            _rewrite(ctx, record, reason=f"not chosen: its round was interrupted — {record.reason}")


def _land_the_chosen(ctx: RunContext) -> None:
    """A round a crash cut short between its choice and the line's move: the move, made now."""
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None
    chosen = [lap.record for lap in state.laps if lap.record and lap.record.best_of and lap.record.best_of.chosen]
    last = chosen[-1] if chosen else None
    if last is None or last.commit == state.green or last.parent != state.green or last.status != LapStatus.GREEN:
        return
    if ctx.store.swap(RunRefs(ctx.run_name).branch, last.commit, state.green):
        ui.say(f"lap {last.lap}, chosen by a round a crash cut short, landed now")
