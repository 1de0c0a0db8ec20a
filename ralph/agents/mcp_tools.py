"""External tools: the MCP servers of ralph.yaml's `mcp:`, for the built-in agent and the roles.

`McpTools.start` starts every server once, through the official SDK (stdio or streamable
HTTP), as ralph's own children outside the lap sandbox, each in a process group of its own
and marked like every command ralph runs; listing a server's tools is its health check. A
server that cannot start, does not list its tools in time, or lists none is dropped with one
warning: no run fails because of an MCP server. Tools are filtered before a model sees them
(`removal`): only those that read are offered, unless `allow_writes` names one. The model
calls them as `mcp__<server>__<tool>`; a result is capped as a bash output is, and a call
that fails is the tool's error text, never the end of a lap.

The SDK is async and ralph is not: one event loop in a thread of its own (anyio's blocking
portal) holds every connection, each server in one task from its start to its stop (the
SDK's scopes must be left in the task that entered them), and the laps call into it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
import uuid
from contextlib import AbstractContextManager, AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.agents.mcp_offer import model_name, removal, unfit
from ralph.agents.mcp_servers import Unset, expand, servers_of
from ralph.agents.transcript import Transcript
from ralph.config.mcp import McpConfig, McpServer
from ralph.isolation import orphans, proc
from ralph.isolation.capped_output import capped
from ralph.isolation.files import remove_path
from ralph.show import ui

if TYPE_CHECKING:  # anyio is imported where MCP servers run: most runs have none, and every command imports this
    import anyio
    from anyio.from_thread import BlockingPortal

OFFERED_MAX = 100  # MCP tools offered in all: a request carries at most 128 tools, ralph's own among them
DESCRIPTION_MAX = 1024  # characters of a tool's description the model reads
DECLARATIONS_MAX = 48 * 1024  # characters of every MCP tool's declaration together, sent with each request
SHOWN_MAX = 12  # tools named in the line a server gets at the start; the rest are in the audit file
RESULT_CAP = 16 * 1024  # bytes of a result the model sees, as of a bash command's output
STOP_SECONDS = 15.0  # for every server to shut down, after which they are killed
LIST_PAGES = 20  # pages of a tool list read; a server that sends more is not believed
AUDIT_FILE = "mcp-tools.json"

_SDK_LOG = logging.getLogger("mcp")


@dataclass(frozen=True)
class Tool:
    name: str  # as the model calls it: mcp__<server>__<tool>
    server: str
    tool: str  # as the server calls it
    declaration: dict  # as a request declares it


@dataclass(frozen=True)
class Removed:
    server: str
    tool: str
    why: str


class McpTools:
    """The run's MCP servers, started, and the tools they offer; `close` stops them all."""

    def __init__(self, cfg: McpConfig, env: dict[str, str], folder: Path):
        self.cfg, self.folder = cfg, folder
        self.token = uuid.uuid4().hex  # in every server's environment: whatever leaves its group is found
        self.env = dict(env, **{proc.TOKEN_VAR: self.token})
        # Servers start in an empty folder of their own, outside the repository: a write that
        # got past the filter finds nothing of the user's where it lands by default.
        self.cwd = Path(tempfile.mkdtemp(prefix="ralph-mcp-"))
        self.children = orphans.children()  # ralph's before the servers: the others are theirs, at the end
        self.listed: dict[str, list[Any]] = {}  # server -> the tools it listed
        self.tools: dict[str, Tool] = {}  # by the name the model calls it
        self.removed: list[Removed] = []
        self.dropped: dict[str, str] = {}  # server -> why
        self.clients: dict[str, Any] = {}  # server -> its mcp.Client, once it listed its tools
        self.calls = 0
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._stop: anyio.Event | None = None
        self._serving: Any = None  # the future of the task that holds every server
        self._log: logging.Handler | None = None  # where the SDK's own complaints go

    @classmethod
    def start(cls, cfg: McpConfig, top: Path, env: dict[str, str], folder: Path) -> McpTools | None:
        """The servers started and their tools listed, or None when none can be used (warned)."""
        servers = servers_of(cfg, top)
        if not servers:
            return None
        try:
            import mcp  # noqa: F401  (an optional dependency: checked here, used in the loop)
        except ImportError:
            ui.warn("mcp: the servers are not started: the mcp package is missing — pip install 'git-ralph[mcp]'")
            return None
        folder.mkdir(parents=True, exist_ok=True)
        started = cls(cfg, env, folder)
        try:
            started._start(servers)
            for name in servers:  # in the configuration's order, whichever server listed first
                started._choose(name, started.listed.get(name, []))
            started._report(servers)
        except BaseException:
            started.close()
            raise
        if not started.clients:
            started.close()
            return None
        return started

    @property
    def declarations(self) -> list[dict]:
        return [tool.declaration for tool in self.tools.values()]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.tools)

    def call(self, name: str, arguments: dict, transcript: Transcript, seconds: float | None = None) -> str:
        """The tool's result as text for the model, capped (the whole of it in a file beside the
        transcript when cut), and an `mcp` event in the transcript. Never raises for the tool's
        sake: a failure is the text `error: …`."""
        tool = self.tools[name]
        seconds = min(seconds or self.cfg.call_timeout, self.cfg.call_timeout)
        self.calls += 1
        started = time.monotonic()
        try:
            if self._portal is None:
                raise RuntimeError("the MCP servers are stopped")
            text = result_text(self._portal.call(self._call, tool, arguments, seconds))
        except TimeoutError:
            text = f"error: {tool.server} did not answer {tool.tool} in {seconds:g}s"
        except Exception as exc:
            text = f"error: calling {tool.tool} on {tool.server} failed: {_reason(exc)}"
        spent = round(time.monotonic() - started, 3)
        transcript.write("mcp", tool=name, seconds=spent, failed=text.startswith("error: "))
        spill = transcript.path.parent / f"mcp-{self.calls}.out"
        return capped(text.encode("utf-8", "replace"), RESULT_CAP, spill)

    def close(self) -> None:
        """Stop every server (the SDK closes its stdin, then TERMs and KILLs its group), then
        kill whatever of theirs is still running, wherever it went. No Ctrl-C cuts this short:
        one that comes meanwhile is raised when it is done."""
        with proc.signals_held():
            self._close()

    def _close(self) -> None:
        try:
            if self._portal is not None:
                try:
                    if self._stop is not None:
                        self._portal.call(self._stop.set)
                    if self._serving is not None:
                        self._serving.result(timeout=STOP_SECONDS)
                except Exception:
                    pass  # a server that would not stop: the cancel and the kill below end it
                finally:
                    try:
                        self._portal.call(self._portal.stop, True)
                    except RuntimeError:
                        pass  # the loop is gone already
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
        finally:
            self._portal = self._portal_cm = None
            orphans.kill_marked(proc.TOKEN_VAR, self.token)  # those that left their group
            orphans.end_children(spare=self.children)  # those that also cleared their environment
            if self._log is not None:
                _SDK_LOG.removeHandler(self._log)
                self._log.close()
            remove_path(self.cwd)

    def _start(self, servers: dict[str, McpServer]) -> None:
        # The SDK logs what a server does wrong (a line on stdout that is not JSON-RPC) with a
        # traceback: into the folder, not onto the user's terminal.
        self._log = logging.FileHandler(self.folder / "mcp-sdk.log", encoding="utf-8")
        _SDK_LOG.addHandler(self._log)
        _SDK_LOG.propagate = False
        # The loop's thread (and the threads it starts) never take a Ctrl-C: the main thread does.
        from anyio.from_thread import start_blocking_portal

        with proc.signals_held():
            self._portal_cm = start_blocking_portal(name="ralph-mcp")
            self._portal = self._portal_cm.__enter__()
        self._serving, _ = self._portal.start_task(self._serve_all, servers)

    async def _serve_all(self, servers: dict[str, McpServer], *, task_status: Any) -> None:
        """Every server in a task of its own; started (for `start_task`) once each has listed
        its tools or been dropped; returns when every one has stopped."""
        import anyio

        self._stop = anyio.Event()
        async with anyio.create_task_group() as group:
            ready = {name: anyio.Event() for name in servers}
            for name, server in servers.items():
                group.start_soon(self._serve, name, server, ready[name])
            for event in ready.values():
                await event.wait()
            task_status.started()

    async def _serve(self, name: str, server: McpServer, ready: anyio.Event) -> None:
        """One server from its start to its stop: the SDK's scopes are entered and left here."""
        import anyio

        assert self._stop is not None
        with anyio.CancelScope(deadline=anyio.current_time() + self.cfg.start_timeout) as scope:
            try:
                async with AsyncExitStack() as stack:
                    from mcp import Client

                    client = await stack.enter_async_context(Client(await self._transport(name, server, stack)))
                    listed = await _list_tools(client)
                    scope.deadline = math.inf
                    if not listed:
                        self.dropped[name] = "it lists no tools"
                        return
                    self.listed[name] = listed
                    self.clients[name] = client
                    ready.set()
                    await self._stop.wait()
                    scope.deadline = anyio.current_time() + STOP_SECONDS
            except Unset as unset:
                self.dropped[name] = f"it uses ${{{unset}}}, which is not set"
            except Exception as exc:
                if name not in self.clients:
                    log = f" (its stderr: {self.folder / f'mcp-{name}.log'})" if server.command else ""
                    self.dropped[name] = f"it did not start: {_reason(exc)}{log}"
            finally:
                ready.set()
        if scope.cancelled_caught and name not in self.clients and name not in self.dropped:
            self.dropped[name] = f"no tool list within {self.cfg.start_timeout:g}s (mcp.start_timeout)"

    async def _transport(self, name: str, server: McpServer, stack: AsyncExitStack) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

        environ = os.environ  # ${VAR} reads ralph's own environment, secrets included (docs/agents.md: External tools)
        if server.url is not None:
            headers = {key: expand(value, environ) for key, value in server.headers.items()}
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            return streamable_http_client(expand(server.url, environ), http_client=http)
        assert server.command is not None  # the config allows a command or a url
        parameters = StdioServerParameters(
            command=expand(server.command, environ),
            args=[expand(arg, environ) for arg in server.args],
            env=dict(self.env, **{key: expand(value, environ) for key, value in server.env.items()}),
            cwd=self.cwd,
            # One byte that is no UTF-8 must not silence the server until every call times out.
            encoding_error_handler="replace",
        )
        errors = stack.enter_context((self.folder / f"mcp-{name}.log").open("a", encoding="utf-8"))
        return stdio_client(parameters, errlog=errors)

    def _choose(self, server: str, listed: list[Any]) -> None:
        size = sum(len(json.dumps(tool.declaration)) for tool in self.tools.values())
        for tool in listed:
            why = removal(server, tool, self.cfg.allow_writes) or unfit(tool)
            name = model_name(server, tool.name, set(self.tools))
            description = " ".join((tool.description or tool.title or "").split())[:DESCRIPTION_MAX]
            declaration = {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": tool.input_schema},
            }
            if why is None and len(self.tools) >= OFFERED_MAX:
                why = f"over the {OFFERED_MAX} MCP tools a model is offered"
            if why is None and size + len(json.dumps(declaration)) > DECLARATIONS_MAX:
                why = f"over the {DECLARATIONS_MAX // 1024} KiB of MCP tool declarations a request carries"
            if why is not None:
                self.removed.append(Removed(server, tool.name, why))
                continue
            size += len(json.dumps(declaration))
            self.tools[name] = Tool(name, server, tool.name, declaration)

    async def _call(self, tool: Tool, arguments: dict, seconds: float) -> Any:
        import anyio

        client = self.clients[tool.server]
        with anyio.fail_after(seconds):
            return await client.call_tool(tool.tool, arguments, read_timeout_seconds=seconds)

    def _report(self, servers: dict[str, McpServer]) -> None:
        """One line a server, and the whole list in the folder (the run's: its audit trail)."""
        audit: dict[str, dict] = {}
        for name in servers:
            offered = [tool for tool in self.tools.values() if tool.server == name]
            removed = [entry for entry in self.removed if entry.server == name]
            if name in self.dropped:
                ui.warn(f"MCP server {name} dropped: {self.dropped[name]}")
                audit[name] = {"started": False, "why": self.dropped[name]}
                continue
            audit[name] = {
                "started": True,
                "offered": [{"tool": tool.tool, "as": tool.name} for tool in offered],
                "removed": [{"tool": entry.tool, "why": entry.why} for entry in removed],
            }
            line = f"MCP server {ui.safe(name)}: tools offered: " + _listing([tool.tool for tool in offered])
            if removed:
                line += "; removed: " + _listing([f"{entry.tool} ({entry.why})" for entry in removed])
            ui.say(line)
        (self.folder / AUDIT_FILE).write_text(json.dumps({"servers": audit}, indent=2) + "\n")


def _listing(names: list[str]) -> str:
    shown = ", ".join(ui.safe(name) for name in names[:SHOWN_MAX]) or "none"
    more = len(names) - SHOWN_MAX
    return shown + (f" and {more} more (all in {AUDIT_FILE})" if more > 0 else "")


async def _list_tools(client: Any) -> list[Any]:
    """Every page of the server's tool list (a bounded number of them)."""
    listed: list[Any] = []
    cursor = None
    for _ in range(LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        listed += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return listed


def result_text(result: Any) -> str:
    """A CallToolResult as the model reads it: the text it holds, the rest named."""
    parts = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and isinstance(getattr(block.resource, "text", None), str):
            parts.append(block.resource.text)
        elif kind in ("resource", "resource_link"):
            uri = getattr(block, "uri", None) or getattr(getattr(block, "resource", None), "uri", "")
            parts.append(f"[a resource, not shown: {uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown: {getattr(block, 'mime_type', '')}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) if parts else "(no output)"
    return f"error: {text}" if result.is_error else text


def _reason(exc: BaseException) -> str:
    """One line for a failure, from the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return ui.one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 300)
