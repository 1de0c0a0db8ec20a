"""`ralph.yaml`: one pydantic model per section, and errors that name the file, key and line."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ralph.agents.presets import COSTED, COSTED_PRESETS, PRESETS
from ralph.errors import RalphError
from ralph.verdict import check_files, junit

CONFIG_FILE = "ralph.yaml"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompatConfig(Section):
    """Where OpenAI-compatible servers truly differ (the README's table of servers says which)."""

    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens",
        description="The name the output limit is sent under: OpenAI's reasoning models accept "
        "only max_completion_tokens; llama.cpp, vLLM and Ollama read max_tokens.",
    )


class AgentConfig(Section):
    kind: Literal["command", "openai"] = Field("command", description="Which agent runs a lap.")
    preset: str | None = Field(None, description="kind: command — an agent CLI ralph knows (README: Presets).")
    command: str | None = Field(
        None,
        description="kind: command — run through the shell in the lap's work tree; beside a preset, instead of its.",
    )
    args: str | None = Field(None, description="kind: command — appended to the command (a preset's, say a --model).")
    limit_patterns: list[str] = Field(
        default_factory=list,
        description="kind: command — regular expressions on the agent's output that mean a usage or rate limit "
        "(presets know their tool's).",
    )
    model: str | None = Field(None, description="kind: openai — the model name the endpoint serves.")
    base_url: str | None = Field(None, description="kind: openai — default $OPENAI_BASE_URL, else OpenAI.")
    api_key_env: str = Field("OPENAI_API_KEY", description="The NAME of the variable holding the API key.")
    temperature: float | None = Field(
        0.2, ge=0, le=2, description="null: not sent (models that take only their default)."
    )
    max_output_tokens: PositiveInt = Field(
        4096, description="Tokens the model may write in one reply (sent with every request, so a runaway reply ends)."
    )
    compat: CompatConfig = Field(default_factory=CompatConfig)
    max_turns: PositiveInt = Field(60, description="Model calls per lap.")
    request_timeout: float = Field(120, gt=0, description="Seconds per request.")
    fix_attempts: int = Field(1, ge=0, description="Times red checks are shown to the agent within a lap.")
    fallback: list[AgentConfig] = Field(
        default_factory=list,
        description="Agents for the laps after this one is limited, or failed fallback_after laps in a row, in order.",
    )
    fallback_after: PositiveInt = Field(2, description="Laps in a row the agent itself failed before the next one.")

    @model_validator(mode="after")
    def _needs_its_fields(self) -> AgentConfig:
        if self.kind == "openai" and (self.preset or self.args or self.limit_patterns):
            raise ValueError("agent.preset, args and limit_patterns are for kind: command (an agent CLI)")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"agent.preset: no preset {self.preset!r} — ralph knows {', '.join(PRESETS)}")
        if self.kind == "command" and not (self.command or "").strip() and self.preset is None:
            raise ValueError("agent.command (or agent.preset) is required when agent.kind is 'command'")
        if any(agent.fallback for agent in self.fallback):
            raise ValueError("agent.fallback: a fallback agent has no fallback of its own; list them all in one")
        for pattern in self.limit_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"agent.limit_patterns: {pattern!r} is no regular expression ({exc})") from None
        if self.kind == "openai" and not self.model:
            raise ValueError("agent.model is required when agent.kind is 'openai'")
        return self

    @property
    def name(self) -> str:
        """What laps' notes and commit trailers call it: its preset, else its kind."""
        return self.preset or self.kind

    @property
    def shell_command(self) -> str:
        """kind: command — what runs: the command (or the preset's), then `args`."""
        command = self.command or (PRESETS[self.preset].command if self.preset else "")
        return f"{command} {self.args}" if self.args else command

    @property
    def limits(self) -> list[str]:
        """The output patterns that mean the agent hit a usage or rate limit."""
        return [*(PRESETS[self.preset].limits if self.preset else ()), *self.limit_patterns]


class RoleConfig(Section):
    """A role's own model endpoint; unset keys are the agent's when the agent is `openai`."""

    model: str | None = Field(None, description="The model the role asks.")
    base_url: str | None = Field(None, description="Default: the agent's, else $OPENAI_BASE_URL, else OpenAI.")
    api_key_env: str | None = Field(None, description="The NAME of the variable holding the role's API key.")
    max_turns: PositiveInt = Field(30, description="Model calls the role may make.")


class JudgeConfig(RoleConfig):
    weight: float = Field(0.7, ge=0, le=1, description="The judge's share of a lap's score; ralph's signals the rest.")
    threshold: float = Field(0.8, ge=0, le=1, description="The score a lap must reach to be green.")
    require_independent: bool = Field(False, description="Refuse a judge on the agent's own model or provider.")


class Roles(Section):
    planner: RoleConfig = Field(default_factory=RoleConfig, description="`ralph plan`: goal to TODO.md.")
    judge: JudgeConfig | None = Field(None, description="Scores laps the checks passed; can hold one back.")


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
        None, gt=0, description="USD for the whole run; needs every lap's cost known (README: Cost)."
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
    todo: str = "TODO.md"
    progress: str = "PROGRESS.md"

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
        "they write there stays: never one that anything outside the sandbox runs (README: The sandbox); ~ expanded.",
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


McpRole = Literal["agent", "planner", "judge"]
MCP_DEFAULT_ROLES: list[McpRole] = ["agent", "planner"]
# A server's name is part of the names the model calls its tools by (mcp__<server>__<tool>),
# which the chat completions API allows only these characters in, 64 in all; no `__` in it, so
# that the name says where the server's ends.
MCP_SERVER_NAME = re.compile(r"^(?!.*__)[A-Za-z0-9_-]{1,24}$")


class McpServer(Section):
    """One MCP server, in the shape of a .mcp.json's `mcpServers` entry. `${VAR}` and
    `${VAR:-default}` in command, args, env, url and headers are read from ralph's environment."""

    type: Literal["stdio", "http", "streamable-http"] | None = Field(
        None, description="How to reach it; default: stdio with `command`, HTTP with `url`."
    )
    command: str | None = Field(None, description="stdio: the program, started by ralph outside the lap sandbox.")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict, description="stdio: variables it gets on top of the scrubbed environment."
    )
    url: str | None = Field(None, description="Streamable HTTP: the server's endpoint.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP: headers sent with every request.")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs either `command` (stdio) or `url` (streamable HTTP), not both")
        if self.type == "stdio" and self.command is None:
            raise ValueError("an MCP server of type stdio needs `command`")
        if self.type in ("http", "streamable-http") and self.url is None:
            raise ValueError(f"an MCP server of type {self.type} needs `url`")
        return self


class McpConfig(Section):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    servers: dict[str, McpServer] = Field(
        default_factory=dict, description="By name, as a .mcp.json's mcpServers: {command, args, env} or {url}."
    )
    from_: str | None = Field(
        None, alias="from", description="A .mcp.json in the repository whose servers are loaded too."
    )
    roles: list[McpRole] = Field(
        default_factory=lambda: list(MCP_DEFAULT_ROLES),
        description="Who is offered the tools: agent (the built-in one), planner, judge.",
    )
    allow_writes: list[str] = Field(
        default_factory=list,
        description="Tools offered although they write: tool names, or server.tool globs.",
    )
    start_timeout: float = Field(30, gt=0, description="Seconds for a server to start and list its tools.")
    call_timeout: float = Field(120, gt=0, description="Seconds for one tool call.")

    @field_validator("servers")
    @classmethod
    def _names_fit(cls, servers: dict[str, McpServer]) -> dict[str, McpServer]:
        for name in servers:
            if not MCP_SERVER_NAME.match(name):
                raise ValueError(
                    f"mcp.servers: {name!r} is no server name ralph can use — up to 24 letters, digits, _ and - (no __)"
                )
        return servers

    @field_validator("from_")
    @classmethod
    def _inside_the_tree(cls, path: str | None) -> str | None:
        """A plain path, protected as written (so `./x` is kept as `x`), not a pattern."""
        if path is None:
            return None
        parts = PurePosixPath(path).parts
        if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
            raise ValueError(f"mcp.from: '{path}' must be a path inside the repository, from its top")
        if re.search(r"[*?\[\]#!\\]|^\s|\s$", path):
            raise ValueError(f"mcp.from: '{path}' must be a plain path: no *, ?, [, ], #, !, \\ or spaces at its ends")
        return PurePosixPath(path).as_posix()

    def offered_to(self, role: str) -> bool:
        """Whether `role` gets the tools: it is listed, and there are servers to get them from."""
        return role in self.roles and bool(self.servers or self.from_)


# What a lap may add to but not modify or delete: the tests, their configuration, CI and
# ralph's own config. `file#table` protects one table (pyproject) or section (setup.cfg).
DEFAULT_PROTECT = [
    "tests/**",
    "test/**",
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "noxfile.py",
    "pyproject.toml#tool.pytest",
    "setup.cfg#tool:pytest",
    "ralph.yaml",
    ".github/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    ".ci/**",
    ".pre-commit-config.yaml",
    ".githooks/**",
    ".husky/**",
    ".gitattributes",
    ".gitmodules",
    ".mcp.json",
]


# What setup installs from: a lap that changes one of these gets setup again before its checks.
DEFAULT_SETUP_INPUTS = [
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements*.txt",
    "uv.lock",
    "poetry.lock",
    "Pipfile.lock",
    "package.json",
    "package-lock.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "Cargo.lock",
    "go.sum",
    "Gemfile.lock",
]


class Config(Section):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    goal: str = Field(min_length=1, description="What the whole run is for, in a sentence.")
    agent: AgentConfig
    checks: list[CheckSpec] = Field(
        default_factory=list, description="Shell commands (or {run, retries}); done = every one exits 0."
    )
    limits: Limits = Field(default_factory=Limits)
    files: Files = Field(default_factory=Files)
    commit: Commit = Field(default_factory=Commit)
    protect: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PROTECT),
        description="Globs a lap may add to but not modify or delete; [] turns it off.",
    )
    strict: bool = Field(
        False, description="Delete the ignored files setup did not make from the lap's tree before the checks."
    )
    env: EnvConfig = Field(default_factory=EnvConfig)
    setup: list[str] = Field(
        default_factory=list,
        description="Shell commands run in the lap workspace before the baseline, and again before "
        "the checks of a lap that changed a setup input (a venv, `npm ci`).",
    )
    setup_inputs: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SETUP_INPUTS),
        description="Files (globs; without a slash, at any depth) whose change makes setup run again.",
    )
    copy_: list[str] = Field(
        default_factory=list,
        alias="copy",
        description="Untracked files of your work tree (a .env) copied into the workspace before setup; "
        "never committed by a lap.",
    )
    sandbox: SandboxConfig = Field(
        default_factory=SandboxConfig, description="`auto | required | off`, or a mapping with `mode:` and more."
    )
    hooks: LifecycleHooks = Field(default_factory=LifecycleHooks, description="Commands run as the run goes.")
    roles: Roles = Field(default_factory=Roles, description="Models of their own for the planner and the judge.")
    prices: dict[str, Price] = Field(
        default_factory=dict, description="USD per million tokens by model name, for the built-in agent and the roles."
    )
    mcp: McpConfig = Field(
        default_factory=McpConfig, description="MCP servers whose read-only tools the built-in agent and roles get."
    )

    @field_validator("sandbox", mode="before")
    @classmethod
    def _mode_alone(cls, value: object) -> object:
        return {"mode": value} if isinstance(value, (str, bool)) else value

    @field_validator("setup", mode="before")
    @classmethod
    def _one_command(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("copy_")
    @classmethod
    def _inside_the_tree(cls, paths: list[str]) -> list[str]:
        for path in paths:
            parts = PurePosixPath(path).parts
            if not parts or PurePosixPath(path).is_absolute() or ".." in parts or parts[0] == ".git":
                raise ValueError(f"copy: '{path}' must be a path inside the repository, relative to its top")
        return [str(PurePosixPath(path)) for path in paths]

    @field_validator("checks", mode="before")
    @classmethod
    def _plain_commands(cls, value: object) -> object:
        if isinstance(value, list):
            return [{"run": item} if isinstance(item, str) else item for item in value]
        return value

    def role_endpoint(self, role: RoleConfig) -> AgentConfig | None:
        """The endpoint a role asks, as an agent configuration: the role's own keys over the
        agent's when the agent is `openai`; None when the role has no model at all."""
        base = self.agent if self.agent.kind == "openai" else None
        model = role.model or (base.model if base else None)
        if model is None:
            return None
        # The agent's key goes only where the agent's requests go: a role on another host names its own.
        same_host = base is not None and role.base_url in (None, base.base_url)
        if base is not None and not same_host and role.api_key_env is None:
            raise RalphError(
                "a role on a base_url of its own needs api_key_env too (the name of the variable "
                "holding its key; any unset name for a server that needs none)"
            )
        inherited = base.model_dump() if same_host and base else {"kind": "openai"}
        return AgentConfig.model_validate(
            dict(
                inherited,
                kind="openai",
                command=None,
                model=model,
                base_url=role.base_url or (base.base_url if base else None),
                api_key_env=role.api_key_env or (base.api_key_env if base else "OPENAI_API_KEY"),
                max_turns=role.max_turns,
            )
        )

    @property
    def agents(self) -> list[AgentConfig]:
        """The agent, then its fallbacks: a lap's `fallback` is its index here."""
        return [self.agent, *self.agent.fallback]

    @property
    def key_variables(self) -> tuple[str, ...]:
        """The variables holding every model's key (the agents', the roles'): no agent CLI but
        the one that uses it, no check and no MCP server gets them, unless env.pass says so."""
        return (*(agent.api_key_env for agent in self.agents), *self.role_key_variables)

    @property
    def role_key_variables(self) -> tuple[str, ...]:
        """The variables holding the roles' keys: kept from agents and checks like the agent's."""
        roles = [self.roles.planner, self.roles.judge]
        return tuple(role.api_key_env for role in roles if role is not None and role.api_key_env)

    def cost_of(self, model: str | None, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What `prices` says the tokens of `model` cost; None when it names no price for it."""
        price = self.prices.get(model or "")
        if price is None:
            return None
        return round((prompt_tokens * price.input + completion_tokens * price.output) / 1e6, 6)

    def unknown_cost(self) -> str | None:
        """Why a lap's cost could not be known, when it could not (max_cost_usd needs it)."""
        for agent in self.agents:
            if agent.kind == "command":
                if agent.preset is None or PRESETS[agent.preset].reports not in COSTED:
                    named = f"the preset {agent.preset}" if agent.preset else "a command agent without a preset"
                    return f"{named} reports no cost (presets that do: {', '.join(sorted(COSTED_PRESETS))})"
            elif agent.model not in self.prices:
                return f"prices names no price for the agent's model {agent.model!r}"
        judge = self.roles.judge
        endpoint = self.role_endpoint(judge) if judge else None
        if endpoint is not None and endpoint.model not in self.prices:
            return f"prices names no price for the judge's model {endpoint.model!r}"
        return None

    @property
    def protected(self) -> list[str]:
        """What a lap may not change: `protect`; the files that define how the checks run (their
        Makefile, scripts, `package.json` scripts: ralph/verdict/check_files.py); and the file MCP servers
        are loaded from (a lap that could add one would choose the programs the next run starts
        outside the sandbox). The last two whatever `protect` says."""
        return [
            *self.protect,
            *check_files.patterns(self.check_commands),
            *([self.mcp.from_] if self.mcp.from_ else []),
        ]

    @property
    def check_commands(self) -> list[str]:
        return [check.run for check in self.checks]


def load(path: Path) -> Config:
    """Read and validate a config file; every problem becomes one RalphError line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RalphError(f"{path}: not found — write one with `ralph init` or pass --config") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RalphError(f"{path}: cannot read it ({exc})") from None
    return parse(text, str(path))


def parse(text: str, name: str) -> Config:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise RalphError(f"{name}{where}: not valid YAML: {problem}") from None
    if data is None:
        raise RalphError(f"{name}: the file is empty — it needs at least `goal:`, `agent:` and `checks:`")
    if not isinstance(data, dict):
        raise RalphError(f"{name}: expected a mapping of keys (goal:, agent:, checks: …), found {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise RalphError(_describe(exc, text, name)) from None


def _describe(exc: ValidationError, text: str, name: str) -> str:
    """The first validation error as `file (line N): key: what was expected`."""
    error = exc.errors()[0]
    loc = [part for part in error["loc"] if not str(part).startswith("function-after")]
    key = ".".join(str(part) for part in loc) or "(top level)"
    line = _line_of(text, loc)
    where = f" (line {line})" if line else ""
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        section = _section(loc[:-1])
        message = "unknown key" + (f"; expected one of: {', '.join(section.model_fields)}" if section else "")
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "value_error":
        message = message.removeprefix("Value error, ")
        return f"{name}{where}: {message}"
    more = len(exc.errors()) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{name}{where}: {key}: {message}{tail}"


def _section(loc: list) -> type[BaseModel] | None:
    model: type[BaseModel] = Config
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _line_of(text: str, loc: list) -> int | None:
    """The 1-based line of a key path in the YAML source, as close as it can be found."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
