"""What a Python program that runs ralph through ralph.api adds to a run: its own agent, made
anew for every lap; its own done check, which must hold beside the checks and the TODO; and a
callback after every lap, which may stop the run there. The command line gives none of them."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import ValidationError

from ralph.agents.base import AgentResult, LapTask
from ralph.errors import RalphError
from ralph.isolation import orphans

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


class Kept:
    """What the caller's code raised in the middle of a lap (where, what), the first of it: kept,
    not raised there, where it could pass for the lap's own failure. The run stops after the
    lap (ends.told_the_caller), and ralph.api raises it then."""

    def __init__(self) -> None:
        self.first: tuple[str, Exception] | None = None

    def keep(self, where: str, raised: Exception) -> None:
        self.first = self.first or (where, raised)


@dataclass(frozen=True)
class Caller:
    """What ralph.api's caller gave the run; the command line's runs have none of it."""

    agent: Callable[[], LapAgent] | None = None  # called once a lap: every lap a fresh agent
    is_done: Callable[[Path, RunState], bool] | None = None  # the green candidate's tree, the run before it
    on_lap: Callable[[LapRecord], None] | None = None  # after each lap's record is saved; may raise Stop
    kept: Kept = field(default_factory=Kept)


class FreshEach:
    """config.agent of kind python: the caller's factory called for every lap, so no lap's agent
    remembers another's. It runs in the caller's process, as trusted as the caller's own code
    (the checks that judge its work run sandboxed all the same), in the lap's workspace as its
    working directory, as a command agent is; the caller's is put back after."""

    kind = "python"

    def __init__(self, caller: Caller) -> None:
        assert caller.agent is not None
        self.make, self.caller = caller.agent, caller

    def check_endpoint(self, deadline: float) -> None:
        """Nothing to reach before the first lap: the agent is the caller's code."""

    def run_lap(self, task: LapTask) -> AgentResult:
        """The agent's lap, given its own copy of the lap's environment; what it raises, a result
        no note could keep, or a thread or process it leaves running (which could change the tree
        after the commit) is an error lap, and kept for the caller. The process's working folder,
        environment and umask are put back after."""
        started, before = time.monotonic(), _Process.now()
        os.chdir(task.workspace)
        try:
            result = _as_noted(self.make().run_lap(replace(task, env=dict(task.env))))
            before.nothing_left_running()
            return result
        except Exception as raised:
            self.caller.kept.keep("the agent", raised)
            detail = f"{type(raised).__name__}: {raised}"
            return AgentResult(kind=self.kind, outcome="error", duration_s=time.monotonic() - started, detail=detail)
        finally:
            before.put_back()


@dataclass(frozen=True)
class _Process:
    """What a caller's agent may change of the process it runs in, as it was before its lap."""

    cwd: str
    environ: dict[str, str]
    umask: int
    threads: frozenset[threading.Thread]
    children: frozenset[int]

    @classmethod
    def now(cls) -> _Process:
        umask = os.umask(0o022)
        os.umask(umask)
        threads = frozenset(threading.enumerate())
        return cls(os.getcwd(), dict(os.environ), umask, threads, frozenset(orphans.children()))

    def nothing_left_running(self) -> None:
        """The agent's threads and processes ended with its lap; what is left is killed (processes:
        threads cannot be) and the lap refused."""
        threads = [thread.name for thread in threading.enumerate() if thread not in self.threads and thread.is_alive()]
        children = set(orphans.children()) - self.children
        if children:
            orphans.end_orphans(set(self.children))
        if threads or children:
            left = ", ".join([*(f"thread {name}" for name in threads), *(f"process {pid}" for pid in sorted(children))])
            raise RalphError(f"the agent left running after its lap: {left} — whatever it starts must end with run_lap")

    def put_back(self) -> None:
        os.chdir(self.cwd)
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        os.umask(self.umask)


def _as_noted(result: object) -> AgentResult:
    """The agent's result as its lap's note will keep it (kind python): one that would not read
    back from the note (NaN, say) is refused now, not found unreadable later."""
    if not isinstance(result, AgentResult):
        raise RalphError(f"the agent's run_lap returned {type(result).__name__}, not an AgentResult")
    try:
        return AgentResult.model_validate_json(result.model_copy(update={"kind": FreshEach.kind}).model_dump_json())
    except ValidationError as invalid:
        problem = invalid.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise RalphError(
            f"the agent's run_lap returned an AgentResult no note can keep: {where}: {problem['msg']}"
        ) from None
