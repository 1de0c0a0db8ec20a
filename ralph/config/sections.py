"""The small sections of `ralph.yaml`: limits, files, commit, env, hooks, sandbox, prices, checks."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationInfo, field_validator

from ralph.verdict import junit


class Section(BaseModel):
    """A part of `ralph.yaml`: a key it does not know is a mistake to name, not to ignore."""

    model_config = ConfigDict(extra="forbid")


class Limits(Section):
    max_laps: PositiveInt = Field(10, description="The fuse: laps in the whole run.")
    stagnation: PositiveInt = Field(3, description="Stop after this many laps in a row without progress.")
    lap_timeout: float = Field(1800, gt=0, description="Seconds for the agent part of one lap.")
    check_timeout: float = Field(900, gt=0, description="Seconds for each check.")
    idle_timeout: float | None = Field(
        None, gt=0, description="Stop an agent or check that prints nothing and changes no file for this long."
    )
    max_minutes: float | None = Field(None, gt=0, description="Wall clock for one `ralph run`.")
    max_tokens: PositiveInt | None = Field(None, description="Tokens for the whole run (agents that report them).")
    max_cost_usd: float | None = Field(
        None, gt=0, description="USD for the whole run; needs every lap's cost known (docs/agents.md: Presets)."
    )
    setup_timeout: float = Field(1800, gt=0, description="Seconds for each `setup` command.")
    requests_per_minute: PositiveInt | None = Field(
        None, description="Model requests of every role together (agent, planner, judge) in any minute."
    )
    limit_wait: float = Field(
        6 * 3600,
        ge=0,
        allow_inf_nan=False,
        description="Seconds the run waits in all for agent usage limits to reset before it stops with exit 6.",
    )
    worker_timeout: float = Field(
        300,
        gt=0,
        allow_inf_nan=False,
        description="`--remote`: seconds a worker's heartbeat may stay still before the others take it "
        "for dead and take its items.",
    )
    outage_wait: float = Field(
        180,
        ge=0,
        description="Seconds the run waits out a model endpoint that keeps "
        "failing, between error laps, before it stops with exit 6.",
    )


class Files(Section):
    todo: str = Field("TODO.md", description="The job as a markdown checklist the agent ticks.")
    progress: str = Field("PROGRESS.md", description="The handoff note from one lap to the next.")

    @field_validator("todo", "progress")
    @classmethod
    def _inside_the_tree(cls, path: str, info: ValidationInfo) -> str:
        parts = PurePosixPath(path).parts
        if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
            raise ValueError(f"files.{info.field_name}: '{path}' must be a path inside the repository, from its top")
        return path


class Commit(Section):
    verify: bool = Field(True, description="Run the repository's git hooks on lap commits.")


class EnvConfig(Section):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    pass_: list[str] = Field(
        default_factory=list,
        alias="pass",
        description="Variables let through to agents and checks although named like secrets.",
    )


class LifecycleHooks(Section):
    """Shell commands ralph runs in your repository as the run goes: notifications, mostly."""

    on_lap_end: str | None = Field(None, description="After every lap: RALPH_LAP, RALPH_STATUS, RALPH_REASON.")
    on_done: str | None = Field(None, description="When the run ends done.")
    on_stop: str | None = Field(None, description="When the run stops, whatever the reason: RALPH_EXIT too.")
    timeout: float = Field(60, gt=0, description="Seconds for each hook.")


class SandboxConfig(Section):
    mode: Literal["auto", "required", "off"] = Field(
        "auto",
        description="auto: bubblewrap when it works here, else a warning and no sandbox; "
        "required: refuse to run without it; off: never.",
    )
    writable: list[str] = Field(
        default_factory=list,
        description="More existing paths laps may write, in every phase (agent, setup, hooks, checks), and what "
        "they write there stays: never one that anything outside the sandbox runs (docs/sandbox.md); ~ expanded.",
    )
    readable: list[str] = Field(
        default_factory=list,
        description="Paths under /tmp, /var/tmp or /run that laps may read (the sandbox empties those "
        "folders): a local hook repository, a tool installed there; ~ expanded.",
    )
    home: str | None = Field(
        None,
        description="HOME inside the sandbox (default: a fresh private folder); "
        "read-only unless it or paths in it are listed in `writable`.",
    )
    network: bool = Field(True, description="false: checks and setup run without network (agents keep it).")
    sockets: list[str] = Field(
        default_factory=list,
        description="Unix sockets laps may connect to (a socket, or a folder whose sockets all are); ~ expanded. "
        "Every other socket under HOME and the runtime dir, and every one the environment or ssh's config "
        "names, is out of their reach.",
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        """YAML reads an unquoted `off` as false (and `on` as true)."""
        return {False: "off", True: "auto"}.get(value, value) if isinstance(value, bool) else value

    def writable_paths(self) -> list[Path]:
        return [Path(path).expanduser().resolve() for path in self.writable]

    def readable_paths(self) -> list[Path]:
        return [Path(path).expanduser().resolve() for path in self.readable]

    def home_path(self) -> Path | None:
        return Path(self.home).expanduser().resolve() if self.home else None

    def socket_paths(self) -> list[Path]:
        return [Path(path).expanduser().resolve() for path in self.sockets]


class Price(Section):
    input: float = Field(ge=0, description="USD per million prompt tokens.")
    output: float = Field(ge=0, description="USD per million completion tokens.")


class CheckSpec(Section):
    run: str = Field(min_length=1, description="The shell command.")
    retries: int = Field(0, ge=0, le=10, description="Runs again after a failure; fail-then-pass is 'flaky'.")
    junit: str | None = Field(
        None,
        description="The JUnit XML report the check writes (a path or glob in the workspace): its tests are held "
        "to the per-test ratchet; none written is a check that could not run.",
    )

    @field_validator("junit")
    @classmethod
    def _a_path_inside(cls, pattern: str | None) -> str | None:
        return None if pattern is None else junit.validate_pattern(pattern)
