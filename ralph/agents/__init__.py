"""Agent backends behind one small interface (`base.Agent`)."""

from __future__ import annotations

from ralph.agents.base import Agent
from ralph.config import AgentConfig


def make_agent(config: AgentConfig, withheld: tuple[str, ...] = ()) -> Agent:
    """`withheld`: variables no command agent gets, its preset's credentials or not (the keys of
    the judge and of the built-in agents)."""
    if config.kind == "command":
        from ralph.agents.command import CommandAgent

        return CommandAgent(config, withheld)
    from ralph.agents.openai import OpenAIAgent  # imported only when used: openai is slow to import

    return OpenAIAgent(config)
