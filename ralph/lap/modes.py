"""The run's mode: what this process is to the run, as one value, decided once where `ralph run`
starts, from its options and its environment (options.mode_of). Each mode has one entry point
(loop._take_part):

- Plain       the laps one at a time (loop._laps)
- Parallel    `--parallel N`: starts N slots and relays their lines (parallel.coordinate)
- Slot        `--slot K`, started by a coordinator: laps on the items it claims (parallel.work)
- Rounds      `--best-of N`: rounds of N candidates, the line advanced to the best (best_of.coordinate)
- Candidate   a slot a `--best-of` coordinator started for one lap of a round (best_of.candidate)
- Worker      `--remote`: this clone's laps, one worker of a run a git remote keeps (parallel.as_worker)

What differs between them elsewhere is asked of the mode (its properties), not of the options.
The modes need nothing of ralph's but its errors: the lap's RunContext carries one.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

from ralph.errors import RalphError

# How a coordinator tells the slots it starts what they are (only ralph sets these).
PARENT_VAR = "RALPH_PARALLEL_PARENT"  # the ralph a slot ends with: its coordinator
ROUND_VAR = "RALPH_BEST_OF_ROUND"  # a `--best-of` candidate's round and lap

SIDE_BY_SIDE_NEEDS_SANDBOX = (
    "--parallel needs laps in the sandbox (bubblewrap): unsandboxed, each slot's lap could "
    "change the repository's refs under the others — install bubblewrap, or run without it"
)
BEST_OF_NEEDS_SANDBOX = (
    "--best-of needs laps in the sandbox (bubblewrap): unsandboxed, each candidate's lap could "
    "change the repository's refs under the others — install bubblewrap, or run without it"
)
REMOTE_NEEDS_SANDBOX = (
    "--remote needs laps in the sandbox (bubblewrap): unsandboxed, a lap's code could read this "
    "clone's credentials and push to the run's refs on the remote — install bubblewrap"
)


class _Mode:
    """What a mode says of itself; each mode below says where it differs."""

    coordinates: ClassVar[bool] = False  # its slots run the laps: this process relays their lines
    holds_the_run: ClassVar[bool] = True  # it locks the run, starts or resumes it, cleans up after
    # an earlier ralph of it and says how it ended; a slot does none of that (its coordinator does)
    on_remote: ClassVar[bool] = False  # the run is kept on a git remote, worked on by many clones
    needs_sandbox: ClassVar[str | None] = None  # why its laps must be sandboxed: the refusal without
    # Started by its coordinator as the run starts: what the coordinator refused and asked a moment
    # before (the user, the worktrees; the endpoints, the agent's program in the sandbox), it does
    # not again.
    checked_at_start: ClassVar[bool] = False

    @property
    def slot_number(self) -> int | None:
        """The slot this process is of a run of laps side by side (its events say it)."""
        return None

    @property
    def worker(self) -> str | None:
        """This worker's name among the workers of a remote's run (workers.Crew)."""
        return None

    def lock_dir(self, run_dir: Path) -> Path:
        """Where this process's lock of the run is."""
        return run_dir

    def workspace_name(self, run: str) -> str:
        """What this process's workspace is named by."""
        return run


@dataclass(frozen=True)
class Plain(_Mode):
    """The laps one at a time."""


@dataclass(frozen=True, kw_only=True)
class Parallel(_Mode):
    """`--parallel N`: N slots, each a `ralph run --slot K` of its own, laps side by side."""

    coordinates: ClassVar[bool] = True
    needs_sandbox: ClassVar[str | None] = SIDE_BY_SIDE_NEEDS_SANDBOX

    slots: int
    items_per_lap: int


@dataclass(frozen=True, kw_only=True)
class Slot(_Mode):
    """`--slot K`: slot `number` of a parallel run, started by its coordinator (`parent_pid`, the
    ralph it ends with); its laps claim `items_per_lap` items each."""

    holds_the_run: ClassVar[bool] = False  # the ralph that started it holds the run's lock
    needs_sandbox: ClassVar[str | None] = SIDE_BY_SIDE_NEEDS_SANDBOX
    checked_at_start: ClassVar[bool] = True

    number: int
    items_per_lap: int
    parent_pid: int

    @property
    def slot_number(self) -> int | None:
        return self.number

    def lock_dir(self, run_dir: Path) -> Path:
        return run_dir / f"slot-{self.number}"

    def workspace_name(self, run: str) -> str:
        return slot_name(run, self.number)


@dataclass(frozen=True)
class Round:
    """N candidate laps, numbered from `first_lap`, on `item`, each from the green commit `green`."""

    green: str
    item: str
    first_lap: int
    of: int

    @property
    def laps(self) -> range:
        return range(self.first_lap, self.first_lap + self.of)

    def env(self, lap: int) -> dict[str, str]:
        """What tells a slot to be candidate `lap` of this round."""
        return {ROUND_VAR: json.dumps({**asdict(self), "lap": lap})}

    @classmethod
    def given(cls, environ: Mapping[str, str]) -> tuple[Round, int] | None:
        """The round and the lap `env` gave a candidate slot; None for a slot that is no candidate."""
        if ROUND_VAR not in environ:
            return None
        try:
            read = json.loads(environ[ROUND_VAR])
            lap = int(read.pop("lap"))
            return cls(str(read["green"]), str(read["item"]), int(read["first_lap"]), int(read["of"])), lap
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RalphError(f"{ROUND_VAR} does not read: it is for the slots `ralph run --best-of` starts") from None


@dataclass(frozen=True, kw_only=True)
class Candidate(Slot):
    """A slot a `--best-of` coordinator started as candidate `lap` of `round`: its one lap."""

    checked_at_start: ClassVar[bool] = False  # (a round's candidates start later, each round)

    round: Round
    lap: int


@dataclass(frozen=True, kw_only=True)
class Rounds(_Mode):
    """`--best-of N`: rounds of `of` candidate laps on one item, side by side; the line advances to the best."""

    coordinates: ClassVar[bool] = True
    needs_sandbox: ClassVar[str | None] = BEST_OF_NEEDS_SANDBOX

    of: int


def _new_name() -> str:
    """A worker's name, new each time: its host and pid, and a tag (pids repeat, hosts too)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(frozen=True, kw_only=True)
class Worker(_Mode):
    """`--remote`: one worker, named `name` (new each time), of a run the git remote `remote`
    keeps; its laps claim `items_per_lap` items each."""

    on_remote: ClassVar[bool] = True
    needs_sandbox: ClassVar[str | None] = REMOTE_NEEDS_SANDBOX

    remote: str
    items_per_lap: int
    name: str = field(default_factory=_new_name, compare=False)

    @property
    def worker(self) -> str | None:
        return self.name


Mode = Plain | Parallel | Slot | Candidate | Rounds | Worker


def slot_name(run: str, slot: int) -> str:
    """What a slot's workspace is named by."""
    return f"{run}.slot-{slot}"
