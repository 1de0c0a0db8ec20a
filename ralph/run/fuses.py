"""Everything that ends a run of laps: done, or a fuse (max_laps, stagnation, time, tokens,
cost, an agent that keeps failing or stays limited). `Fuses.check` raises RunEnded; between
laps, `Fuses.wait_out` waits out a failing endpoint or an agent's limit, within their budgets.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from ralph import git, todo
from ralph.config import Config
from ralph.config.sections import Limits
from ralph.errors import Exit
from ralph.lap import planning
from ralph.lap.context import RunContext
from ralph.lap.turn import Turn
from ralph.records.formats import LapRecord, LapStatus
from ralph.records.ledger import RunState
from ralph.run.ends import RunEnded
from ralph.show import events, ui
from ralph.verdict import checks

OUTAGE_FIRST_WAIT = 5.0  # seconds before the lap after an endpoint failure; doubles while it lasts
LIMIT_FIRST_WAIT, LIMIT_LONGEST_WAIT, LIMIT_MARGIN = 60.0, 1800.0, 1.0


@dataclass
class Outage:
    """The run waits out a model endpoint that fails (a server restarting, a hung one) between
    error laps, backing off, until `budget` seconds of waiting are spent."""

    budget: float
    waited: float = 0.0
    waits: int = 0

    def wait(self) -> None:
        seconds = min(OUTAGE_FIRST_WAIT * 2**self.waits, self.budget - self.waited)
        ui.say(
            f"the model endpoint failed; the next lap starts in {seconds:g}s "
            f"({self.waited:g}s of limits.outage_wait {self.budget:g}s spent)"
        )
        time.sleep(seconds)
        self.waited += seconds
        self.waits += 1


@dataclass
class LimitWait:
    """The run waits out an agent CLI's usage or rate limit (its laps count for nothing), until
    `budget` seconds of waiting are spent."""

    budget: float
    waited: float = 0.0

    def wait(self, seconds: float, reason: str) -> None:
        seconds = max(0.0, min(seconds, self.budget - self.waited))
        until = datetime.now().astimezone() + timedelta(seconds=seconds)
        events.emit("limit_wait", until=until.isoformat(timespec="seconds"), seconds=round(seconds, 1), reason=reason)
        ui.say(f"{ui.safe(reason)}: the next lap starts at {until:%H:%M:%S} (in {seconds:.0f}s)")
        time.sleep(seconds)
        self.waited += seconds


@dataclass
class Fuses:
    """One process's fuses on a run: its clock, and the waits it spent."""

    limits: Limits
    started: float = field(default_factory=time.monotonic)
    outage: Outage = field(init=False)
    limit: LimitWait = field(init=False)

    def __post_init__(self) -> None:
        self.outage, self.limit = Outage(self.limits.outage_wait), LimitWait(self.limits.limit_wait)

    def check(self, ctx: RunContext, state: RunState) -> None:
        """Raises RunEnded when the run is done or a fuse blew, for laps of every slot alike."""
        for fuse in (_done, self._agent_failing, self._limited, _laps_spent, self._budgets):
            ended = fuse(ctx, state)
            if ended is not None:
                raise ended

    def wait_out(self, state: RunState, agent_index: int) -> None:
        """Before a lap of agent `agent_index` of config.agents: a failing endpoint or a limit the
        last lap hit, waited out when there is no other agent to turn to."""
        last = state.last_record()
        if last is not None and _endpoint_failed(last) and agent_index == last.agent_index:
            self.outage.wait()
        else:
            self.outage = Outage(self.limits.outage_wait)
        if last is not None and last.status == LapStatus.LIMITED and agent_index == last.agent_index:
            self.limit.wait(_limit_wait(last, state.limited_in_a_row()), last.reason)

    def _agent_failing(self, ctx: RunContext, state: RunState) -> RunEnded | None:
        last = state.last_record()
        if last is None:
            return None
        if _endpoint_failed(last):
            if self.outage.waited < self.outage.budget:
                return None
            return RunEnded(
                Exit.AGENT_UNUSABLE,
                f"the model endpoint kept failing through {self.outage.waited:g}s of waiting "
                f"(limits.outage_wait); the last: {last.reason}",
                state,
            )
        if state.errors_in_a_row() >= 3:
            return RunEnded(Exit.AGENT_UNUSABLE, f"3 agent errors in a row; the last: {last.reason}", state)
        return None

    def _limited(self, ctx: RunContext, state: RunState) -> RunEnded | None:
        """An agent that stays limited, with no other to turn to: whether its wait fits."""
        last, limits = state.last_record(), self.limits
        if last is None or last.status != LapStatus.LIMITED:
            return None
        # (laps side by side are never escalated: their agent is agent_for's)
        if (next_turn(ctx, state).agent_index if last.escalated else agent_for(ctx.config, state)) != last.agent_index:
            return None
        wait = _limit_wait(last, state.limited_in_a_row())
        left = limits.max_minutes * 60 - (time.monotonic() - self.started) if limits.max_minutes is not None else None
        if left is not None and wait > left:
            reason = f"the agent's limit resets after max_minutes ({limits.max_minutes:g}): {last.reason}"
            return RunEnded(Exit.TIME_SPENT, reason, state)
        if self.limit.waited + wait > self.limit.budget:
            return RunEnded(
                Exit.AGENT_UNUSABLE,
                f"the agent is limited, and waiting {wait:.0f}s more would pass limits.limit_wait "
                f"({self.limit.budget:g}s, {self.limit.waited:.0f}s spent): {last.reason}",
                state,
            )
        if state.limited_laps() > limits.max_laps:
            return RunEnded(
                Exit.AGENT_UNUSABLE, f"the agent was limited in {state.limited_laps()} laps, more than max_laps", state
            )
        return None

    def _budgets(self, ctx: RunContext, state: RunState) -> RunEnded | None:
        limits = self.limits
        if limits.max_minutes is not None and time.monotonic() - self.started >= limits.max_minutes * 60:
            return RunEnded(Exit.TIME_SPENT, f"max_minutes ({limits.max_minutes:g}) reached", state)
        if limits.max_tokens is not None and state.tokens_used() >= limits.max_tokens:
            reason = f"max_tokens ({limits.max_tokens}) spent: {state.tokens_used()} used"
            return RunEnded(Exit.BUDGET_SPENT, reason, state)
        spent, unknown = state.cost_used()
        if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
            return RunEnded(
                Exit.BUDGET_SPENT, f"max_cost_usd ({limits.max_cost_usd:g}) spent: ${spent:.2f} used", state
            )
        if limits.max_cost_usd is not None and unknown:  # a lap cut off before its tool reported (a timeout)
            return RunEnded(
                Exit.BUDGET_SPENT,
                f"max_cost_usd ({limits.max_cost_usd:g}) cannot be kept: {unknown} lap(s) of unknown cost "
                f"(${spent:.2f} known)",
                state,
            )
        return None


def _done(ctx: RunContext, state: RunState) -> RunEnded | None:
    if state.last_record() is None and not state.laps and _done_at_base(ctx, state):
        return RunEnded(Exit.DONE, "done: every check passes and every TODO item is ticked at the base", state)
    done = state.done_record()
    if done is not None:
        return RunEnded(Exit.DONE, f"done at lap {done.lap}: every check passes and every TODO item is ticked", state)
    return None


def _laps_spent(ctx: RunContext, state: RunState) -> RunEnded | None:
    limits = ctx.config.limits
    if state.counted_laps() >= limits.max_laps:
        return RunEnded(Exit.MAX_LAPS, f"max_laps ({limits.max_laps}) reached without finishing", state)
    if state.laps_without_progress() >= limits.stagnation:
        return RunEnded(Exit.STAGNATION, f"{state.laps_without_progress()} laps in a row without progress", state)
    return None


def agent_for(cfg: Config, state: RunState) -> int:
    """Which of config.agents runs the next lap: the last lap's, or the next one's after the
    last lap was limited or the agent itself failed `fallback_after` laps in a row. Escalated
    and split laps are no step of that chain (agent.escalate is not one of the fallbacks)."""
    records = [lap.record for lap in state.laps if lap.record and not lap.record.escalated and lap.record.split is None]
    if not records:
        return 0
    last = len(cfg.agent.fallback)
    agent_index, after = min(records[-1].agent_index, last), cfg.agent.fallback_after
    recent = [record for record in records[-after:] if record.agent_index == agent_index]
    failing = len(recent) == after and all(record.agent.outcome != "ok" for record in recent)
    if records[-1].status == LapStatus.LIMITED or failing:
        return min(agent_index + 1, last)
    return agent_index


def next_turn(ctx: RunContext, state: RunState) -> Turn:
    """The next lap's turn in a run of laps one at a time (lap state.next_lap). An item is stuck
    after agent.escalate_after red laps in a row on it (since the green line last moved, every lap
    of a plain run started from the same TODO and was told to take its first open item first): the
    next laps are agent.escalate's, until a lap is green; after as many escalated red laps (or at
    once without agent.escalate) the planner role splits it, once, where there is one (`splits`);
    then agent.escalate's laps again, or the agent's."""
    cfg, number, agent_index = ctx.config, state.next_lap, agent_for(ctx.config, state)
    after, escalate = cfg.agent.escalate_after, cfg.escalate_index
    since = _since_green(state)
    red = [record for record in since if record.status == LapStatus.RED]
    if after is None or len([record for record in red if not (record.escalated or record.split)]) < after:
        return Turn(number=number, agent_index=agent_index)
    if escalate is not None and len([record for record in red if record.escalated]) < after:
        return Turn(number=number, agent_index=escalate, escalated=True)
    item = _first_open(ctx, state.green)
    if splits(cfg) and item and not any(record.split for record in since) and _splittable(ctx, state, item):
        return Turn(number=number, agent_index=agent_index, split=item)
    if escalate is not None:
        return Turn(number=number, agent_index=escalate, escalated=True)
    return Turn(number=number, agent_index=agent_index)


def splits(cfg: Config) -> bool:
    """Whether a stuck item is split: agent.split, by the planner role. Never by the lap's agent
    CLI: the agent that got stuck would say what its item is (issue 38: it split its item into
    two trivial ones, ticked them, and the run was done), so without roles.planner, no split."""
    return cfg.agent.split and cfg.agent.escalate_after is not None and planning.role(cfg) is not None


def say_unsplit(cfg: Config) -> None:
    """Said once, as a run of laps one at a time starts: its stuck items are not split, and why."""
    if cfg.agent.split and cfg.agent.escalate_after is not None and not splits(cfg):
        then = "agent.escalate takes its laps" if cfg.agent.escalate else "the agent keeps its laps"
        ui.say(
            "a stuck item is not split: there is no planner role (roles.planner.model), and the agent "
            f"that got stuck never splits its own item; {then} (docs/agents.md: Stuck items)"
        )


def slot_turn(cfg: Config, state: RunState, claimed: Turn) -> Turn:
    """The turn of a lap of slots side by side, `claimed` (its number, slot, and the items it
    claimed) with its agent: agent.escalate's when one of its items is stuck, after
    agent.escalate_after red laps in a row on it (of the laps that claimed it; a green one, on it
    or not, ends the row), until a lap on it is green. Never a split: the split lap's TODO.md
    would not survive the rebase onto a line others moved."""
    agent_index, after, escalate = agent_for(cfg, state), cfg.agent.escalate_after, cfg.escalate_index
    if after is None or escalate is None:
        return replace(claimed, agent_index=agent_index)
    for item in claimed.items:
        on_it = [lap.record for lap in state.laps if lap.record and item in lap.record.items]
        row = list(itertools.takewhile(lambda record: record.status != LapStatus.GREEN, reversed(on_it)))
        if len([record for record in row if record.status == LapStatus.RED]) >= after:
            return replace(claimed, agent_index=escalate, escalated=True)
    return replace(claimed, agent_index=agent_index)


def _since_green(state: RunState) -> list[LapRecord]:
    """The laps since the last green one that started from the green tip."""
    found: list[LapRecord] = []
    for lap in reversed(state.laps):
        if lap.record is None:
            continue
        if lap.record.status == LapStatus.GREEN:
            break
        if lap.record.parent == state.green:
            found.append(lap.record)
    return found[::-1]


def _first_open(ctx: RunContext, commit: str) -> str | None:
    """The item laps are told to take first: the first open one of the TODO at `commit`."""
    items = todo.parse(git.show_file(ctx.top, commit, ctx.config.files.todo))
    return next((item.text for item in items if not item.done), None)


def _splittable(ctx: RunContext, state: RunState, item: str) -> bool:
    """Each item is split at most once, and an item a split made never is: a run splits at most
    as many times as its TODO had items."""
    splits = [lap.record for lap in state.laps if lap.record and lap.record.split]
    if any(record.split == item for record in splits):
        return False
    name = ctx.config.files.todo
    for record in splits:
        if record.status == LapStatus.GREEN:
            before = {found.text for found in todo.parse(git.show_file(ctx.top, record.parent, name))}
            made = {found.text for found in todo.parse(git.show_file(ctx.top, record.commit, name))} - before
            if item in made:
                return False
    return True


def _limit_wait(record: LapRecord, in_a_row: int) -> float:
    """Until the reset the tool named (and a moment; a reset that came while ralph was not
    running, none), else 60 s, doubling to 30 min."""
    until = record.agent.limited_until
    if until is not None:
        return max(0.0, until - time.time()) + LIMIT_MARGIN
    return min(LIMIT_FIRST_WAIT * 2 ** min(in_a_row - 1, 10), LIMIT_LONGEST_WAIT)


def _endpoint_failed(record: LapRecord | None) -> bool:
    return record is not None and record.status == LapStatus.ERROR and record.agent.endpoint_failed


def _done_at_base(ctx: RunContext, state: RunState) -> bool:
    items = todo.parse(git.show_file(ctx.top, state.green, ctx.config.files.todo))
    return checks.done(state.record.baseline, todo.count(items))
