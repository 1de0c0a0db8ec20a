"""The lap's last phase: a green lap advances the green line, the run's branch moved to it by
compare-and-swap: a plain run's lap in the swap that records it (landing), any other once
recorded (advance).

The line advances in the same swap that lets go of the lap's claims, which must still be its
own: a lap of a worker taken for dead (its items given to others) does not advance it. When
others moved the line during the lap (laps side by side), the lap is rebased onto it and judged
again there, never forced. A `--best-of` candidate does not advance the line by itself: it is
recorded as one of its round (as_candidate), and the round advances it to the best of them
(best_of.py). (`ralph land`, the user's command, is another thing: commands/land.py.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import IO

from ralph import git
from ralph.errors import Interrupted, RalphError
from ralph.git.layout import RunRefs
from ralph.git.store import Changes
from ralph.isolation import crashpoint
from ralph.isolation.files import remove_path
from ralph.lap import checking, speculation
from ralph.lap.commit import LapCommit
from ralph.lap.context import RunContext
from ralph.lap.judging import after_the_lap, guard, verdict_on
from ralph.lap.modes import Plain, Slot
from ralph.lap.rebase import rebase_lap
from ralph.lap.record import LapFacts, lap_record
from ralph.lap.this_lap import ThisLap
from ralph.records import ledger
from ralph.records.formats import BestOf, LapRecord, LapStatus
from ralph.show import events, ui
from ralph.verdict.decide import CannotCheck, Checked, Overrule, Verdict, overruled
from ralph.workspace.workspace import WorkspaceTampered, folder_for

MOVED_LINE_RETRIES = 10  # times a lap is rebased onto a green line that moved under it (by other slots)
AHEAD = "ahead"  # the folder of a lap's logs where its checks ran ahead of its turn to land


def advance(lap: ThisLap, facts: LapFacts, record: LapRecord) -> LapRecord:
    """The lap's record as it ends: green with the line advanced to it, or overruled red when it
    could not advance it; a `--best-of` candidate's as recorded (its round advances the line to
    the best of them)."""
    if lap.turn.best_of is not None:
        return record
    try:
        crashpoint.reached("advance")
        return _swap(lap, facts, record)
    except (KeyboardInterrupt, Interrupted):
        _interrupted(lap.ctx, record)
        raise


def landing(lap: ThisLap, record: LapRecord) -> Changes:
    """The line's move a green lap of a plain run makes in the swap that records it (one git
    process, not two): none but that lap moves the line. A lap of slots or of a remote's
    workers, or a `--best-of` candidate, lands as `advance` says, once recorded."""
    if not isinstance(lap.ctx.mode, Plain) or lap.turn.best_of is not None or record.status != LapStatus.GREEN:
        return {}
    return {RunRefs(lap.ctx.run_name).branch: (record.commit, record.parent)}


def as_candidate(record: LapRecord, round_of: BestOf | None) -> LapRecord:
    """A candidate's record keeps its progress and done aside, in `best_of`: they are the run's
    only once the round chose it (a candidate that was not chosen, or a round a crash cut short,
    must never count as progress nor end the run). Its first note says so already."""
    if round_of is None:
        return record
    measured = round_of.model_copy(update=dict(progress=record.progress, done=record.done))
    return record.model_copy(update=dict(progress=False, done=False, best_of=measured))


@contextlib.contextmanager
def _landing(lap: ThisLap, facts: LapFacts, record: LapRecord) -> Iterator[Landing]:
    """One lap of a parallel run's slots at a time between its first compare-and-swap of the line
    and its last: laps that ended together would each be rebased and checked again onto the line
    as the first of them left it, and all but one of them again (k laps, k(k+1)/2 checks, each
    in the others' way on a few cores); one at a time, a lap waits for the line to settle, then
    is rebased once, and while it waits it is checked ahead on the commit the lap in its turn is
    landing (speculation.py). The kernel lets go of the lock when its holder dies. Its file is in
    the workspace of the ralph that started the slots, which no lap's sandbox shows (in the
    repository's git dir, which laps read, code of a lap's could take the lock and hold every
    other slot back), and goes with it. A run of one lap at a time, or a worker of a remote's run
    (whose others are on other machines), takes none: the swap is what keeps the line right,
    this only its cost down."""
    folder = folder_for(lap.ctx.repo.common_dir, lap.ctx.run_name)
    lock = _landing_lock(lap.ctx, folder)
    if lock is None:
        yield Landing(None, None)
        return
    with lock:
        tip = partial(git.rev, lap.ctx.top, RunRefs(lap.ctx.run_name).branch)
        guess = speculation.wait_for_turn(lock, folder, partial(_guess, lap, facts, record), tip)
        try:
            yield Landing(folder, guess)
        finally:
            speculation.withdraw(folder)


@dataclass(frozen=True)
class Landing:
    """A lap's turn to land: where it says its candidate (None: nobody waits on it), and the
    last guess it made while it waited."""

    folder: Path | None
    guess: speculation.Guess | None


def _landing_lock(ctx: RunContext, folder: Path) -> IO[str] | None:
    if not isinstance(ctx.mode, Slot):
        return None
    try:
        return open(folder / "landing.lock", "a")  # noqa: SIM115
    except OSError:  # that workspace is gone: the ralph that started the slots ended
        return None


def _guess(
    lap: ThisLap, facts: LapFacts, record: LapRecord, onto: str, unwanted: speculation.Unwanted
) -> speculation.Guess | None:
    """The lap rebased onto `onto`, the commit another lap is landing, and checked there; its
    logs and events apart (`ahead`) until the guess is used. A guess is never needed: one that
    fails (git, the disk) is given up, and the lap's turn rebases and checks it as before."""
    ctx = lap.ctx
    try:
        if git.rev(ctx.top, f"{onto}^{{commit}}") != onto:  # not a commit (a stale name, gone since)
            return None
        sha, _ = rebase_lap(ctx, record.commit, record.parent, onto, record.slot)
        if sha is None:  # a conflict: found again, and said, if the line does end there
            return None
        made = LapCommit.read(ctx, sha, onto, facts.split)
        ahead = lap.log_dir / AHEAD
        remove_path(ahead)
        ahead.mkdir()
        with events.ahead_of(onto):
            checked = _checked(replace(lap, prepared=replace(lap.prepared, log_dir=ahead)), made, unwanted)
    except (RalphError, OSError) as failed:
        if isinstance(failed, WorkspaceTampered):  # the lap's doing, found here: never a guess's to hide
            raise
        why = ui.one_line(str(failed), 200)
        ui.warn(f"lap {lap.number}: checking it ahead on {onto[:10]} failed ({why}); it is checked in its turn")
        return None
    return None if unwanted() else speculation.Guess(of=record.commit, onto=onto, sha=sha, checked=checked)


def _checked(lap: ThisLap, made: LapCommit, unwanted: speculation.Unwanted) -> Checked | CannotCheck:
    try:
        return checking.checks_on(lap, made, unwanted)
    except CannotCheck as cannot:
        return cannot


def _logs_ahead_in_place(log_dir: Path) -> None:
    """A guess used: its checks' logs are the lap's."""
    for entry in (log_dir / AHEAD).iterdir():
        remove_path(log_dir / entry.name)
        entry.replace(log_dir / entry.name)


def _swap(lap: ThisLap, facts: LapFacts, record: LapRecord) -> LapRecord:
    """The compare-and-swap of the line and the lap's claims, again on each line others moved."""
    if record.status != LapStatus.GREEN:
        return record
    with _landing(lap, facts, record) as landing:
        return _swap_held(lap, facts, record, landing)


def _swap_held(lap: ThisLap, facts: LapFacts, record: LapRecord, landing: Landing) -> LapRecord:
    ctx = lap.ctx
    claimed = [RunRefs(ctx.run_name).claim(item) for item in lap.turn.items] if lap.turn.held_by else []
    for _ in range(MOVED_LINE_RETRIES):
        moves: dict[str, tuple[str | None, str | None]] = {RunRefs(ctx.run_name).branch: (record.commit, record.parent)}
        moves.update(dict.fromkeys(claimed, (None, lap.turn.held_by)))
        if record.status != LapStatus.GREEN or ctx.store.update(moves):
            return record
        if any(git.rev(ctx.top, ref) != lap.turn.held_by for ref in claimed):
            return _not_advanced(ctx, record, Overrule.LOST_CLAIMS)
        record = _replay_on_moved_line(lap, facts, record, landing)
    return _not_advanced(ctx, record, Overrule.LINE_MOVED)


def _interrupted(ctx: RunContext, record: LapRecord) -> None:
    """A worker of a remote's run advances the line only to its own laps: a green lap that did not
    advance it before the interruption never will."""
    branch = git.rev(ctx.top, RunRefs(ctx.run_name).branch) or record.parent
    if ctx.mode.on_remote and record.status == LapStatus.GREEN and not git.is_ancestor(ctx.top, record.commit, branch):
        with contextlib.suppress(RalphError):  # the remote out of reach: the note stays green
            _not_advanced(ctx, record, Overrule.UNLANDED_INTERRUPTED)


def onto_the_line(lap: ThisLap, made: LapCommit) -> tuple[ThisLap, LapCommit]:
    """A slot's lap made on a line other slots moved while its agent worked, rebased onto the
    line as it is now, before any check: checked once, on the commit that would land, rather than
    where it was made and then again there. Its own commit is kept (`rebased/<n>`).

    Only a commit the guard finds nothing against where it was made: the rebase writes TODO.md
    and PROGRESS.md anew (the lap's ticks and new items put onto the line's), which would hide what
    the lap did to them (an item deleted or reworded, a link made). A lap that conflicts on the
    line, or whose commit the hooks refused, is judged where it was made too (its landing finds the
    conflict); so is every lap of a plain run (nobody else moves its line), of a remote's workers
    (the line is where the remote has it) and each `--best-of` candidate (its round's)."""
    ctx = lap.ctx
    if not isinstance(ctx.mode, Slot) or lap.turn.best_of is not None or made.refusal is not None:
        return lap, made
    if git.rev(ctx.top, RunRefs(ctx.run_name).branch) == made.parent:
        return lap, made
    found = guard(lap, made)
    if found.problems or found.idle_ticks:
        return lap, made
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None  # the run's own record exists: this lap was run from it
    sha, _ = rebase_lap(ctx, made.sha, made.parent, state.green, lap.turn.slot)
    if sha is None:
        return lap, made
    ctx.store.update({RunRefs(ctx.run_name).rebased_lap(lap.number): (made.sha, None)})
    return replace(lap, state=state), LapCommit.read(ctx, sha, state.green, made.split)


def rebased(verdict: Verdict, onto: str) -> Verdict:
    """The verdict on a lap's commit rebased onto `onto`, the line as others moved it, saying so."""
    return replace(verdict, reason=f"{verdict.reason} (rebased onto {onto[:10]}, which moved during the lap)")


def _replay_on_moved_line(lap: ThisLap, facts: LapFacts, record: LapRecord, landing: Landing) -> LapRecord:
    """Someone advanced the green line during the lap's checks: rebase onto it and judge again,
    never force; checked already when the lap guessed this line while it waited for its turn."""
    ctx = lap.ctx
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None  # the run's own record exists: this lap was run from it
    guess = landing.guess
    if guess is not None and (guess.onto, guess.of) == (state.green, record.commit):
        sha, checked = guess.sha, guess.checked
        _logs_ahead_in_place(lap.log_dir)
    else:
        rebased_sha, conflicts = rebase_lap(ctx, record.commit, record.parent, state.green, record.slot)
        if rebased_sha is None:
            return _not_advanced(ctx, record, Overrule.REBASE_CONFLICT, state.green[:10], ", ".join(conflicts[:10]))
        sha, checked = rebased_sha, None
    if landing.folder is not None:
        speculation.publish(landing.folder, sha)
    made = LapCommit.read(ctx, sha, state.green, facts.split)
    verdict = rebased(verdict_on(replace(lap, state=state), made, facts.agent, checked), state.green)
    verdict = after_the_lap(verdict, lap.turn, made.ticked, [])  # its ticks as put onto the line
    replayed = lap_record(ctx, state, facts, made, verdict)
    ctx.store.add_note(sha, replayed.model_dump_json(indent=1))
    names = RunRefs(ctx.run_name)
    moves: dict[str, tuple[str, str | None]] = {names.lap(facts.number): (sha, record.commit)}
    original = names.rebased_lap(facts.number)
    if git.rev(ctx.top, original) is None:  # the lap's own commit, as its agent left it: kept too
        moves[original] = (record.commit, None)
    ctx.store.update(moves)
    return replayed


def _not_advanced(ctx: RunContext, record: LapRecord, why: Overrule, *facts: object) -> LapRecord:
    """The lap's note overruled red (verdict/decide.py): it did not advance the line."""
    red = record.overruled(overruled(None, why, *facts))
    ctx.store.add_note(record.commit, red.model_dump_json(indent=1))
    return red
