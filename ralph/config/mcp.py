"""The `mcp:` section of `ralph.yaml`: MCP servers whose tools the built-in agent and the roles get."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ralph.config.sections import Section

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
