"""`ralph run --parallel N`: N slots run laps side by side, each on TODO items of its own.

The ralph the user started coordinates: it starts (or resumes) the run as usual, lets go of
the claims that slots of an earlier, killed ralph left, then starts N slots — `ralph run
--slot K` processes of the same run, each with a workspace of its own — shows their lines
marked with their slot, and says how the run ended when they all have.

A slot loops: the run's state read from its refs; the fuses, which count every slot's laps;
items claimed (claims.py: refs taken by compare-and-swap, so no two laps work on one item);
a lap number claimed the same way; the lap; its claims let go of. A lap starts from the
green line as it is then. When it ends, the line may have moved: the lap is rebased onto the
new tip and checked again there (rebase.rebase_lap), a conflict makes it red, and the green
line only ever advances, by compare-and-swap, to a commit whose checks ran on exactly it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from ralph import git, todo
from ralph.errors import Exit, RalphError
from ralph.git.layout import RunRefs
from ralph.isolation import proc
from ralph.isolation.files import remove_path
from ralph.isolation.proc import Child
from ralph.lap import speculation
from ralph.lap.context import RunContext
from ralph.lap.modes import PARENT_VAR, ROUND_VAR, Parallel, Worker, slot_name
from ralph.lap.phases import run_lap
from ralph.lap.turn import Turn
from ralph.records import ledger
from ralph.records.formats import LapStatus
from ralph.records.ledger import RunState
from ralph.run import claims, ends, forked
from ralph.run.ends import RunEnded
from ralph.run.fuses import Fuses, slot_turn
from ralph.run.options import RunOptions
from ralph.run.workers import Crew
from ralph.show import events, ui
from ralph.workspace.places import folder_for

LOOK = (0.05, 0.5)  # seconds between glances at the run's refs while every open item is another slot's
FULL_LOOK = 5.0  # seconds after which a slot reads the run again, whether its refs moved or not
# The coordinator's word to its idle slots that one of them ended (the run may have): a look now.
# A signal whose default is to be ignored, so a slot that is not napping (_nap) is not touched.
RING = signal.SIGURG
REMOTE_POLL = (0.5, 4.0)  # the same for a worker of a remote's run, from quick to slow: each look is a fetch
STOP_GRACE = 30.0  # seconds a slot has to end its lap after a Ctrl-C, before it is killed
# The exit codes of a slot whose run ended as runs do (done, a fuse): its claims were let go of
# as its last lap ended. A slot killed, or one that failed, may have left some.
RAN_TO_ITS_END = set(Exit) - {Exit.ERROR, Exit.INTERRUPTED}
CHECKS_ITEM = "(the checks: every item is ticked, and a check still fails)"


def coordinate(ctx: RunContext, mode: Parallel, options: RunOptions) -> NoReturn:
    """Start the slots, relay their lines, wait for them all; the run's end, said once."""
    cleared = claims.clear(ctx.store, ctx.repo.common_dir, ctx.run_name)
    if cleared:
        ui.warn(f"let go of {cleared} claims left by the slots of an earlier `ralph run` of {ctx.run_name}")
    speculation.withdraw(folder_for(ctx.repo.common_dir, ctx.run_name))  # an earlier run's slot's, killed
    children = [start_slot(ctx, options, slot) for slot in range(1, mode.slots + 1)]  # before any thread
    relays = [threading.Thread(target=relay, args=(child, slot), daemon=True) for slot, child in enumerate(children, 1)]
    for thread in relays:
        thread.start()
    try:
        codes = _wait(ctx, children)
    finally:  # a Ctrl-C, or a bug of ralph's: every slot still running ends its lap and stops
        proc.end([child for child in children if child.poll() is None], STOP_GRACE)
        for thread in relays:
            thread.join(5)
        claims.clear(ctx.store, ctx.repo.common_dir, ctx.run_name)
        for slot in range(1, mode.slots + 1):  # a slot killed outright left its workspace
            remove_path(folder_for(ctx.repo.common_dir, slot_name(ctx.run_name, slot)))
    _ended(ctx, codes)


def _wait(ctx: RunContext, children: list[Child]) -> list[int]:
    """Every slot's exit code. A slot that dies (`kill -9`) lets go of its claims at once, so
    the others take its items; the last one's end is the run's, heard as it happens."""
    ended: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot, child in enumerate(children, 1):
        threading.Thread(target=_hear_end, args=(child, slot, ended), daemon=True).start()
    for _ in children:
        slot = _next_end(ended)
        if children[slot - 1].wait() not in RAN_TO_ITS_END:  # (reaped already: its code, at once)
            claims.release_dead(ctx.store, ctx.run_name, _other_than(slot))
        for child in children:
            if child.poll() is None:  # not reaped: its pid is still its own
                with contextlib.suppress(ProcessLookupError):  # reaped since, by its _hear_end
                    os.kill(child.pid, RING)
    return [child.wait() for child in children]


def _hear_end(child: Child, slot: int, ended: queue.SimpleQueue[int]) -> None:
    child.wait()
    ended.put(slot)


def _next_end(ended: queue.SimpleQueue[int]) -> int:
    while True:  # a timeout: a Ctrl-C reaches this thread between two waits
        try:
            return ended.get(timeout=1.0)
        except queue.Empty:
            continue


def _other_than(dead: int) -> Callable[[dict], bool]:
    return lambda holder: holder.get("slot") != dead


def start_slot(ctx: RunContext, options: RunOptions, slot: int, env: dict[str, str] | None = None) -> Child:
    """`ralph run --slot K` of this run, with `env` besides this process's environment: a fork
    of this process (forked.py), or a new one while other threads of this one run."""
    args = ["run", "--name", ctx.run_name, "--slot", str(slot), "--plain"]
    args += ["--items-per-lap", str(options.items_per_lap), "--max-laps", str(ctx.config.limits.max_laps)]
    if options.config_path is not None:
        args += ["--config", str(options.config_path.resolve())]
    if options.events_to not in (None, "-"):
        args += ["--events", str(options.events_to)]
    # The slot hardens itself as any ralph run does: the secrets leave its environment block.
    inherited = {name: value for name, value in os.environ.items() if name != ROUND_VAR}
    slot_env = dict(inherited, **(env or {}), **{PARENT_VAR: str(os.getpid())})
    events.emit("phase_changed", phase="")  # this process's phase (the baseline's) is over: its slots work
    if forked.can_fork():
        return forked.start(args, ctx.top, slot_env, ctx.run_dir / "lock")
    # -P: the repository ralph runs in may hold a folder named ralph; only the installed one runs.
    return proc.start([sys.executable, "-P", "-m", "ralph", *args], ctx.top, slot_env)


_printing = threading.Lock()


def relay(child: Child, slot: int) -> None:
    """A slot's lines (plain, cleaned by the slot), each marked with the slot."""
    assert child.stdout is not None
    for raw in child.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        with _printing:
            ui.console.print(f"[dim]slot {slot} │[/] {ui.safe(line)}")


def _ended(ctx: RunContext, codes: list[int]) -> NoReturn:
    """The run's end, from its state (the fuses read once more), else from the slots' codes."""
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None
    Fuses(ctx.config.limits).check(ctx, state)
    failed = next((code for code in codes if code not in (0, Exit.DONE)), Exit.ERROR)
    code = Exit(failed) if failed in set(Exit) else Exit.ERROR
    raise RunEnded(code, f"the slots ended with exit codes {', '.join(map(str, codes))}", state)


def as_worker(ctx: RunContext, mode: Worker) -> NoReturn:
    """`ralph run --remote`: this clone's laps as one worker of the run the remote keeps, until
    it is done (by any worker) or a fuse blows; then its end, as this worker sees it once it
    left the crew (the run read again)."""
    timeout = ctx.config.limits.worker_timeout
    crew = Crew(ctx.store, ctx.run_name, timeout, ctx.run_dir / "heartbeat.log", mode.name)
    try:
        work(ctx, 0, mode.items_per_lap, crew)
    except RunEnded as ended:
        code = ended.code
    finally:
        crew.leave()
    _ended(ctx, [code])


@dataclass
class _Pace:
    """How long a worker of a remote's run waits before it looks at the run again (a fetch),
    when it found nothing to do: from quick, doubling to slow; quick again after a lap."""

    quick: float
    slow: float
    poll: float = 0.0

    def __post_init__(self) -> None:
        self.poll = self.quick

    def wait(self) -> None:
        time.sleep(self.poll)
        self.poll = min(self.poll * 2, self.slow)


@dataclass(frozen=True, kw_only=True)
class _Claimed:
    """A lap's claims: its items (held by `mine`) and its number (held by `lap_mine`)."""

    state: RunState  # the run as read after the claim: the lap starts from its green line
    items: list[str]
    mine: str
    number: int
    lap_mine: str


def work(ctx: RunContext, slot: int, items_per_lap: int, crew: Crew | None = None) -> NoReturn:
    """One slot's laps, until the run is done or a fuse blows (for every slot alike): RunEnded.
    With a `crew`, the slot is a worker of a run a git remote keeps: its number is the crew's,
    and the remote's refs are brought here before each look at the run."""
    fuses = Fuses(ctx.config.limits)
    pace = _Pace(*REMOTE_POLL)
    seen = glance = moved = None
    while True:
        if crew is not None:
            slot = crew.sync()
        else:  # before the run is read: whatever moves after the read is seen
            glance, moved = moved or _glance(ctx), None
        state = _read_run(ctx)
        if crew is not None:
            seen = _trusted(ctx, state, seen)
        fuses.check(ctx, state)
        claimed = _claim_lap(ctx, state, slot, items_per_lap, crew)
        if claimed is None:
            if glance is None:
                pace.wait()
            else:
                moved = _until_moved(ctx, glance)
            continue
        pace.poll = pace.quick
        try:
            mine = Turn(number=claimed.number, items=tuple(claimed.items), slot=slot, held_by=claimed.mine)
            state, turn = claimed.state, slot_turn(ctx.config, claimed.state, mine)
            events.emit("lap_started", lap=turn.number, max_laps=ctx.config.limits.max_laps, **turn.said(ctx.config))
            record = run_lap(ctx, state, turn)
        finally:
            _let_go(ctx, claimed.items, claimed.mine, claimed.number, claimed.lap_mine)
        ends.lap_ended(ctx, record)


def _read_run(ctx: RunContext) -> RunState:
    """The run as its refs are now. ledger.load reads the laps' refs, then the branch: a lap that
    landed in between is on the branch but not yet among the laps read (its lap ref moves before
    the branch does), and the tip would seem no lap's (the run not done, the green checks the
    base's). Read once more then: the second read has it."""
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None  # the run was started before its slots
    if state.green != state.record.base and all(lap.commit != state.green for lap in state.laps):
        state = ledger.load(ctx.top, ctx.run_name) or state
    return state


def _glance(ctx: RunContext) -> str:
    """What the run's refs point at: its branch, claims, started laps and laps. Nothing that
    could give a slot work (an item let go of or ticked, a lap ended, a fuse's count) changes
    without one of them moving. The notes are not looked at: a lap's note is written before its
    lap ref moves, and one overruled red before its started ref goes, so each move of the notes
    would only wake idle slots once more, in the way of the lap that is landing."""
    names = RunRefs(ctx.run_name)
    return git.out(ctx.top, "for-each-ref", "--format=%(refname) %(objectname)", names.all, names.branch)


def _until_moved(ctx: RunContext, glance: str) -> str | None:
    """Back when a ref of the run moved (the new glance), or after FULL_LOOK seconds or a ring
    (None): a glance is one git process, where reading the run is many, so a slot with nothing
    to do hears a lap's end at once."""
    pause, until = LOOK[0], time.monotonic() + FULL_LOOK
    while time.monotonic() < until:
        if not _nap(pause):
            return None
        if (now := _glance(ctx)) != glance:
            return now
        pause = min(pause * 2, LOOK[1])
    return None


def _nap(seconds: float) -> bool:
    """A pause of `seconds`; False when the coordinator rang during it. RING is blocked only while
    the slot naps, so the kernel keeps it for sigtimedwait; at any other time it is ignored (its
    default), and nothing else the slot does is ever cut short by it."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {RING})
    try:
        return signal.sigtimedwait({RING}, seconds) is None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _claim_lap(ctx: RunContext, state: RunState, slot: int, count: int, crew: Crew | None) -> _Claimed | None:
    """Items and a lap number claimed for the slot's next lap; None when there is nothing to do
    now (every open item claimed by others, or the laps under way may use up max_laps)."""
    limits = ctx.config.limits
    alive = crew.alive if crew else claims.pid_alive
    worker = {"worker": crew.worker} if crew else {}
    if state.counted_laps() + len(claims.started(ctx.top, ctx.run_name, alive)) >= limits.max_laps:
        return None  # the laps under way may finish the run, or use up max_laps
    # The open items no other slot holds; when every item is ticked but a check fails, the
    # checks themselves, for one slot at a time. None free: an idle slot's look writes nothing.
    free = claims.unclaimed(ctx.top, ctx.run_name, _open_items(ctx, state) or [CHECKS_ITEM])
    if not free:
        return None
    mine = claims.holder(ctx.top, slot, **worker)
    state, items = _still_open(ctx, state, claims.take_items(ctx.store, ctx.run_name, free, count, mine), mine, crew)
    if not items:
        return None
    lap_mine = claims.holder(ctx.top, slot, items=items, **worker)
    number = claims.take_number(ctx.store, ctx.run_name, lap_mine)
    # max_laps, kept whatever the timing: of the laps under way, only the lowest numbers
    # that fit beside the counted laps may run; a slot past them gives its number back.
    under_way = sorted(claims.started(ctx.top, ctx.run_name, alive))
    if number not in under_way or under_way.index(number) >= limits.max_laps - state.counted_laps():
        _let_go(ctx, items, mine, number, lap_mine)
        return None
    return _Claimed(state=state, items=items, mine=mine, number=number, lap_mine=lap_mine)


def _still_open(
    ctx: RunContext, state: RunState, items: list[str], mine: str, crew: Crew | None
) -> tuple[RunState, list[str]]:
    """Another lap may have ticked an item and let go of it between the state read before the
    claim and the claim: the line read again, only what is still open kept (the rest let go)."""
    if crew is not None:
        ctx.store.sync()
    state = _read_run(ctx)
    still_open = set(_open_items(ctx, state))  # read once: a TODO may hold 100,000 items
    done = [item for item in items if item not in still_open and item != CHECKS_ITEM]
    claims.release_items(ctx.store, ctx.run_name, done, mine)
    return state, [item for item in items if item not in done]


def _trusted(ctx: RunContext, state: RunState, seen: str | None) -> str:
    """The green line as fetched from the remote, refused unless its tip is the base or a
    commit a lap of the run checked, and it only moved forward since `seen`: anyone who can
    push to the remote can move it, and a worker must not build on what no lap checked."""
    green, branch = state.green, f"ralph/{ctx.run_name}"
    checked = {lap.commit for lap in state.laps if lap.record and lap.record.status == LapStatus.GREEN}
    if green != state.record.base and green not in checked:
        raise RalphError(
            f"{branch} on the remote points at {green[:10]}, which no lap of the run checked (pushed by hand?) — "
            "move it back to the last green lap's commit (`ralph status --remote`), or start a new run"
        )
    if seen is not None and not git.is_ancestor(ctx.top, seen, green):
        raise RalphError(
            f"{branch} on the remote moved back from {seen[:10]} to {green[:10]}, which laps never do — "
            f"move it forward again to {seen[:10]}, or start a new run"
        )
    return green


def _let_go(ctx: RunContext, items: list[str], mine: str, number: int, lap_mine: str) -> None:
    """A Ctrl-C must not cut a ref update short: git would leave its lock in the repository."""
    with proc.signals_held():
        claims.release_items(ctx.store, ctx.run_name, items, mine)
        claims.finish_number(ctx.store, ctx.run_name, number, lap_mine)


def _open_items(ctx: RunContext, state: RunState) -> list[str]:
    text = git.show_file(ctx.top, state.green, ctx.config.files.todo)
    return [item.text for item in todo.parse(text) if not item.done]
