"""One conversation with a model that calls tools: the loop every role runs.

The lap's agent, the planner and the judge are each a `Role`: a system prompt and a first
message, their own tools and how they run them, the tool that ends them, their limits. The
loop asks the model (ralph's retry, the shared limiter), answers every tool call a reply holds
(the protocol wants an answer to each), offers the MCP tools, counts the tokens and keeps the
limits: turns, time, replies in a row that cannot be used. As in mini-swe-agent's
agents/default.py and exceptions.py, control flows by small exceptions that carry their
payload: a role's tool raises `Finished(result)` to end the conversation, or `FormatError` to
answer a call it cannot use; the loop raises `LimitReached` and `EndpointFailed`.
`Conversation.run` returns the one that ended it, and the role makes of it what it reports.

The transcript (transcript.py) holds one JSON object a line: `start`; a `message` event for
every message as it joins the conversation (request n sent the first `messages` of them, as
its `request` event says; an assistant message whose tool calls the model wrote as text has
`"from_text": true`); `response` with the raw body (a streamed one put together, with the
number of its chunks) and its token counts (the prompt_tokens of each request, so the largest
is known; the cached ones); `retry`; `error`; `slow`, a reply the time ran out on; the role's
own (`check`, `tool`, `mcp`, `endpoint_check`); `end`, written by the role. The API key is
never written.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ralph.agents.base import Usage
from ralph.agents.model import Answer, Streaming, api_key_of, chat_request, endpoint_of, open_client
from ralph.agents.replies import (
    Reply,
    ReplyReader,
    Tokens,
    ToolCall,
    assistant_message,
    describe,
    estimate_tokens,
    tokens_of,
)
from ralph.agents.retry import RequestFailed, StillAnswering, call_with_retry
from ralph.agents.transcript import Transcript
from ralph.config.agent import AgentConfig
from ralph.show import events

if TYPE_CHECKING:
    from openai import OpenAI

    from ralph.agents.mcp_tools import McpTools

CUT_OFF = (
    "Your reply was cut off by the output token limit (finish_reason: length), so nothing in it was "
    "run. Be brief: one tool call at a time with short arguments; write a big file in parts."
)
Limit = Literal["turns", "time", "malformed", "text_only"]


class Ended(Exception):
    """Ends the conversation; the subclass says how, its payload what the role reports."""


class Finished(Ended):
    """The role's ending tool was called with what it needs: a summary, a plan, a verdict."""

    def __init__(self, result: Any):
        super().__init__("finished")
        self.result = result


class LimitReached(Ended):
    """One of the role's `ConversationLimits` ended it; `detail` says which in words."""

    def __init__(self, limit: Limit, detail: str):
        super().__init__(detail)
        self.limit, self.detail = limit, detail


class EndpointFailed(Ended):
    """The endpoint failed (down, hung, refusing the request), ralph's retries included."""

    def __init__(self, failure: RequestFailed, hint: str = ""):
        super().__init__(failure.message)
        self.failure = failure
        self.detail = failure.message + hint  # the hint: the key's variable, when it is unset


class FormatError(Exception):
    """A call that cannot be used: its text is the call's answer, and the reply counts as malformed."""


@dataclass(frozen=True)
class ConversationLimits:
    turns: int  # model calls
    seconds: float = math.inf  # for the whole conversation
    retry_seconds: float = math.inf  # for each request, its retries included
    malformed: int = 3  # replies in a row with a format error
    text_only: int = 3  # replies in a row without a tool call
    lookups: int | None = None  # MCP calls in all (None: no count)
    lookup_seconds: float = math.inf  # for all MCP calls together
    started: float = field(default_factory=time.monotonic)

    @property
    def deadline(self) -> float:
        """The time.monotonic() value at which the conversation's time is up."""
        return self.started + self.seconds


@dataclass
class Role:
    """What makes the loop the lap's agent, the planner or the judge."""

    name: str  # lap, planner, judge: the transcript's start says which, the time limit names it
    system: str
    opening: str  # the first user message: the task
    tools: list[dict]  # the role's own tools' schemas; the MCP tools come on top
    run_tool: Callable[[ToolCall, Transcript], str]  # one of its tools; may raise Finished or FormatError
    ending: str  # the tool that ends it: finish, write_plan, verdict
    nudge: str  # the answer to a reply without a tool call
    limits: ConversationLimits
    said: Callable[[str], None] | None = None  # tells the person watching the run; None: nobody watches
    start: dict = field(default_factory=dict)  # the role's own fields of the transcript's start


def empty_reply(nudge: str) -> str:
    return f"format error: your reply had neither text nor a tool call. {nudge}"


class Conversation:
    """One role's conversation: the messages, the client, the counters."""

    def __init__(
        self,
        config: AgentConfig,
        role: Role,
        transcript: Path,
        mcp: McpTools | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config, self.role, self.limits, self.mcp = config, role, role.limits, mcp
        self.sleep = sleep  # between retries; tests pass a recorder
        self.endpoint, self.api_key = endpoint_of(config), api_key_of(config)
        self.transcript = Transcript(transcript, secret=self.api_key)
        self.schemas = role.tools + (mcp.declarations if mcp else [])
        own = tuple(schema["function"]["name"] for schema in role.tools)
        self.replies = ReplyReader(own + (mcp.names if mcp else ()))
        self.messages: list[dict] = []
        self.usage = Usage()
        self.mcp_calls: Counter[str] = Counter()
        self.malformed = self.text_only = 0  # replies in a row
        self.written = 0  # of the text-only replies in a row, those that wrote tool calls as text
        self.server = ""  # the Server header of the last answer, to name it when tool calls never come
        self.streaming = Streaming()  # what the server refused of streaming, learned once

    def run(self) -> Ended:
        self.transcript.write(
            "start",
            role=self.role.name,
            model=self.config.model,
            endpoint=self.endpoint,
            max_turns=self.limits.turns,
            tools=list(self.replies.tool_names),
            **self.role.start,
        )
        self.add({"role": "system", "content": self.role.system})
        self.add({"role": "user", "content": self.role.opening})
        self.client = open_client(self.api_key, self.endpoint, self.config.request_timeout)
        try:
            for turn in range(1, self.limits.turns + 1):
                self.step(turn)
            raise LimitReached(
                "turns", f"max_turns reached ({self.limits.turns} model calls) without {self.role.ending}"
            )
        except Ended as end:
            return end
        finally:
            self.client.close()

    def step(self, turn: int) -> None:
        reply = self.replies.read(self.ask(turn))
        if not reply.calls and not reply.cut_off:
            reply = self.written_calls(reply)
        if reply.calls or reply.content.strip():
            noted = {"from_text": True} if any(call.from_text for call in reply.calls) else {}
            self.add(assistant_message(reply), **noted)
        if reply.cut_off:  # its tool calls are likely truncated: run none of them
            for call in reply.calls:
                self.answer(call, CUT_OFF)
            if not reply.calls:
                self.add({"role": "user", "content": CUT_OFF})
        elif reply.calls:
            self.run_calls(reply.calls)
        elif reply.content.strip():
            self.tally([])
            self.text_only += 1
            if self.text_only >= self.limits.text_only:
                raise LimitReached("text_only", self.no_tool_calls())
            self.add({"role": "user", "content": self.role.nudge})
        else:
            self.add({"role": "user", "content": empty_reply(self.role.nudge)})
            self.tally([empty_reply(self.role.nudge)])

    def written_calls(self, reply: Reply) -> Reply:
        """A text reply that spells tool calls: run as those calls with text_tool_calls, else
        counted, for the hint when the lap ends on text."""
        calls, rest = self.replies.written_calls(reply.content)
        if not calls:
            return reply
        if not self.config.compat.text_tool_calls:
            self.written += 1
            return reply
        return Reply(rest, calls, cut_off=False)

    def no_tool_calls(self) -> str:
        server = f" (server: {self.server})" if self.server else ""
        if self.written:
            return (
                f"the model called no tool in {self.text_only} replies: {self.config.model} at {self.endpoint}"
                f"{server} wrote its tool calls as text (a JSON object naming the tool and its arguments) in "
                f"{self.written} of them, and the server did not turn them into tool_calls (Qwen's stock chat "
                "template does this); `agent.compat.text_tool_calls: true` makes ralph accept them "
                "(docs/agents.md: Tool calls written as text)"
            )
        return (
            f"the model called no tool in {self.text_only} replies: {self.config.model} at {self.endpoint}"
            f"{server} answers in text only — the model or the server does not do tool calls as sent; "
            "see docs/agents.md's table of servers for the setting each needs (llama.cpp: --jinja; "
            "llama-cpp-python: a --chat_format that does tools; vLLM: --enable-auto-tool-choice)"
        )

    def run_calls(self, calls: list[ToolCall]) -> None:
        """Every call is answered; those after an ending call the role did not accept are not run."""
        self.text_only = self.written = 0
        problems: list[str] = []
        ended = False
        for call in calls:
            if ended:
                self.answer(call, f"not run: it came after {self.role.ending}")
                continue
            try:
                self.answer(call, self.run_call(call))
            except FormatError as error:
                problems.append(str(error))
                self.answer(call, str(error))
            else:
                ended = call.name == self.role.ending
        self.tally(problems)

    def run_call(self, call: ToolCall) -> str:
        if call.problem:
            raise FormatError(call.problem)
        if self.mcp is not None and call.name in self.mcp.tools:
            return self.look_up(call)
        if call.name != self.role.ending:
            self.say(describe(call) + (" (written as text)" if call.from_text else ""))
        return self.role.run_tool(call, self.transcript)

    def look_up(self, call: ToolCall) -> str:
        assert self.mcp is not None
        if self.limits.lookups is not None and self.mcp_calls.total() >= self.limits.lookups:
            raise FormatError(f"no more lookups (at most {self.limits.lookups}); call {self.role.ending} now")
        self.say(describe(call))
        until = min(self.limits.deadline, self.limits.started + self.limits.lookup_seconds)
        left = until - time.monotonic()
        if left < 1:
            return f"error: the time for lookups is up; call {self.role.ending} now"
        self.mcp_calls[call.name] += 1
        return self.mcp.call(call.name, call.arguments, self.transcript, left)

    def tally(self, problems: list[str]) -> None:
        """Count replies with format errors in a row; enough of them end the conversation."""
        self.malformed = self.malformed + 1 if problems else 0
        if self.malformed >= self.limits.malformed:
            raise LimitReached(
                "malformed", f"the model sent {self.malformed} malformed replies in a row; the last: {problems[-1]}"
            )

    def ask(self, turn: int) -> dict:
        if time.monotonic() >= self.limits.deadline:
            raise LimitReached(
                "time", f"the {self.role.name}'s {self.limits.seconds:g}s ran out after {turn - 1} model calls"
            )
        self.transcript.write("request", turn=turn, messages=len(self.messages))
        started = time.monotonic()
        deadline = min(self.limits.deadline, started + self.limits.retry_seconds)
        try:
            answer = call_with_retry(
                partial(self.post, self.client, deadline),
                endpoint=self.endpoint,
                deadline=deadline,
                sleep=self.sleep,
                on_retry=self.log_retry,
            )
        except RequestFailed as exc:
            self.transcript.write("error", error=exc.message, status=exc.status, body=exc.body)
            raise EndpointFailed(exc, self.key_hint(exc)) from None
        except StillAnswering as slow:  # what it wrote was spent all the same: counted, estimated
            spent = Tokens(estimate_tokens(self.asked()), slow.tokens, 0, estimated=True)
            self.count(spent)
            self.transcript.write("slow", error=str(slow), prompt_tokens=spent.prompt, completion_tokens=slow.tokens)
            raise LimitReached("time", self.ran_out(turn, deadline, slow)) from None
        tokens = tokens_of(answer.body, self.asked())
        self.count(tokens)
        self.transcript.write(
            "response",
            turn=turn,
            seconds=round(time.monotonic() - started, 3),
            prompt_tokens=tokens.prompt,
            completion_tokens=tokens.completion,
            cached_tokens=tokens.cached,
            estimated=tokens.estimated,
            chunks=answer.chunks,
            body=answer.body,
        )
        return answer.body

    def asked(self) -> dict:
        """What a request sends besides the options: what its tokens are estimated from."""
        return {"messages": self.messages, "tools": self.schemas}

    def post(self, client: OpenAI, deadline: float) -> Answer:
        answer = chat_request(client, self.config, self.messages, deadline, self.schemas, streaming=self.streaming)
        self.server = answer.server
        return answer

    def ran_out(self, turn: int, deadline: float, slow: StillAnswering) -> str:
        """A slow server, said as one: what ran out, and how fast it was answering."""
        if deadline >= self.limits.deadline:
            spent = f"the {self.role.name}'s {self.limits.seconds:g}s ran out in model call {turn}"
        else:
            spent = f"model call {turn}'s {self.limits.retry_seconds:g}s ran out"
        if not slow.answered:  # the time left, not request_timeout, ended its silence
            return (
                f"{spent} before the server answered (silent for {slow.seconds:.1f} s, less than "
                f"agent.request_timeout's {self.config.request_timeout:g} s: too soon to tell a slow server, one "
                "still reading a long prompt, from a dead one) — give it more time (docs/agents.md: Slow servers)"
            )
        return (
            f"{spent} with the model {slow} — a slow server, not a dead one: give it more time or ask for "
            "shorter replies (docs/agents.md: Slow servers)"
        )

    def key_hint(self, failure: RequestFailed) -> str:
        unauthorized = failure.status in (401, 403)
        return f" (${self.config.api_key_env} is not set)" if unauthorized and not self.api_key else ""

    def log_retry(self, attempt: int, error: str, wait: float) -> None:
        self.transcript.write("retry", attempt=attempt, error=error, wait=wait)
        self.say(f"model request failed ({error[:120]}); again in {wait:g}s")

    def count(self, tokens: Tokens) -> None:
        self.usage.requests += 1
        self.usage.prompt_tokens += tokens.prompt
        self.usage.completion_tokens += tokens.completion
        self.usage.cached_tokens += tokens.cached
        self.usage.estimated = self.usage.estimated or tokens.estimated
        self.usage.largest_prompt_tokens = max(self.usage.largest_prompt_tokens, tokens.prompt)
        if self.role.said is not None:  # the run's token counts are the watched agent's
            events.emit("model_replied", prompt_tokens=tokens.prompt, completion_tokens=tokens.completion)

    def say(self, line: str) -> None:
        if self.role.said is not None:
            self.role.said(line)

    def add(self, message: dict, **noted: object) -> None:
        self.messages.append(message)
        self.transcript.write("message", message=message, **noted)

    def answer(self, call: ToolCall, result: str) -> None:
        self.add({"role": "tool", "tool_call_id": call.id, "content": result})
