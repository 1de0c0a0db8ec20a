"""What a run's laps made and spent, added up: the run's, and each agent's (`ralph stats`).

A lap counts for the agent that ran it, as its note names it (agent.name and agent.model): a
fallback's lap is the fallback's, an agent.escalate lap the escalated agent's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from ralph.records.formats import LapRecord, LapStatus
from ralph.records.ledger import Lap, RunState
from ralph.verdict.checks import CheckResult, passing_tests


@dataclass(frozen=True)
class Tally:
    """Laps added up. `items` are finished ones: ticked by a green lap on the green line."""

    laps: int = 0  # every lap ref, limited and unreadable ones included
    limited: int = 0  # an agent's usage limit cut them short: they count for nothing
    unreadable: int = 0  # no note this ralph reads (a crash before it, a newer ralph's)
    green: int = 0
    items: int = 0
    tokens: int = 0  # every role's: the agent's and the judge's
    unknown_tokens: int = 0  # laps of an agent CLI that reported no usage (not in tokens)
    spent_usd: float = 0.0  # the costs that are known
    unknown_cost: int = 0  # laps whose cost is not known (not in spent_usd)
    lap_s: float = 0.0  # the laps' durations added up

    def __add__(self, other: Tally) -> Tally:
        return Tally(*(getattr(self, name) + getattr(other, name) for name in _FIELDS))

    @property
    def counted(self) -> int:
        """The laps that count (toward max_laps, and as the green share's whole)."""
        return self.laps - self.limited

    @property
    def known_tokens(self) -> int | None:
        """The tokens as far as they are known; None when no lap's are."""
        return None if self.laps and self.unknown_tokens == self.laps else self.tokens

    @property
    def cost_usd(self) -> float | None:
        """What the laps cost as far as it is known; None when no lap's cost is (never $0 for that)."""
        if self.laps and self.unknown_cost == self.laps:
            return None
        return round(self.spent_usd, 6)

    def as_json(self) -> dict[str, object]:
        """The shape `ralph stats --json` gives a run's and an agent's numbers (docs/commands.md)."""
        return {
            "laps": self.counted,
            "limited_laps": self.limited,
            "unreadable_laps": self.unreadable,
            "green_laps": self.green,
            "green_share": round(self.green / self.counted, 4) if self.counted else None,
            "items_finished": self.items,
            "tokens": self.known_tokens,
            "laps_of_unknown_tokens": self.unknown_tokens,
            "cost_usd": self.cost_usd,
            "laps_of_unknown_cost": self.unknown_cost,
            "lap_s": round(self.lap_s, 3),
            "lap_s_per_item": round(self.lap_s / self.items, 3) if self.items else None,
            "tokens_per_item": (self.tokens + self.items // 2) // self.items  # ints: any count divides
            if self.items and self.known_tokens is not None
            else None,
        }


_FIELDS = [field.name for field in fields(Tally)]


def green_line(state: RunState) -> set[str]:
    """The commits of the green line, from its tip down to the base, each with a green note."""
    by_commit = {
        lap.record.commit: lap.record for lap in state.laps if lap.record and lap.record.status == LapStatus.GREEN
    }
    line: set[str] = set()
    commit = state.green
    while (record := by_commit.get(commit)) is not None and commit not in line:
        line.add(commit)
        commit = record.parent
    return line


def of_lap(state: RunState, lap: Lap, line: set[str]) -> Tally:
    """One lap's numbers; its tokens and cost as the run's own totals count them (ledger)."""
    record = lap.record
    if record is None:
        return Tally(laps=1, unreadable=1, unknown_tokens=1, unknown_cost=1)
    alone = dataclasses.replace(state, laps=[lap])
    spent, unknown = alone.cost_used()
    return Tally(
        laps=1,
        limited=int(record.status == LapStatus.LIMITED),
        green=int(record.status == LapStatus.GREEN and not state.passed_over(record)),  # a round is its winner's
        items=len(record.ticked) if record.commit in line else 0,
        tokens=alone.tokens_used(),
        unknown_tokens=int(_tokens_unknown(record)),
        spent_usd=spent,
        unknown_cost=unknown,
        lap_s=record.duration_s,
    )


def of_run(state: RunState) -> Tally:
    """The run's laps added up."""
    line = green_line(state)
    return sum((of_lap(state, lap, line) for lap in state.laps), Tally())


def _tokens_unknown(record: LapRecord) -> bool:
    """An agent CLI's lap whose output gave no usage (the built-in agent counts every request it
    makes; a limited lap counts for nothing)."""
    return record.agent.kind == "command" and not record.agent.usage.requests and record.status != LapStatus.LIMITED


def agent_of(record: LapRecord | None) -> tuple[str, str | None]:
    """Who ran a lap: its agent's name (its preset, else its kind) and model."""
    if record is None:
        return "?", None
    return record.agent.name or record.agent.kind, record.agent.model


def by_agent(state: RunState) -> dict[tuple[str, str | None], Tally]:
    """The run's laps added up per agent, in the order each agent first ran a lap."""
    line = green_line(state)
    tallies: dict[tuple[str, str | None], Tally] = {}
    for lap in state.laps:
        agent = agent_of(lap.record)
        tallies[agent] = tallies.get(agent, Tally()) + of_lap(state, lap, line)
    return tallies


def wall_s(state: RunState) -> float | None:
    """From the first lap's start to the last lap's end (pauses between `ralph run`s included),
    to the second, as notes keep a start; None without a lap whose note says when it started."""
    spans = [span for lap in state.laps if lap.record and (span := _span(lap.record))]
    if not spans:
        return None
    wall = (max(end for _, end in spans) - min(start for start, _ in spans)).total_seconds()
    return max(wall, *(lap.record.duration_s for lap in state.laps if lap.record))  # never shorter than a lap


def _span(record: LapRecord) -> tuple[datetime, datetime] | None:
    try:
        start = datetime.fromisoformat(record.started_at)
        end = start + timedelta(seconds=record.duration_s)
    except (ValueError, OverflowError):  # a hand-edited note (or a worker's gone wrong): left out
        return None
    return (start, end) if start.tzinfo is not None else None  # ralph writes UTC; a naive time compares with none


def tests_passing(results: list[CheckResult]) -> int | None:
    """Passing tests in these results; None where no check gave per-test results."""
    return passing_tests(results) if any(result.tests for result in results) else None
