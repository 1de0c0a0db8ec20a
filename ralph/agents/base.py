"""The agent interface: given a lap task, do the work in the workspace and say how it went."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from ralph.isolation.jail import Jail

if TYPE_CHECKING:
    from ralph.agents.mcp_tools import McpTools


@dataclass(frozen=True)
class LapTask:
    run: str
    lap: int
    workspace: Path
    prompt: str
    timeout: float  # seconds for the agent's whole part of the lap
    log_dir: Path  # the lap's folder under the common git dir: transcripts, logs
    env: dict[str, str]  # already cleaned of secrets
    # Runs the repository's checks on the workspace as it is now (uncommitted edits
    # included) and returns None when nothing regressed, else the failure to show
    # the agent. Used by agents that fix red checks within the lap (fix_attempts).
    check: Callable[[], str | None] | None = None
    jail: Jail | None = None  # the sandbox every command of the agent runs in, when laps are sandboxed
    idle_timeout: float | None = None  # limits.idle_timeout: seconds of silence (no output, no file written)
    mcp: McpTools | None = None  # the MCP servers' tools, for the built-in agent (mcp.roles has agent)


class Usage(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)  # a cost as a note keeps it: a number, or None
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens: those the server said came from its prompt cache
    estimated: bool = False  # True when a server reported no usage and ralph estimated it
    largest_prompt_tokens: int = 0  # the biggest single request: how close a lap came to the context limit
    cost_usd: float | None = None  # as the tool reported it, or from ralph.yaml's prices; None: unknown

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def with_tokens_of(self, other: Usage) -> Usage:
        """These, with `other`'s tokens counted in (not its requests: the endpoint check's tokens
        go to the lap, whose `requests` stay its model calls)."""
        return self.model_copy(
            update={
                "prompt_tokens": self.prompt_tokens + other.prompt_tokens,
                "completion_tokens": self.completion_tokens + other.completion_tokens,
                "cached_tokens": self.cached_tokens + other.cached_tokens,
                "estimated": self.estimated or other.estimated,
            }
        )


class AgentResult(BaseModel):
    kind: str
    name: str = ""  # its preset, else its kind: what the note and the Ralph-Agent trailer say
    model: str | None = None  # the built-in agent's model
    # ok: judge the work; failed/timeout: the lap is red; error: not judged (e.g. API outage);
    # limited: the agent hit a usage or rate limit, neither judged nor counted
    outcome: Literal["ok", "failed", "timeout", "error", "limited"]
    duration_s: float
    exit_code: int | None = None
    summary: str = ""
    detail: str = ""  # why it failed, or the tail of the agent's output
    usage: Usage = Usage()
    endpoint_failed: bool = False  # an error because the model's endpoint failed, not the model
    limited_until: float | None = None  # limited: when the tool said the limit resets (Unix time)
    mcp_calls: dict[str, int] = {}  # the MCP tools it called (mcp__<server>__<tool>), how many times each


class Agent(Protocol):
    kind: str

    def check_endpoint(self, deadline: float) -> None:
        """Before a run starts: raise EndpointUnusable if the agent's service cannot be used."""

    def run_lap(self, task: LapTask) -> AgentResult: ...
