"""What the laps of one run share: RunContext."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from ralph import git
from ralph.agents.base import Agent
from ralph.agents.judge import Judge
from ralph.agents.mcp_tools import McpTools
from ralph.config import Config
from ralph.git.credentials import credential_files
from ralph.git.remote import Remote
from ralph.git.store import RefStore
from ralph.isolation.jail import Jail
from ralph.isolation.sandbox import needed
from ralph.lap.caller import Caller
from ralph.lap.modes import Mode, Plain
from ralph.show import events, ui
from ralph.verdict.checks import CheckResult, run_checks
from ralph.workspace.workspace import Workspace


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What every lap of one run shares."""

    repo: git.RepoInfo
    run_name: str
    config: Config
    run_dir: Path  # <git-common-dir>/ralph/<run>: logs, transcripts, the lock
    agents: tuple[Agent, ...]  # config.agents, made: the agent, then its fallbacks
    env: dict[str, str]  # for the agent and the checks: secrets removed
    workspace: Workspace  # where the laps work, outside the repository
    sandboxed: bool  # the lap's code runs inside bubblewrap
    judge: Judge | None = None  # roles.judge: scores laps the checks passed
    mcp: McpTools | None = None  # the MCP servers' tools, started for the run
    mode: Mode = Plain()  # what this process is to the run (modes.mode_of)
    remote: Remote | None = None  # `--remote`: the git remote that keeps the run's refs and notes
    whole_job: bool = False  # `ralph bench --mode session`: the one lap is given the whole job
    hidden: tuple[Path, ...] = ()  # `ralph bench`: folders that read as empty in the sandbox
    warned: set[str] = field(default_factory=set)  # checks already said to run the user's own code
    caller: Caller = Caller()  # ralph.api: what a Python caller adds (the command line: nothing)

    @property
    def top(self) -> Path:
        return self.repo.top

    @property
    def worker(self) -> str | None:
        """`--remote`: this worker's name among the run's (workers.Crew); its laps' notes say it."""
        return self.mode.worker

    def jail(self, phase: str, *, network: bool = True, writable: tuple[Path, ...] = ()) -> Jail | None:
        """The sandbox for one phase of a lap; None when laps are not sandboxed. What
        `sandbox.writable` lists is writable to the agent phase only; setup, the hooks and the
        checks read it: a test the checks run plants nothing there (a hook in ~/.claude)."""
        if not self.sandboxed:
            self.workspace.unchecked = True  # (Workspace.jail says so itself)
            return None
        sandbox = self.config.sandbox
        listed = tuple(sandbox.writable_paths())
        return self.workspace.jail(
            phase,
            network=network,
            writable=(*listed, *writable) if phase == "agent" else writable,
            home=sandbox.home_path(),
            keep=self.keep if phase == "agent" else (*self.keep, *listed),
            hide=(*self.credentials, *self.hidden),
            sockets=tuple(sandbox.socket_paths()),
        )

    @cached_property
    def store(self) -> RefStore:
        """Where the run's refs and notes are written: here, or first the run's remote."""
        return RefStore(self.top, self.remote)

    @cached_property
    def credentials(self) -> tuple[Path, ...]:
        """The git credentials a lap must not read: with them, code of the lap's could push to the
        run's remote (a `--remote` run's green line) or to any of the user's."""
        return credential_files(self.top)

    @cached_property
    def keep(self) -> tuple[Path, ...]:
        agents = [agent.shell_command for agent in self.config.agents if agent.kind == "command"]
        commands = [*agents, *self.config.check_commands]
        sandbox = self.config.sandbox
        home, readable = sandbox.home_path(), sandbox.readable_paths()
        return needed(
            self.top, self.repo.common_dir, self.workspace.root, *readable, *([home] if home else []), commands=commands
        )

    def check(self, log_dir: Path, stop: Callable[[], bool] | None = None) -> list[CheckResult]:
        """The checks on the workspace's files as they are now (`stop`: see run_checks)."""
        events.emit("phase_changed", phase="checks")
        results = run_checks(
            self.config.checks,
            self.workspace.tree,
            timeout=self.config.limits.check_timeout,
            env=self.env,
            log_dir=log_dir,
            jail=self.jail("checks", network=self.config.sandbox.network),
            user_tree=self.top,
            idle_timeout=self.config.limits.idle_timeout,
            stop=stop,
        )
        for result in results:
            setup = result.tests.setup if result.tests else None
            self.warn_user_code(result.command, result.output_tail, setup.user_tree if setup else [])
        return results

    def warn_user_code(self, what: str, output: str, modules: Sequence[str] = ()) -> None:
        """Once per run and command: `what` ran code from the user's own work tree, not the lap's."""
        if what in self.warned:
            return
        found = list(modules) or _paths_inside(output, self.top)
        if found:
            self.warned.add(what)
            ui.warn(
                f"`{what}` ran code from your own work tree, not the lap's: {found[0]} — an editable "
                "install (pip install -e) or an absolute path in a config makes it test your checkout; "
                "build the environment inside the lap workspace with `setup:` (docs/environments.md)"
            )


def _paths_inside(output: str, top: Path) -> list[str]:
    """Paths under `top` that an output names."""
    return re.findall(re.escape(str(top)) + r"/[^\s'\":,)]+", output)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
