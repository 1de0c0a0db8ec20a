"""`ralph plan`: a model turns the goal into TODO.md, looking at the repository read-only.

One tool loop, before any lap: the planner may view a file, list a folder and search the
text of the committed tree (HEAD, through git: nothing it does can write, and an untracked
`.env` is not there to read), and ends by calling `write_plan` with the approaches it
weighed, its recommendation and the checklist. ralph validates the plan, shows it, and
writes the checklist to TODO.md when the user says so. What the planner read and why it
chose is kept in `<git-common-dir>/ralph/plans/<time>/`: its transcript and plan.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, ValidationError, field_validator

from ralph import config as config_module
from ralph import git, todo
from ralph.agents import limiter
from ralph.agents.base import Usage
from ralph.agents.mcp_tools import McpTools
from ralph.agents.openai import chat_request, endpoint_of, open_client
from ralph.agents.replies import ReplyReader, ToolCall, assistant_message, schema_problems
from ralph.agents.retry import RequestFailed, call_with_retry
from ralph.agents.tools import ToolError, function_schema, numbered, view_bounds
from ralph.agents.transcript import Transcript
from ralph.commands.init import TODO_TEMPLATE
from ralph.config import AgentConfig
from ralph.errors import EndpointUnusable, Exit, RalphError
from ralph.isolation import proc
from ralph.show import ui

if TYPE_CHECKING:
    from openai import OpenAI

PLAN_SECONDS = 900  # the whole planning loop
FORMAT_ERRORS = 3  # malformed write_plan calls (or replies without a tool call) in a row, then give up
OUTPUT_CAP = 16 * 1024
LISTING_MAX = 400
SYSTEM_PROMPT = """\
You plan a long coding job that ralph will run as a series of fresh agent laps. Each lap
starts with no memory, reads TODO.md, does one slice, and is judged by the repository's own
checks. Look at the repository with the tools (view, list, search: the committed tree, read
only), weigh two or three approaches, then call write_plan once with:
- approaches: each with a name, pros and cons;
- recommendation: which approach and why, in a few sentences;
- todo: the checklist for the recommended approach, in order. Each item is one line, a slice
  a single lap can finish and verify (a test that passes, a file that exists, a command
  that succeeds), small enough that a lap is minutes of work, not hours. Name files and
  tests where you can. Write each item as a goal on the code ("Implement sub in calc.py so
  tests/test_calc.py::test_sub passes"), never as a change to the tests: an item that asks
  to rewrite or delete a test lets the lap change it, so write one only where the job is
  to change tests."""


LOOKUP_NOTE = """
The mcp__ tools look things up outside the repository (documentation, issues, the web)."""


class Approach(BaseModel):
    name: str = Field(min_length=1)
    pros: list[str] = []
    cons: list[str] = []


class Plan(BaseModel):
    """The `write_plan` call's arguments, as the model must send them."""

    approaches: list[Approach] = Field(min_length=1)
    recommendation: str = Field(min_length=1)
    todo: list[str] = Field(min_length=1, max_length=200)

    @field_validator("todo")
    @classmethod
    def _one_line_each(cls, items: list[str]) -> list[str]:
        cleaned = [" ".join(item.split()) for item in items]
        if not all(cleaned):
            raise ValueError("every todo item needs text")
        return cleaned


PLAN_TOOLS = [
    function_schema(
        "view",
        "A file of the repository with line numbers; view_range [start, end] (end -1: to the end).",
        {"path": {"type": "string"}, "view_range": {"type": "array", "items": {"type": "integer"}}},
        ["path"],
    ),
    function_schema(
        "list", "The files under a folder of the repository ('.' for all).", {"path": {"type": "string"}}, []
    ),
    function_schema(
        "search",
        "Lines matching a regular expression (extended) in the repository's files, with file and line number.",
        {"pattern": {"type": "string"}, "path": {"type": "string"}},
        ["pattern"],
    ),
    function_schema(
        "write_plan",
        "Your plan; ends planning.",
        {
            "approaches": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "pros": {"type": "array", "items": {"type": "string"}},
                        "cons": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["name", "pros", "cons"],
                },
            },
            "recommendation": {"type": "string"},
            "todo": {"type": "array", "items": {"type": "string"}, "description": "One line an item, in order."},
        },
        ["approaches", "recommendation", "todo"],
    ),
]
PLAN_TOOL_NAMES = tuple(schema["function"]["name"] for schema in PLAN_TOOLS)


class PlanFailed(RalphError):
    """The planner ended without a valid plan."""


def plan(cwd: Path, goal: str | None, config_path: Path | None, yes: bool, force: bool) -> Exit:
    repo = git.open_repo(cwd)
    cfg = config_module.load(config_path or repo.top / config_module.CONFIG_FILE)
    goal = (goal or cfg.goal).strip()
    endpoint = cfg.role_endpoint(cfg.roles.planner)
    if endpoint is None:
        raise RalphError(
            "ralph plan needs a model: set roles.planner.model (and base_url, api_key_env) in "
            "ralph.yaml, or use the built-in agent (agent.kind: openai), whose model it then uses"
        )
    todo_path = repo.top / cfg.files.todo
    if todo_path.is_symlink() or (os.path.lexists(todo_path) and not todo_path.is_file()):
        raise RalphError(f"{cfg.files.todo} is not a regular file (a link, a folder) — ralph plan writes only a file")
    text = todo_path.read_text(encoding="utf-8", errors="replace") if todo_path.exists() else ""
    if text.strip() and text != TODO_TEMPLATE and not force:  # `ralph init`'s placeholder is no one's work
        items = len(todo.parse(text))
        what = f"already has {items} items" if items else "already has text of yours"
        raise RalphError(f"{cfg.files.todo} {what} — `ralph plan --force` replaces it")
    limiter.configure(cfg.limits.requests_per_minute)
    folder = repo.common_dir / "ralph" / "plans" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    folder.mkdir(parents=True)
    mcp = None
    if cfg.mcp.offered_to("planner"):
        env = proc.clean_env(allow=tuple(cfg.env.pass_), secrets=cfg.key_variables)
        mcp = McpTools.start(cfg.mcp, repo.top, env, folder)
    try:
        planner = Planner(endpoint, repo.top, repo.head, folder, mcp)
        made = planner.run(goal)
    finally:
        if mcp is not None:
            mcp.close()
    saved = dict(made.model_dump(), goal=goal, files_read=files_read(folder), usage=planner.usage.model_dump())
    (folder / "plan.json").write_text(json.dumps(saved, indent=1), encoding="utf-8")
    _show(made, cfg.files.todo)
    ui.say(f"the planner's reasoning and what it read: {ui.safe(folder)}")
    if not yes and not _confirmed(f"write these {len(made.todo)} items to {cfg.files.todo}?"):
        ui.say(f"{ui.safe(cfg.files.todo)} not written — `ralph plan --yes` writes it without asking")
        return Exit.ERROR
    todo_path.write_text(checklist(goal, made.todo), encoding="utf-8")
    ui.say(f"wrote {ui.safe(cfg.files.todo)} ({len(made.todo)} items): review it, commit it, then `ralph run`")
    return Exit.DONE


def checklist(goal: str, items: list[str]) -> str:
    return f"# TODO\n\nGoal: {goal}\n\n" + "".join(f"- [ ] {item}\n" for item in items)


def files_read(folder: Path) -> list[str]:
    """The files the planner read, from its transcript."""
    seen = []
    for line in (folder / "transcript.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        path = event.get("arguments", {}).get("path") if event.get("event") == "tool" else None
        if event.get("name") == "view" and event.get("ok") and isinstance(path, str) and path not in seen:
            seen.append(path)
    return seen


def _show(made: Plan, todo_name: str) -> None:
    for approach in made.approaches:
        ui.say(f"[bold]approach:[/] {ui.safe(approach.name)}")
        for pro in approach.pros:
            ui.say(f"  + {ui.safe(pro)}")
        for con in approach.cons:
            ui.say(f"  - {ui.safe(con)}")
    ui.say(f"[bold]recommended:[/] {ui.safe(made.recommendation)}")
    ui.say(f"[bold]{ui.safe(todo_name)}:[/]")
    for item in made.todo:
        ui.say(f"  - [ ] {ui.safe(item)}")


def _confirmed(question: str) -> bool:
    """The user's yes, asked on the terminal; no terminal, no yes."""
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:  # Ctrl-D
        return False


class Planner:
    """One planning conversation over the committed tree at `head`."""

    def __init__(self, config: AgentConfig, top: Path, head: str, folder: Path, mcp: McpTools | None = None):
        self.config, self.top, self.head = config, top, head
        self.mcp = mcp  # MCP tools to look things up with (mcp.roles has planner)
        self.tools = PLAN_TOOLS + (mcp.declarations if mcp else [])
        self.endpoint = endpoint_of(config)
        self.api_key = os.environ.get(config.api_key_env)
        self.transcript = Transcript(folder / "transcript.jsonl", secret=self.api_key)
        self.messages: list[dict] = []
        self.replies = ReplyReader(PLAN_TOOL_NAMES + (mcp.names if mcp else ()))
        self.deadline = time.monotonic() + PLAN_SECONDS
        self.usage = Usage()

    def run(self, goal: str) -> Plan:
        self.transcript.write("start", model=self.config.model, endpoint=self.endpoint, goal=goal)
        self.add({"role": "system", "content": SYSTEM_PROMPT + (LOOKUP_NOTE if self.mcp else "")})
        self.add({"role": "user", "content": f"The goal: {goal}\n\nThe repository's files:\n{self.list({})}"})
        errors = 0
        with open_client(self.api_key, self.endpoint) as client:
            for turn in range(1, self.config.max_turns + 1):
                reply = self.replies.read(self.ask(client, turn))
                self.add(assistant_message(reply))
                if not reply.calls:
                    self.add({"role": "user", "content": "Reply with a tool call: view, list, search or write_plan."})
                    errors += 1
                for call in reply.calls:
                    made, result = self.answer(call)
                    if made is not None:
                        self.transcript.write("end", plan=made.model_dump())
                        return made
                    self.add({"role": "tool", "tool_call_id": call.id, "content": result})
                    errors = errors + 1 if result.startswith("format error") else 0
                if errors >= FORMAT_ERRORS:
                    raise PlanFailed(
                        f"the planner sent {errors} unusable replies in a row; the last is in {self.transcript.path}"
                    )
        raise PlanFailed(
            f"the planner made {self.config.max_turns} model calls without write_plan (roles.planner.max_turns)"
        )

    def ask(self, client: OpenAI, turn: int) -> dict:
        self.transcript.write("request", turn=turn, messages=len(self.messages))
        try:
            body = call_with_retry(
                lambda: chat_request(
                    client, self.config, self.messages, self.endpoint, self.deadline, tools=self.tools
                )[0],
                endpoint=self.endpoint,
                deadline=self.deadline,
            )
        except RequestFailed as exc:
            self.transcript.write("error", error=exc.message, status=exc.status, body=exc.body)
            raise EndpointUnusable(f"the planner's model endpoint failed: {exc.message}") from None
        self.transcript.write("response", turn=turn, body=body)
        self.usage.add_reply(body)
        return body

    def answer(self, call: ToolCall) -> tuple[Plan | None, str]:
        """The plan, when the call is a valid write_plan; else the result to show the model."""
        if call.problem:
            return None, call.problem
        if call.name == "write_plan":
            try:
                return Plan.model_validate(call.arguments), ""
            except ValidationError as exc:
                problems = schema_problems(exc)
                return None, f"format error: the plan does not fit write_plan's schema ({problems}); send it again"
        if self.mcp is not None and call.name in self.mcp.tools:
            left = self.deadline - time.monotonic()
            if left < 1:
                return None, "error: the planning time is up; call write_plan now"
            return None, self.mcp.call(call.name, call.arguments, self.transcript, left)
        try:
            result, ok = getattr(self, call.name)(call.arguments), True
        except ToolError as exc:
            result, ok = f"error: {exc}", False
        except Exception as exc:  # a view_range of "²": the model is told, the plan goes on
            result, ok = f"error: {type(exc).__name__}: {exc}", False
        self.transcript.write("tool", name=call.name, arguments=call.arguments, ok=ok)
        return None, result

    def view(self, arguments: dict) -> str:
        path = _path(arguments.get("path"))
        text = git.show_file(self.top, self.head, path)
        if text is None:
            raise ToolError(f"{path}: no such file in the repository (list shows what there is)")
        lines = text.splitlines()
        if not lines:
            return f"{path}: empty file"
        start, end = view_bounds(arguments.get("view_range"), len(lines))
        return numbered(lines, start, end)

    def list(self, arguments: dict) -> str:
        path = _path(arguments.get("path") or ".")
        files = git.files_at(self.top, self.head)
        inside = [name for name in files if path == "." or name == path or name.startswith(path.rstrip("/") + "/")]
        if len(inside) > LISTING_MAX:
            return "\n".join(inside[:LISTING_MAX]) + f"\n[... {len(inside) - LISTING_MAX} more; list a folder]"
        return "\n".join(inside) or f"{path}: nothing there"

    def search(self, arguments: dict) -> str:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("pattern: a regular expression is required")
        path = _path(arguments.get("path") or ".")
        found = git.run(
            self.top, "grep", "-n", "-I", "-E", "--no-color", "-e", pattern, self.head, "--", path, check=False
        )
        if found.exit_code not in (0, 1):
            raise ToolError(f"search failed: {found.stderr.strip()[:300]}")
        text = found.output.replace(f"{self.head}:", "")
        return text[:OUTPUT_CAP] + ("\n[... cut]" if len(text) > OUTPUT_CAP else "") if text else "no match"

    def add(self, message: dict) -> None:
        self.messages.append(message)
        self.transcript.write("message", message=message)


def _path(value: object) -> str:
    """A path inside the repository, as git names it."""
    if not isinstance(value, str) or not value.strip():
        raise ToolError("path: a path relative to the repository's top is required")
    parts = Path(value.strip()).parts
    if Path(value).is_absolute() or ".." in parts:
        raise ToolError(f"{value}: paths are relative to the repository's top, inside it")
    return "/".join(parts) or "."
