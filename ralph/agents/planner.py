"""The planner's role: a model looks at the committed tree, read only, and writes a plan.

Its conversation is the one loop (conversation.py) with the planner's tools: view a file,
list a folder, search the text of the tree at HEAD (through git: nothing it does can write,
and an untracked `.env` is not there to read), and `write_plan`, which ends it once its
arguments fit `Plan`. `ralph plan` (commands/plan.py) shows the plan and writes TODO.md.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from ralph import git
from ralph.agents.base import Usage
from ralph.agents.conversation import (
    Conversation,
    ConversationLimits,
    Ended,
    EndpointFailed,
    Finished,
    FormatError,
    LimitReached,
    Role,
)
from ralph.agents.mcp_tools import McpTools
from ralph.agents.replies import ToolCall, schema_problems
from ralph.agents.tools import ToolError, function_schema, numbered, view_bounds
from ralph.agents.transcript import Transcript
from ralph.config.agent import AgentConfig
from ralph.errors import EndpointUnusable, RalphError
from ralph.show.text import printable

PLAN_SECONDS = 900  # the whole planning loop
FORMAT_ERRORS = 3  # malformed replies (or replies without a tool call) in a row, then give up
OUTPUT_CAP = 16 * 1024
LISTING_MAX = 400
THE_JOB = """\
You plan a long coding job that ralph will run as a series of fresh agent laps. Each lap
starts with no memory, reads TODO.md, does one slice, and is judged by the repository's own
checks."""
GOOD_ITEMS = """\
Each item is one line, a slice a single lap can finish and verify (a test that passes, a file
that exists, a command that succeeds), small enough that a lap is minutes of work, not hours.
Name files and tests where you can. Write each item as a goal on the code ("Implement sub in
calc.py so tests/test_calc.py::test_sub passes"), never as a change to the tests: an item that
asks to rewrite or delete a test lets the lap change it, so write one only where the job is
to change tests."""
SYSTEM_PROMPT = f"""\
{THE_JOB} Look at the repository with the tools (view, list, search: the committed tree, read
only), weigh two or three approaches, then call write_plan once with:
- approaches: each with a name, pros and cons;
- recommendation: which approach and why, in a few sentences;
- todo: the checklist for the recommended approach, in order.
{GOOD_ITEMS}"""


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
        """Each item on one line, without escape codes or control characters: whoever wrote it
        (a model, an agent CLI, an edited plan.json), it goes to TODO.md and to people's screens."""
        cleaned = [" ".join(printable(item).split()) for item in items]
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


class PlanFailed(RalphError):
    """The planner ended without a valid plan."""


class Planner:
    """One planning conversation over the committed tree at `head`."""

    def __init__(self, config: AgentConfig, top: Path, head: str, folder: Path, mcp: McpTools | None = None):
        self.config, self.top, self.head, self.folder = config, top, head, folder
        self.mcp = mcp  # MCP tools to look things up with (mcp.roles has planner)
        self.usage = Usage()

    def run(self, goal: str) -> Plan:
        conversation = Conversation(self.config, self.role(goal), self.folder / "transcript.jsonl", self.mcp)
        end = conversation.run()
        self.usage = conversation.usage
        if isinstance(end, Finished):
            conversation.transcript.write("end", plan=end.result.model_dump(), usage=self.usage.model_dump())
            return end.result
        conversation.transcript.write("end", failed=str(end), usage=self.usage.model_dump())
        raise self.failure(end, conversation.transcript.path)

    def role(self, goal: str) -> Role:
        return Role(
            name="planner",
            system=SYSTEM_PROMPT + (LOOKUP_NOTE if self.mcp else ""),
            opening=f"The goal: {goal}\n\nThe repository's files:\n{self.list({})}",
            tools=PLAN_TOOLS,
            run_tool=self.run_tool,
            ending="write_plan",
            nudge="Reply with a tool call: view, list, search or write_plan.",
            limits=ConversationLimits(
                turns=self.config.max_turns, seconds=PLAN_SECONDS, malformed=FORMAT_ERRORS, text_only=FORMAT_ERRORS
            ),
            start={"goal": goal},
        )

    def failure(self, end: Ended, transcript: Path) -> RalphError:
        if isinstance(end, EndpointFailed):
            return EndpointUnusable(f"the planner's model endpoint failed: {end.failure.message}")
        assert isinstance(end, LimitReached)
        if end.limit == "turns":
            return PlanFailed(
                f"the planner made {self.config.max_turns} model calls without write_plan (roles.planner.max_turns)"
            )
        if end.limit == "time":
            return PlanFailed(f"{end.detail}, without write_plan")
        return PlanFailed(f"the planner sent {FORMAT_ERRORS} unusable replies in a row; the last is in {transcript}")

    def run_tool(self, call: ToolCall, transcript: Transcript) -> str:
        """A look at the tree, or the plan; a tool's error is the model's to read, the plan goes on."""
        if call.name == "write_plan":
            try:
                made = Plan.model_validate(call.arguments)
            except ValidationError as exc:
                problems = schema_problems(exc)
                raise FormatError(
                    f"format error: the plan does not fit write_plan's schema ({problems}); send it again"
                ) from None
            raise Finished(made)
        looks = {"view": self.view, "list": self.list, "search": self.search}
        try:
            result, ok = looks[call.name](call.arguments), True
        except ToolError as exc:
            result, ok = f"error: {exc}", False
        except Exception as exc:  # a view_range of "²": the model is told, the plan goes on
            result, ok = f"error: {type(exc).__name__}: {exc}", False
        transcript.write("tool", name=call.name, arguments=call.arguments, ok=ok)
        return result

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


def _path(value: object) -> str:
    """A path inside the repository, as git names it."""
    if not isinstance(value, str) or not value.strip():
        raise ToolError("path: a path relative to the repository's top is required")
    parts = Path(value.strip()).parts
    if Path(value).is_absolute() or ".." in parts:
        raise ToolError(f"{value}: paths are relative to the repository's top, inside it")
    return "/".join(parts) or "."
