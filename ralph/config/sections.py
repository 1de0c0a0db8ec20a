"""The small sections of `ralph.yaml`: limits, files, commit, env, hooks, sandbox, prices, checks."""

from __future__ import annotations

import shlex
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationInfo, field_validator, model_validator

from ralph.facts import junit


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
        if any(ord(c) < 32 or c == "\x7f" for c in path):  # a NUL or a line break cuts or splits it in git
            raise ValueError(f"files.{info.field_name}: {path!r} holds a control character; name a plain file")
        return path


class Commit(Section):
    verify: bool = Field(True, description="Run the repository's git hooks on lap commits.")


class EnvConfig(Section):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    pass_: list[str] = Field(
        default_factory=list,
        alias="pass",
        description="Variables of your environment laps are given (agent, setup, hooks, checks) besides the "
        "built list: PATH, HOME, TMPDIR, USER, LOGNAME, LANG, LANGUAGE, LC_*, TERM, TZ and the toolchains' "
        "(docs/sandbox.md).",
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
        description="More existing paths the agent may write, and what it writes there stays: never one that "
        "anything outside the sandbox runs (docs/sandbox.md); setup, hooks and checks only read them; ~ expanded.",
    )
    readable: list[str] = Field(
        default_factory=list,
        description="More paths laps may read: the sandbox shows the system, the repository and the toolchains "
        "only (a local hook repository, a tool it did not find, a file a check reads); ~ expanded.",
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
        "No other socket of the machine is there.",
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

    jest: str | None = Field(
        None,
        description="The report jest writes with `--json --outputFile=PATH` (a path in the workspace): its tests "
        "are held to the per-test ratchet; none written is a check that could not run.",
    )
    results: Literal["go", "libtest", "unittest"] | None = Field(
        None,
        description="Per-test results read from the check's own output: `go test -json`, cargo's libtest, "
        "`python -m unittest -v`. Unset: inferred from the command (`go test … -json`, `cargo test`, "
        "`-m unittest … -v`) where the runner's output is the check's own.",
    )
    expect_red: bool = Field(
        False,
        description="A check that fails on the base commit and gives no per-test results stops the run before "
        "lap 1 unless this is true: then no lap can regress it, and only done waits for it to pass.",
    )

    @field_validator("junit", "jest")
    @classmethod
    def _a_path_inside(cls, pattern: str | None) -> str | None:
        return None if pattern is None else junit.validate_pattern(pattern)

    @model_validator(mode="after")
    def _one_source_of_results(self) -> CheckSpec:
        given = [key for key in ("junit", "jest", "results") if getattr(self, key)]
        if len(given) > 1:
            raise ValueError(f"a check reads its per-test results from one place: {' and '.join(given)} both given")
        return self

    @property
    def reader(self) -> str | None:
        """Where the check's per-test results come from besides pytest's plugin: a report file
        (junit, jest), its own output (go, libtest, unittest, declared or inferred), or nowhere."""
        if self.junit:
            return "junit"
        if self.jest:
            return "jest"
        return self.results or inferred_results(self.run)


def inferred_results(command: str) -> str | None:
    """The output format a command gives: `go test -json`, `cargo test`, `python -m unittest -v`,
    where the runner's output reaches the check's own (not piped into another program but `tee`,
    not redirected to a file): `cargo test | grep -q ok` prints no libtest lines of its own."""
    for words in _reaching_output(command):
        pairs = set(zip(words, words[1:], strict=False))
        if ("go", "test") in pairs and "-json" in words:
            return "go"
        if ("cargo", "test") in pairs and not {"-q", "--quiet"} & set(words):  # quiet: dots, no names
            return "libtest"
        if ("-m", "unittest") in pairs and ("-v" in words or "--verbose" in words):
            return "unittest"
    return None


def _reaching_output(command: str) -> list[list[str]]:
    """The words of each simple command of a shell line whose output is the line's own."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: the shell would refuse it too
        return []
    simple: list[list[str]] = [[]]
    piped: list[bool] = [False]
    for token in tokens:
        if token and set(token) <= set("|&;()"):
            piped[-1] = token in ("|", "|&")
            simple.append([])
            piped.append(False)
        else:
            simple[-1].append(token)
    reaching = []
    for at, words in enumerate(simple):
        into_tee = at + 1 < len(simple) and simple[at + 1][:1] == ["tee"]
        redirected = any(_to_a_file(words, index) for index in range(len(words)))
        if words and (not piped[at] or into_tee) and not redirected:
            reaching.append(words)
    return reaching


def _to_a_file(words: list[str], index: int) -> bool:
    """Does the redirection at `index` send standard output to a file (`> f`, `>> f`, `&> f`,
    `>& f`, `1> f`), not stderr alone (`2> f`) or one stream to the other (`2>&1`, `1>&2`)?"""
    word, before = words[index], words[index - 1] if index else ""
    after = words[index + 1] if index + 1 < len(words) else ""
    if word in (">", ">>", ">|"):
        return before != "2"
    if word in ("&>", "&>>"):
        return True
    return word == ">&" and not after.isdigit()
