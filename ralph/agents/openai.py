"""The built-in agent: an OpenAI-compatible chat model calling tools in the lap's workspace.

A lap is a `Conversation` (conversation.py) in the lap's role: its tools are bash, the
editor and finish, and finish runs the repository's checks while fix_attempts are left (red
ones go back to the model). How the conversation ended is the lap's outcome: finished, or out
of turns, "ok" (its checks judge the partial work); out of time, "timeout"; replies that
cannot be used, or an endpoint that failed, "error". Its transcript is
`<log_dir>/transcript.jsonl`. The endpoint check's tokens, spent before any lap, are counted
in the first lap this agent runs (its transcript's `endpoint_check` says how many).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ralph.agents.base import AgentResult, LapTask, Usage
from ralph.agents.conversation import (
    Conversation,
    ConversationLimits,
    Ended,
    EndpointFailed,
    Finished,
    LimitReached,
    Role,
)
from ralph.agents.model import PREFLIGHT, api_key_of, endpoint_of, preflight
from ralph.agents.replies import ToolCall
from ralph.agents.retry import MAX_ATTEMPTS, RequestFailed
from ralph.agents.tools import TOOL_SCHEMAS, Tools
from ralph.agents.transcript import Transcript
from ralph.config.agent import AgentConfig
from ralph.errors import EndpointUnusable
from ralph.show import events
from ralph.show.ui import one_line

SYSTEM_PROMPT = """\
You are one lap of ralph, a loop that runs a long coding job as a series of fresh sessions.
You work alone in a git worktree, your current directory; nobody will answer questions.
Act only through the tools: bash to run commands, str_replace_based_edit_tool to view and
edit files. Do not commit: when you call finish, ralph commits your edits and runs the
repository's checks. Call finish when your slice is done, or with status "blocked" when you
cannot make progress."""
MCP_NOTE = """
Tools named mcp__<server>__<tool> look things up outside the repository (documentation,
issues, the web): read-only, their results are not part of your worktree."""
USE_A_TOOL = "Reply with a tool call: bash or str_replace_based_edit_tool to work, finish when you are done."
FIX_REQUEST = "Not finished: {failure}\nFix this, then call finish again."
PREFLIGHT_TOKENS = 32
FAILURE_TEXT_CAP = 16_000
# How a limit ends a lap: out of turns, its checks judge the partial work; unusable replies: not judged
OUTCOMES = {"turns": "ok", "time": "timeout", "malformed": "error", "text_only": "error"}


class OpenAIAgent:
    kind = "openai"

    def __init__(self, config: AgentConfig, *, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self.sleep = sleep  # between retries; tests pass a recorder
        self.endpoint = endpoint_of(config)
        self.unbilled: Usage | None = None  # the endpoint check's tokens, for the next lap to count

    def check_endpoint(self, deadline: float) -> None:
        """One cheap request with the lap's tools, before the run starts: the endpoint is
        reachable, answers, and does not refuse the request's shape. Text in answer is fine
        (laps find out whether the model calls tools)."""
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": PREFLIGHT}]
        try:
            self.unbilled = preflight(
                self.config,
                messages,
                TOOL_SCHEMAS,
                deadline=deadline,
                max_tokens=PREFLIGHT_TOKENS,
                attempts=MAX_ATTEMPTS,
                sleep=self.sleep,
            )
        except RequestFailed as exc:
            unauthorized = exc.status in (401, 403) and not api_key_of(self.config)
            hint = f" (${self.config.api_key_env} is not set)" if unauthorized else ""
            end = f" — the server said: {one_line(exc.body, 600)}" if exc.body else ""
            raise EndpointUnusable(
                f"the model endpoint cannot be used, so no run was started: model "
                f"{self.config.model}: {exc.message}{hint}{end}"
            ) from None

    def run_lap(self, task: LapTask) -> AgentResult:
        started = time.monotonic()
        lap = _Lap(self.config, task)
        conversation = Conversation(
            self.config, lap.role(), task.log_dir / "transcript.jsonl", task.mcp, sleep=self.sleep
        )
        end = conversation.run()
        outcome, summary, detail = _outcome(end)
        usage = conversation.usage
        if self.unbilled is not None:
            checked, self.unbilled = self.unbilled, None
            usage = usage.with_tokens_of(checked)
            conversation.transcript.write("endpoint_check", usage=checked.model_dump())
        conversation.transcript.write("end", outcome=outcome, summary=summary, detail=detail, usage=usage.model_dump())
        return AgentResult(
            kind=self.kind,
            outcome=outcome,
            duration_s=round(time.monotonic() - started, 3),
            summary=summary,
            detail=detail,
            usage=usage,
            endpoint_failed=isinstance(end, EndpointFailed),
            mcp_calls=dict(conversation.mcp_calls),
        )


class _Lap:
    """The lap's own part of its conversation: the workspace's tools, and finish with the checks."""

    def __init__(self, config: AgentConfig, task: LapTask):
        self.task = task
        self.limits = ConversationLimits(turns=config.max_turns, seconds=task.timeout)
        self.tools = Tools(task.workspace, task.log_dir, task.env, self.limits.deadline, task.jail)
        self.said = events.Lines("tool_called")  # what it does, for the person watching
        self.fixes_left = config.fix_attempts

    def role(self) -> Role:
        return Role(
            name="lap",
            system=SYSTEM_PROMPT + (MCP_NOTE if self.task.mcp else ""),
            opening=self.task.prompt,
            tools=TOOL_SCHEMAS,
            run_tool=self.run_tool,
            ending="finish",
            nudge=USE_A_TOOL,
            limits=self.limits,
            said=self.said,
            start={"lap": self.task.lap, "timeout": self.task.timeout},
        )

    def run_tool(self, call: ToolCall, transcript: Transcript) -> str:
        if call.name == "finish":
            return self.finish(call, transcript)
        return self.tools.run(call.name, call.arguments)

    def finish(self, call: ToolCall, transcript: Transcript) -> str:
        """Finished, unless the checks are red and a fix attempt is left: then what to fix."""
        summary = str(call.arguments.get("summary") or "").strip()
        self.said(f"finish ({call.arguments.get('status', 'done')}): {summary[:100]}")
        if call.arguments.get("status") == "blocked":
            raise Finished(f"blocked: {summary}")  # checks cannot unblock it
        if self.task.check and self.fixes_left > 0:
            failure = self.task.check()
            transcript.write("check", failure=failure)
            if failure:
                self.said(f"not finished, shown to the agent: {failure.splitlines()[0][:100]}")
                self.fixes_left -= 1
                return FIX_REQUEST.format(failure=failure[-FAILURE_TEXT_CAP:])
        raise Finished(summary)


def _outcome(end: Ended) -> tuple[str, str, str]:
    """The lap's outcome, summary and detail, from how its conversation ended."""
    if isinstance(end, Finished):
        return "ok", end.result, ""
    if isinstance(end, LimitReached):
        return OUTCOMES[end.limit], "", end.detail
    assert isinstance(end, EndpointFailed)
    # The endpoint's failure, even when it used up the lap's time retrying: an error lap (not
    # judged, not stagnation), as docs/agents.md promises (The built-in agent), never a red one.
    failure = end.failure
    whole = f"\n\nthe server's whole answer (HTTP {failure.status}):\n{failure.body}" if failure.body else ""
    return "error", "", end.detail + whole
