"""What one lap is asked to do, and by whom: its Turn, made by the run's mode (fuses.next_turn
for laps one at a time, fuses.slot_turn for a slot's, best_of.candidate for a candidate's)
and handed to the lap's phases."""

from __future__ import annotations

from dataclasses import dataclass

from ralph.config import Config
from ralph.records.formats import BestOf


@dataclass(frozen=True, kw_only=True)
class Turn:
    """Lap `number`, run by agent `agent_index` of config.agents (`escalated`: it is
    agent.escalate, on a stuck item; `split`: the stuck item the planner splits instead); in a
    run of laps side by side, by slot `slot`, on the TODO items it claimed (their claims
    `held_by` that holder); `best_of`: a candidate of that `--best-of` round, on its one item,
    which its round advances the line to or not."""

    number: int
    agent_index: int = 0
    escalated: bool = False
    split: str | None = None
    items: tuple[str, ...] = ()
    slot: int | None = None
    held_by: str | None = None
    best_of: BestOf | None = None

    def said(self, cfg: Config) -> dict[str, str]:
        """What the lap_started event says of a lap on a stuck item: the agent escalated to, the item split."""
        if self.escalated:
            return {"escalated": cfg.agents[self.agent_index].name}
        return {"split": self.split} if self.split is not None else {}
