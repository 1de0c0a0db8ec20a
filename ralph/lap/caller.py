"""What a Python program that runs ralph through ralph.api adds to a run: its own agent, made
anew for every lap; its own done check, which must hold beside the checks and the TODO; and a
callback after every lap, which may stop the run there. The command line gives none of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ralph.agents.base import AgentResult, LapTask
from ralph.errors import RalphError

if TYPE_CHECKING:
    from ralph.records.formats import LapRecord
    from ralph.records.ledger import RunState

NEEDS_CALLER = (
    "agent.kind: python is an object given to ralph.api.run(agent=...) — "
    "the command line runs command and openai agents"
)


class LapAgent(Protocol):
    """What a caller's agent must do: one lap's work in `task.workspace`, and how it went."""

    def run_lap(self, task: LapTask) -> AgentResult: ...


class Stop(Exception):
    """Raised by a caller's lap callback: the run ends after that lap, as an interrupted one
    does, and the same run resumes later. Its message is the run's stop reason."""


@dataclass(frozen=True)
class Caller:
    """What ralph.api's caller gave the run; the command line's runs have none of it."""

    agent: Callable[[], LapAgent] | None = None  # called once a lap: every lap a fresh agent
    is_done: Callable[[Path, RunState], bool] | None = None  # the green candidate's tree, the run before it
    on_lap: Callable[[LapRecord], None] | None = None  # after each lap's record is saved; may raise Stop


class FreshEach:
    """config.agent of kind python: the caller's factory called for every lap, so no lap's agent
    remembers another's. It runs in the caller's process, as trusted as the caller's own code
    (the checks that judge its work run sandboxed all the same)."""

    kind = "python"

    def __init__(self, make: Callable[[], LapAgent]) -> None:
        self.make = make

    def check_endpoint(self, deadline: float) -> None:
        """Nothing to reach before the first lap: the agent is the caller's code."""

    def run_lap(self, task: LapTask) -> AgentResult:
        result = self.make().run_lap(task)
        if not isinstance(result, AgentResult):
            raise RalphError(f"the agent's run_lap returned {type(result).__name__}, not an AgentResult")
        return result.model_copy(update={"kind": self.kind})
