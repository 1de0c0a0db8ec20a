"""The agent kinds behind `base.Agent`: any coding-agent CLI (`command`) and the built-in one (`openai`)."""

from __future__ import annotations

from ralph.agents.base import Agent
from ralph.agents.command import CommandAgent
from ralph.agents.openai import OpenAIAgent
from ralph.config.agent import AgentConfig


def make_agent(config: AgentConfig, withheld: tuple[str, ...] = ()) -> Agent:
    """`withheld`: variables no command agent gets, its preset's credentials or not (the keys of
    the judge and of the built-in agents)."""
    if config.kind == "command":
        return CommandAgent(config, withheld)
    return OpenAIAgent(config)
