"""The built-in agent: an OpenAI-compatible chat model calling tools in the lap's worktree.

The loop asks the model, runs the tool calls it sends and answers every one of them,
until the model calls `finish`, the turns or the lap's time run out, or the model keeps
sending replies that cannot be used. Control leaves the loop by the small `LapOver`
exceptions, each carrying what the AgentResult needs.

`<log_dir>/transcript.jsonl` holds one JSON object a line: `start`; a `message` event for
every message as it joins the conversation (request n sent the first `messages` of them,
as its `request` event says); `response` with the raw body and its token counts (the
prompt_tokens of each request, so the largest is known); `retry`; `error`; `check`; `end`.
The API key is never written.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ralph.agents import limiter
from ralph.agents.base import AgentResult, LapTask, Usage
from ralph.agents.replies import ReplyReader, ToolCall, assistant_message
from ralph.agents.retry import RequestFailed, call_with_retry
from ralph.agents.tools import TOOL_NAMES, TOOL_SCHEMAS, Tools
from ralph.agents.transcript import Transcript
from ralph.config import AgentConfig
from ralph.errors import EndpointUnusable
from ralph.show import events
from ralph.show.ui import one_line

if TYPE_CHECKING:
    from openai import OpenAI

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
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
EMPTY_REPLY = "format error: your reply had neither text nor a tool call. " + USE_A_TOOL
CUT_OFF = (
    "Your reply was cut off by the output token limit (finish_reason: length), so nothing in it was "
    "run. Be brief: one tool call at a time with short arguments; write a big file in parts."
)
FIX_REQUEST = "Not finished: {failure}\nFix this, then call finish again."
PREFLIGHT = "ralph endpoint check: reply with the word ready."
PREFLIGHT_TOKENS = 32
FORMAT_ERRORS_IN_A_ROW = 3  # then the model is not usable for this lap: outcome "error"
TEXT_REPLIES_IN_A_ROW = 3  # replies without a tool call, each answered with USE_A_TOOL; then "error"
CHARS_PER_TOKEN = 4  # the estimate when a server reports no usage
FAILURE_TEXT_CAP = 16_000


class LapOver(Exception):
    """Ends the lap; the subclass says how, the payload says what to report."""

    outcome = "ok"

    def __init__(self, detail: str = "", summary: str = ""):
        super().__init__(detail)
        self.detail, self.summary = detail, summary


class Finished(LapOver):
    pass


class TurnsUsedUp(LapOver):
    pass  # still "ok": the lap commits and its checks judge the partial work


class DeadlinePassed(LapOver):
    outcome = "timeout"


class Unusable(LapOver):
    outcome = "error"  # the model kept sending replies that cannot be used


class EndpointFailed(Unusable):
    """The endpoint failed (down, hung, refusing the request): the run may wait it out."""


class OpenAIAgent:
    kind = "openai"

    def __init__(self, config: AgentConfig, *, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self.sleep = sleep  # between retries; tests pass a recorder
        self.endpoint = endpoint_of(config)

    def check_endpoint(self, deadline: float) -> None:
        """One cheap request with the lap's tools, before the run starts: the endpoint is
        reachable, answers, and does not refuse the request's shape. Text in answer is fine
        (laps find out whether the model calls tools)."""
        api_key = os.environ.get(self.config.api_key_env)
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": PREFLIGHT}]
        with open_client(api_key, self.endpoint) as client:
            try:
                call_with_retry(
                    lambda: chat_request(client, self.config, messages, self.endpoint, deadline, PREFLIGHT_TOKENS),
                    endpoint=self.endpoint,
                    deadline=deadline,
                    sleep=self.sleep,
                )
            except RequestFailed as exc:
                unauthorized = exc.status in (401, 403) and not api_key
                hint = f" (${self.config.api_key_env} is not set)" if unauthorized else ""
                end = f" — the server said: {one_line(exc.body, 600)}" if exc.body else ""
                raise EndpointUnusable(
                    f"the model endpoint cannot be used, so no run was started: model "
                    f"{self.config.model}: {exc.message}{hint}{end}"
                ) from None

    def run_lap(self, task: LapTask) -> AgentResult:
        started = time.monotonic()
        lap = _Lap(self, task, deadline=started + task.timeout)
        end = lap.run()
        lap.transcript.write(
            "end", outcome=end.outcome, summary=end.summary, detail=end.detail, usage=lap.usage.model_dump()
        )
        return AgentResult(
            kind=self.kind,
            outcome=end.outcome,
            duration_s=round(time.monotonic() - started, 3),
            summary=end.summary,
            detail=end.detail,
            usage=lap.usage,
            endpoint_failed=isinstance(end, EndpointFailed),
            mcp_calls=dict(lap.mcp_calls),
        )


class _Lap:
    """One lap's conversation: the messages, the client, the counters."""

    def __init__(self, agent: OpenAIAgent, task: LapTask, deadline: float):
        self.config, self.task, self.deadline = agent.config, task, deadline
        self.endpoint, self.sleep = agent.endpoint, agent.sleep
        self.api_key = os.environ.get(self.config.api_key_env)
        self.transcript = Transcript(task.log_dir / "transcript.jsonl", secret=self.api_key)
        self.said = events.Lines("tool_called")  # what it does, for the person watching
        self.client = open_client(self.api_key, self.endpoint, self.config.request_timeout)
        self.tools = Tools(task.worktree, task.log_dir, task.env, deadline, task.jail)
        self.mcp = task.mcp
        self.schemas = TOOL_SCHEMAS + (self.mcp.declarations if self.mcp else [])
        self.mcp_calls: Counter[str] = Counter()
        self.messages: list[dict] = []
        self.replies = ReplyReader(TOOL_NAMES + (self.mcp.names if self.mcp else ()))
        self.usage = Usage()
        self.format_errors = 0  # in a row
        self.text_replies = 0  # in a row
        self.server = ""  # the Server header of the last answer, to name it when tool calls never come
        self.fixes_left = self.config.fix_attempts

    def run(self) -> LapOver:
        self.transcript.write(
            "start",
            model=self.config.model,
            endpoint=self.endpoint,
            lap=self.task.lap,
            max_turns=self.config.max_turns,
            timeout=self.task.timeout,
            tools=list(self.replies.tool_names),
        )
        self.add({"role": "system", "content": SYSTEM_PROMPT + (MCP_NOTE if self.mcp else "")})
        self.add({"role": "user", "content": self.task.prompt})
        try:
            for turn in range(1, self.config.max_turns + 1):
                self.step(turn)
            raise TurnsUsedUp(f"max_turns reached ({self.config.max_turns} model calls) without finish")
        except LapOver as end:
            return end
        finally:
            self.client.close()

    def step(self, turn: int) -> None:
        reply = self.replies.read(self.ask(turn))
        if reply.calls or reply.content.strip():
            self.add(assistant_message(reply))
        if reply.cut_off:  # its tool calls are likely truncated: run none of them
            for call in reply.calls:
                self.answer(call, CUT_OFF)
            if not reply.calls:
                self.add({"role": "user", "content": CUT_OFF})
        elif reply.calls:
            self.run_calls(reply.calls)
        elif reply.content.strip():
            self.tally([])
            self.text_replies += 1
            if self.text_replies >= TEXT_REPLIES_IN_A_ROW:
                raise Unusable(self.no_tool_calls())
            self.add({"role": "user", "content": USE_A_TOOL})
        else:
            self.add({"role": "user", "content": EMPTY_REPLY})
            self.tally([EMPTY_REPLY])

    def no_tool_calls(self) -> str:
        server = f" (server: {self.server})" if self.server else ""
        return (
            f"the model called no tool in {self.text_replies} replies: {self.config.model} at {self.endpoint}"
            f"{server} answers in text only — the model or the server does not do tool calls as sent; "
            "see the README's table of servers for the setting each needs (llama.cpp: --jinja; "
            "llama-cpp-python: a --chat_format that does tools; vLLM: --enable-auto-tool-choice)"
        )

    def run_calls(self, calls: list[ToolCall]) -> None:
        self.text_replies = 0
        finished = False
        for call in calls:
            if finished:
                self.answer(call, "not run: it came after finish")
            elif call.problem:
                self.answer(call, call.problem)
            elif call.name == "finish":
                self.finish(call)  # raises Finished unless the checks failed
                finished = True
            elif self.mcp and call.name in self.mcp.tools:
                self.said(_describe(call))
                self.answer(call, self.call_mcp(call))
            else:
                self.said(_describe(call))
                self.answer(call, self.tools.run(call.name, call.arguments))
        self.tally([call.problem for call in calls if call.problem])

    def call_mcp(self, call: ToolCall) -> str:
        assert self.mcp is not None
        remaining = self.deadline - time.monotonic()
        if remaining < 1:
            return "error: the lap's time is up; call finish now"
        self.mcp_calls[call.name] += 1
        return self.mcp.call(call.name, call.arguments, self.transcript, remaining)

    def finish(self, call: ToolCall) -> None:
        summary = str(call.arguments.get("summary") or "").strip()
        self.said(f"finish ({call.arguments.get('status', 'done')}): {summary[:100]}")
        if call.arguments.get("status") == "blocked":
            raise Finished(summary=f"blocked: {summary}")  # checks cannot unblock it
        if self.task.check and self.fixes_left > 0:
            failure = self.task.check()
            self.transcript.write("check", failure=failure)
            if failure:
                self.said(
                    f"not finished, shown to the agent: {failure.splitlines()[0][:100]}",
                )
                self.fixes_left -= 1
                self.answer(call, FIX_REQUEST.format(failure=failure[-FAILURE_TEXT_CAP:]))
                return
        raise Finished(summary=summary)

    def tally(self, problems: list[str]) -> None:
        """Count replies with format errors in a row; enough of them end the lap."""
        self.format_errors = self.format_errors + 1 if problems else 0
        if self.format_errors >= FORMAT_ERRORS_IN_A_ROW:
            raise Unusable(f"the model sent {self.format_errors} malformed replies in a row; the last: {problems[-1]}")

    def ask(self, turn: int) -> dict:
        if time.monotonic() >= self.deadline:
            raise DeadlinePassed(f"the lap's {self.task.timeout:g}s ran out after {turn - 1} model calls")
        self.transcript.write("request", turn=turn, messages=len(self.messages))
        started = time.monotonic()
        try:
            body = call_with_retry(
                self.post, endpoint=self.endpoint, deadline=self.deadline, sleep=self.sleep, on_retry=self.log_retry
            )
        except RequestFailed as exc:
            # The endpoint's failure, even when it used up the lap's time retrying: an error lap
            # (not judged, not stagnation), as the README promises, never a red one.
            self.transcript.write("error", error=exc.message, status=exc.status, body=exc.body)
            whole = f"\n\nthe server's whole answer (HTTP {exc.status}):\n{exc.body}" if exc.body else ""
            raise EndpointFailed(exc.message + self.key_hint(exc) + whole) from None
        self.count_usage(turn, body, time.monotonic() - started)
        return body

    def post(self) -> dict:
        body, self.server = chat_request(
            self.client, self.config, self.messages, self.endpoint, self.deadline, tools=self.schemas
        )
        return body

    def key_hint(self, failure: RequestFailed) -> str:
        unauthorized = failure.status in (401, 403)
        return f" (${self.config.api_key_env} is not set)" if unauthorized and not self.api_key else ""

    def log_retry(self, attempt: int, error: str, wait: float) -> None:
        self.transcript.write("retry", attempt=attempt, error=error, wait=wait)
        self.said(f"model request failed ({error[:120]}); again in {wait:g}s")

    def count_usage(self, turn: int, body: dict, seconds: float) -> None:
        reported = body["usage"] if isinstance(body.get("usage"), dict) else {}
        prompt, completion = reported.get("prompt_tokens"), reported.get("completion_tokens")
        if not (isinstance(prompt, int) and isinstance(completion, int)):
            estimated = True
            prompt = _estimate_tokens({"messages": self.messages, "tools": self.schemas})
            completion = _estimate_tokens(body.get("choices"))
        else:
            estimated = False
        self.usage.requests += 1
        self.usage.prompt_tokens += prompt
        self.usage.completion_tokens += completion
        self.usage.estimated = self.usage.estimated or estimated
        self.usage.largest_prompt_tokens = max(self.usage.largest_prompt_tokens, prompt)
        events.emit("model_replied", prompt_tokens=prompt, completion_tokens=completion)
        self.transcript.write(
            "response",
            turn=turn,
            seconds=round(seconds, 3),
            prompt_tokens=prompt,
            completion_tokens=completion,
            estimated=estimated,
            body=body,
        )

    def add(self, message: dict) -> None:
        self.messages.append(message)
        self.transcript.write("message", message=message)

    def answer(self, call: ToolCall, result: str) -> None:
        self.add({"role": "tool", "tool_call_id": call.id, "content": result})


def open_client(api_key: str | None, endpoint: str, timeout: float | None = None) -> OpenAI:
    """The client every role asks its model with: ralph retries itself (`call_with_retry`), and a
    local server may want no key, though the client insists on one. openai is imported here,
    when a model is asked, not when ralph starts: a run of an agent CLI never pays for it."""
    from openai import OpenAI

    client = OpenAI(api_key=api_key or "not-needed", base_url=endpoint, max_retries=0)
    return client if timeout is None else client.with_options(timeout=timeout)


def endpoint_of(config: AgentConfig) -> str:
    """Where a role's requests go: its base_url, else $OPENAI_BASE_URL, else OpenAI's."""
    return config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT


def chat_request(
    client: OpenAI,
    config: AgentConfig,
    messages: list[dict],
    endpoint: str,
    deadline: float,
    max_tokens: int | None = None,
    tools: list[dict] = TOOL_SCHEMAS,
) -> tuple[dict, str]:
    """One request; the raw JSON, not the typed model (local servers send shapes the types do
    not describe, and the transcript should hold what was received), and the Server header."""
    limiter.shared.wait_turn()
    timeout = max(0.1, min(config.request_timeout, deadline - time.monotonic()))
    options = dict(request_options(config, tools), messages=messages)  # plain dicts, as the wire has them
    if max_tokens is not None:
        options[config.compat.max_tokens_field] = max_tokens
    response = client.chat.completions.with_raw_response.create(**options, timeout=timeout)
    try:
        body = response.http_response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise RequestFailed(
            f"model request to {endpoint} got an answer that is not a chat "
            f"completion: {response.http_response.text[:200]!r}"
        )
    return body, response.http_response.headers.get("server", "")


def request_options(config: AgentConfig, tools: list[dict] = TOOL_SCHEMAS) -> dict:
    """What every request carries besides the messages, in the shape every mainstream server
    accepts: tool_choice said (some servers leave the tools out of the prompt without it), an
    output limit (a degenerate reply otherwise runs to the end of the context)."""
    options: dict[str, object] = {
        "model": config.model,
        "tools": tools,
        "tool_choice": "auto",
        config.compat.max_tokens_field: config.max_output_tokens,
    }
    if config.temperature is not None:
        options["temperature"] = config.temperature
    return options


def _estimate_tokens(payload: object) -> int:
    return max(1, len(json.dumps(payload, ensure_ascii=False)) // CHARS_PER_TOKEN)


def _describe(call: ToolCall) -> str:
    """One short line for a person watching: `bash: pytest -q`, `str_replace calc.py`."""
    if call.name == "bash":
        command = " ".join(str(call.arguments.get("command", "")).split())
        return f"bash: {command[:100]}{'…' if len(command) > 100 else ''}"
    if call.name.startswith("mcp__"):
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        return f"{call.name} {arguments[:100]}{'…' if len(arguments) > 100 else ''}"
    return f"{call.arguments.get('command', call.name)} {call.arguments.get('path', '')}".strip()
