"""The `agent:` and `roles:` sections of `ralph.yaml`: who writes a lap, and the planner's and
judge's own endpoints."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from ralph.config.sections import Section
from ralph.facts.presets import PRESETS


class CompatConfig(Section):
    """Where OpenAI-compatible servers truly differ (docs/agents.md's table of servers says which)."""

    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens",
        description="The name the output limit is sent under: OpenAI's reasoning models accept "
        "only max_completion_tokens; llama.cpp, vLLM and Ollama read max_tokens.",
    )
    text_tool_calls: bool = Field(
        False,
        description="Run the tool calls a model writes as text (a JSON object naming an offered tool and "
        "its arguments, as Qwen's models do under a chat template the server does not parse) as if the "
        "server had sent them as tool_calls.",
    )


class AgentConfig(Section):
    kind: Literal["command", "openai", "python"] = Field(
        "command",
        description="Which agent runs a lap. python: an object given to ralph.api.run(agent=...), "
        "made anew for every lap (docs/library.md); the command line runs the other two.",
    )
    preset: str | None = Field(None, description="kind: command — an agent CLI ralph knows (docs/agents.md: Presets).")
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
    compat: CompatConfig = Field(
        default_factory=CompatConfig, description="kind: openai — where the endpoint's server differs."
    )
    max_turns: PositiveInt = Field(60, description="Model calls per lap.")
    request_timeout: float = Field(
        120,
        gt=0,
        description="Seconds a model request may stay silent (no byte of its answer) before the endpoint "
        "counts as down or stuck; a streamed reply that keeps coming is bounded by the lap's time instead.",
    )
    fix_attempts: int = Field(1, ge=0, description="Times red checks are shown to the agent within a lap.")
    fallback: list[AgentConfig] = Field(
        default_factory=list,
        description="Agents for the laps after this one is limited, or failed fallback_after laps in a row, in order.",
    )
    fallback_after: PositiveInt = Field(2, description="Laps in a row the agent itself failed before the next one.")
    escalate: AgentConfig | None = Field(
        None,
        description="The agent for the laps after escalate_after red laps in a row on the same open item, "
        "until a lap is green (docs/agents.md: Stuck items).",
    )
    escalate_after: PositiveInt | None = Field(
        None,
        description="Red laps in a row on the same open item before the next lap is escalated (agent.escalate), "
        "or the item split; null: never.",
    )
    split: bool = Field(
        True,
        description="With escalate_after: when escalating does not help (or there is no agent.escalate), "
        "the planner role (roles.planner) splits the stuck item into steps under it, once; the item stays open.",
    )

    @model_validator(mode="after")
    def _needs_its_fields(self) -> AgentConfig:
        if self.kind != "command" and (self.preset or self.args or self.limit_patterns):
            raise ValueError("agent.preset, args and limit_patterns are for kind: command (an agent CLI)")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"agent.preset: no preset {self.preset!r} — ralph knows {', '.join(PRESETS)}")
        if self.kind == "command" and not (self.command or "").strip() and self.preset is None:
            raise ValueError("agent.command (or agent.preset) is required when agent.kind is 'command'")
        if any(agent.fallback for agent in self.fallback):
            raise ValueError("agent.fallback: a fallback agent has no fallback of its own; list them all in one")
        self._escalation_fits()
        for pattern in self.limit_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"agent.limit_patterns: {pattern!r} is no regular expression ({exc})") from None
        if self.kind == "openai" and not self.model:
            raise ValueError("agent.model is required when agent.kind is 'openai'")
        return self

    def _escalation_fits(self) -> None:
        """agent.escalate is one agent, for the top agent's stuck items: nothing of its own to escalate to."""
        if any(agent.escalate or agent.escalate_after for agent in self.fallback):
            raise ValueError("agent.fallback: a fallback agent has no escalate or escalate_after of its own")
        escalate = self.escalate
        if escalate is not None and (escalate.fallback or escalate.escalate or escalate.escalate_after):
            raise ValueError("agent.escalate: that agent has no fallback, escalate or escalate_after of its own")
        if escalate is not None and self.escalate_after is None:
            raise ValueError("agent.escalate needs agent.escalate_after: the red laps in a row before it takes a lap")
        if self.escalate_after is not None and escalate is None and not self.split:
            raise ValueError("agent.escalate_after needs agent.escalate, or agent.split: true, to do something")

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
