"""The lap in progress, as its phases hand it on: ThisLap."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralph.lap.context import RunContext
from ralph.lap.prepare import Prepared
from ralph.lap.turn import Turn
from ralph.records.ledger import RunState


@dataclass(frozen=True)
class ThisLap:
    """One lap as every phase after its start sees it: what the run shares (`ctx`), the run as
    the lap found it (`state`: its last green commit), what the lap was asked to do (`turn`), and
    its workspace made ready (`prepared`). Made once, where the lap starts; a phase takes it and
    only its own inputs."""

    ctx: RunContext
    state: RunState
    turn: Turn
    prepared: Prepared

    @property
    def number(self) -> int:
        return self.turn.number

    @property
    def log_dir(self) -> Path:
        return self.prepared.log_dir
