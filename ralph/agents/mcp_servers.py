"""Which MCP servers a run starts: ralph.yaml's `mcp.servers`, and those of the file `mcp.from` names.

A .mcp.json is read as Claude Code reads it, `${VAR}` and `${VAR:-default}` included; what
cannot be used is a warning, never the end of a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from ralph.config.mcp import MCP_SERVER_NAME, McpConfig, McpServer
from ralph.show import ui

FILE_MAX = 1 << 20  # bytes of a .mcp.json read
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class Unset(Exception):
    """A `${VAR}` with no value and no default."""


def servers_of(cfg: McpConfig, top: Path) -> dict[str, McpServer]:
    """The servers of the `from` file, then ralph.yaml's (which win a name both use)."""
    servers = _from_file(top, cfg.from_) if cfg.from_ else {}
    servers.update(cfg.servers)
    return servers


def _from_file(top: Path, name: str) -> dict[str, McpServer]:
    """A .mcp.json's `mcpServers`, as Claude Code reads it; what cannot be used is a warning."""
    try:
        with (top / name).open("rb") as file:
            data = json.loads(file.read(FILE_MAX))
    except FileNotFoundError:
        ui.warn(f"mcp.from: {name} is not there; its servers are not started")
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        ui.warn(f"mcp.from: {name} cannot be read as JSON ({exc}); its servers are not started")
        return {}
    entries = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        ui.warn(f"mcp.from: {name} has no `mcpServers` object; no server is started from it")
        return {}
    servers = {}
    for server, entry in entries.items():
        skipped = f"mcp.from: {name}: the server {server!r} is skipped"
        if not MCP_SERVER_NAME.match(server):
            ui.warn(f"{skipped}: its name may have up to 24 letters, digits, _ and -")
            continue
        if not isinstance(entry, dict):
            ui.warn(f"{skipped}: not an object")
            continue
        if entry.get("type") == "sse":
            ui.warn(f"{skipped}: ralph speaks stdio and streamable HTTP, not SSE")
            continue
        known = {key: value for key, value in entry.items() if key in McpServer.model_fields}
        try:
            servers[server] = McpServer.model_validate(known)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            ui.warn(f"{skipped}: {where + ': ' if where else ''}{problem['msg']}")
    return servers


def expand(text: str, environ: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` (the default when VAR is unset or empty), as .mcp.json
    files are written for Claude Code; Unset for a `${VAR}` with neither."""

    def value(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found:
            return found
        if default is not None:
            return default
        if found is None:
            raise Unset(name)
        return found

    return _VARIABLE.sub(value, text)
