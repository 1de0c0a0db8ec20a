"""`ralph.yaml`: the whole file's model and its loader; one pydantic model per section in the
modules beside this one (sections, agent, mcp), every field documented once, in its description.
A problem in the file becomes one line naming the file, the key and the line (problems.py)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import yaml
from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from ralph.config import problems
from ralph.config.agent import AgentConfig, RoleConfig, Roles
from ralph.config.mcp import McpConfig
from ralph.config.sections import (
    CheckSpec,
    Commit,
    EnvConfig,
    Files,
    LifecycleHooks,
    Limits,
    Price,
    SandboxConfig,
    Section,
)
from ralph.errors import RalphError
from ralph.facts import check_files, paths
from ralph.facts.presets import COSTED, COSTED_PRESETS, PRESETS

CONFIG_FILE = "ralph.yaml"
CONFIG_MAX_CHARS = 1 << 20  # a ralph.yaml is a page or two; one past this is not one

# What a lap may add to but not modify or delete: the test files of every runner ralph reads.
# Test configuration, CI and ralph's own config are never in a lap's scope (ralph/verdict/scope.py).
# `*.rs#tests` protects the test functions of Rust files, not the rest of them.
DEFAULT_PROTECT = [
    "**/tests/**",
    "**/test/**",
    "**/spec/**",
    "**/__tests__/**",
    "**/__snapshots__/**",
    "**/testdata/**",
    "test_*.py",
    "*_test.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*.rs#tests",
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
    agent: AgentConfig = Field(description="The agent that writes each lap: an agent CLI or the built-in one.")
    checks: list[CheckSpec] = Field(
        default_factory=list, description="Shell commands (or {run, retries}); done = every one exits 0."
    )
    limits: Limits = Field(default_factory=Limits, description="The fuses and timeouts.")
    files: Files = Field(default_factory=Files, description="Where the checklist and the handoff note are.")
    commit: Commit = Field(default_factory=Commit, description="How lap commits are made.")
    protect: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PROTECT),
        description="Globs a lap may add to but not modify or delete; [] turns it off.",
    )
    scope: list[str] | None = Field(
        None,
        description="Globs from the repository's root of the paths laps may add, change or delete "
        "(TODO.md and PROGRESS.md always); absent: every path but those never in scope (docs/trust.md).",
    )
    strict: bool = Field(
        True,
        description="Before the checks, delete every untracked file setup did not make (and set up again where "
        "one it made changed); false trusts what the agent phase left in ignored files.",
    )
    env: EnvConfig = Field(default_factory=EnvConfig, description="What agents and checks get of ralph's environment.")
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

    @field_validator("protect", "scope")
    @classmethod
    def _globs_git_reads(cls, patterns: list[str] | None, info: ValidationInfo) -> list[str] | None:
        for pattern in patterns or ():
            line = pattern.partition("#")[0] if info.field_name == "protect" else pattern
            why = paths.problem(line if info.field_name == "protect" or line.startswith(("/", "!")) else "/" + line)
            if why:
                raise ValueError(f"{info.field_name}: {pattern!r} is not a glob as git reads one ({why})")
        return patterns

    @field_validator("checks", mode="before")
    @classmethod
    def _plain_commands(cls, value: object) -> object:
        if isinstance(value, list):
            return [{"run": item} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="after")
    def _room_for_the_stuck_laps(self) -> Config:
        """The stagnation fuse must not blow before the stuck item's last rung (docs/agents.md: Stuck items)."""
        rungs = self.stuck_laps
        if rungs and self.limits.stagnation < rungs:
            raise ValueError(
                f"agent.escalate_after: the red laps before escalating, the escalated ones and the split come to "
                f"{rungs} laps without progress, so limits.stagnation ({self.limits.stagnation}) would end the "
                f"run first — set limits.stagnation to {rungs} or more"
            )
        return self

    @model_validator(mode="after")
    def _a_home_the_presets_can_write(self) -> Config:
        """A preset's tool writes to its HOME as it starts (its sessions, caches, a refreshed login):
        a read-only one stops it (an error, a hang, or every shell call failing)."""
        presets = [agent.preset for agent in self.agents if agent.preset]
        if presets and self.sandbox.home and self.sandbox.mode != "off":
            raise ValueError(
                f"sandbox.home: the {presets[0]} preset's tool writes to its HOME, which sandbox.home makes "
                "read-only in the sandbox — leave sandbox.home out: each lap then gets a private HOME with a copy "
                "of the tool's login (docs/agents.md: Logins in the sandbox)"
            )
        return self

    @property
    def stuck_laps(self) -> int:
        """Laps without progress on one stuck item until its split has run: escalate_after red laps,
        as many escalated ones (with agent.escalate), then the split lap. 0: no escalation."""
        agent, after = self.agent, self.agent.escalate_after
        if after is None:
            return 0
        return after + (after if agent.escalate else 0) + (1 if agent.split else 0)

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
        """The agent, its fallbacks, then agent.escalate: a lap's agent_index (its note's
        `fallback`) is its index here."""
        return [self.agent, *self.agent.fallback, *([self.agent.escalate] if self.agent.escalate else [])]

    @property
    def escalate_index(self) -> int | None:
        """Where agent.escalate is in `agents`; None without one."""
        return len(self.agent.fallback) + 1 if self.agent.escalate else None

    @property
    def key_variables(self) -> tuple[str, ...]:
        """The variables holding every model's key (the agents', the roles'): no agent CLI but
        the one that uses it, no check and no MCP server gets them, unless env.pass says so."""
        return (*(agent.api_key_env for agent in self.agents), *self.role_key_variables)

    @property
    def kept_from_agent_clis(self) -> tuple[str, ...]:
        """The keys of the built-in agents and of the roles: no agent CLI gets them, in a lap, in
        `ralph plan` or in `ralph doctor --agent`, whatever its preset reads."""
        return (*(agent.api_key_env for agent in self.agents if agent.kind == "openai"), *self.role_key_variables)

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
            elif agent.kind == "openai" and agent.model not in self.prices:
                return f"prices names no price for the agent's model {agent.model!r}"
        judge = self.roles.judge
        endpoint = self.role_endpoint(judge) if judge else None
        if endpoint is not None and endpoint.model not in self.prices:
            return f"prices names no price for the judge's model {endpoint.model!r}"
        return None

    @property
    def protected(self) -> list[str]:
        """What the lap's prompt names as not its to change: `protect`; the files that define how
        the checks run (their Makefile, scripts, `package.json` scripts: ralph/facts/check_files.py)
        and the file MCP servers are loaded from, both never in scope (ralph/verdict/scope.py)."""
        return [
            *self.protect,
            *check_files.patterns(self.check_commands),
            *([self.mcp.from_] if self.mcp.from_ else []),
        ]

    @property
    def check_commands(self) -> list[str]:
        return [check.run for check in self.checks]

    @property
    def never_committed(self) -> tuple[str, ...]:
        """What checks and agent CLIs write into the tree for themselves, never a lap's work: the
        checks' reports (`junit:`, `jest:`), and the files a preset's tool keeps there (aider's histories)."""
        reports = [path for check in self.checks for path in (check.junit, check.jest) if path]
        tools = [left for agent in self.agents if agent.preset for left in PRESETS[agent.preset].leaves]
        return (*reports, *tools)


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
    if len(text) > CONFIG_MAX_CHARS:
        raise RalphError(f"{name}: {len(text):,} characters — a configuration is at most {CONFIG_MAX_CHARS:,}")
    try:
        data = yaml.safe_load(text)
    except RecursionError:  # YAML nested thousands deep: no configuration is
        raise RalphError(f"{name}: nested too deep to be a configuration — check the file's brackets") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise RalphError(f"{name}{where}: not valid YAML: {problem}") from None
    if data is None:
        raise RalphError(f"{name}: the file is empty — it needs at least `goal:`, `agent:` and `checks:`")
    return from_mapping(data, name, text)


def from_mapping(data: object, name: str, text: str = "") -> Config:
    """A configuration from what a file's YAML reads as (`text`: the file, for its line numbers)."""
    if not isinstance(data, dict):
        raise RalphError(f"{name}: expected a mapping of keys (goal:, agent:, checks: …), found {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except RecursionError:
        raise RalphError(f"{name}: nested too deep to be a configuration — check the file's brackets") from None
    except ValidationError as exc:
        raise RalphError(problems.describe(exc, text, name, Config)) from None
