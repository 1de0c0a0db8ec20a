"""Asking a model: the client, one chat request, and the cheap request that checks an endpoint.

Every role (the lap's agent, the planner, the judge) asks its model through these, in the
shape every mainstream OpenAI-compatible server accepts. A request streams (stream.py), so
that silence, not a long reply, is what `agent.request_timeout` ends; a server that refuses
to stream is asked in one piece.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ralph.agents import limiter, stream
from ralph.agents.base import Usage
from ralph.agents.replies import tokens_of
from ralph.agents.retry import NoAnswer, RequestFailed, StillAnswering, call_with_retry
from ralph.config.agent import AgentConfig

if TYPE_CHECKING:
    import openai
    from openai import OpenAI

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
PREFLIGHT = "ralph endpoint check: reply with the word ready."
REFUSALS = {400, 404, 415, 422, 500, 501}  # how servers say no to a field they do not take


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


def api_key_of(config: AgentConfig) -> str | None:
    return os.environ.get(config.api_key_env)


@dataclass
class Streaming:
    """Whether a conversation's requests stream, and ask for usage in the stream: yes, until
    the server refuses one or the other (older llama-servers: "Cannot use tools with stream"),
    which is then left out for the rest of the conversation."""

    stream: bool = True
    usage: bool = True

    def gives_up(self, refusal: openai.APIStatusError) -> bool:
        """Whether `refusal` was of what streaming adds to the request, now left out."""
        if not self.stream or refusal.status_code not in REFUSALS:
            return False
        said = refusal.response.text
        if self.usage and "stream_options" in said:
            self.usage = False
        elif re.search(r"\bstream", said, re.IGNORECASE):
            self.stream = False
        else:
            return False
        return True


@dataclass(frozen=True)
class Answer:
    body: dict  # the raw JSON (a streamed one put together), not the typed model: local servers send
    # shapes the types do not describe, and the transcript should hold what was received
    server: str  # the Server header, to name the server when tool calls never come
    chunks: int | None = None  # streamed: the chunks it came in; None: in one piece


def chat_request(
    client: OpenAI,
    config: AgentConfig,
    messages: list[dict],
    deadline: float,
    tools: list[dict],
    max_tokens: int | None = None,
    streaming: Streaming | None = None,
) -> Answer:
    """One request, streamed unless the server refuses it (then asked again at once, in one piece)."""
    import openai

    streaming = Streaming() if streaming is None else streaming
    options = dict(request_options(config, tools), messages=messages)  # plain dicts, as the wire has them
    if max_tokens is not None:
        options[config.compat.max_tokens_field] = max_tokens
    while True:
        limiter.shared.wait_turn()
        try:
            if streaming.stream:
                return _streamed(client, config, options, deadline, streaming)
            return _whole(client, config, options, deadline)
        except openai.APIStatusError as refusal:
            if not streaming.gives_up(refusal):
                raise


def _silence(config: AgentConfig, deadline: float) -> tuple[float, bool]:
    """How long the answer may stay silent, and whether the deadline clipped that to less than
    request_timeout: a silence that runs out then is the time running out, not an endpoint
    failing (a CPU server may read a long prompt for longer than what was left)."""
    left = deadline - time.monotonic()
    return max(0.1, min(config.request_timeout, left)), left < config.request_timeout


def _whole(client: OpenAI, config: AgentConfig, options: dict, deadline: float) -> Answer:
    import openai

    started, (timeout, clipped) = time.monotonic(), _silence(config, deadline)
    try:
        response = client.chat.completions.with_raw_response.create(**options, timeout=timeout)
    except openai.APITimeoutError:
        if clipped:
            raise StillAnswering(time.monotonic() - started, 0, 0.0, answered=False) from None
        raise NoAnswer(timeout, streamed=False) from None
    return Answer(_completion(config, response.http_response.text), response.http_response.headers.get("server", ""))


def _streamed(client: OpenAI, config: AgentConfig, options: dict, deadline: float, streaming: Streaming) -> Answer:
    """The reply as it comes: silence is bounded by request_timeout, the whole by the deadline."""
    import openai

    started, (silence, clipped) = time.monotonic(), _silence(config, deadline)
    usage: dict[str, Any] = {"stream_options": {"include_usage": True}} if streaming.usage else {}
    reading = stream.Reading(started=started, deadline=deadline, silence=silence, clipped=clipped)
    create = client.chat.completions.with_streaming_response.create
    try:
        with create(**options, **usage, stream=True, timeout=silence) as response:
            server = response.headers.get("server", "")
            if "text/event-stream" not in response.headers.get("content-type", ""):  # answered in one piece
                text = "".join(reading.lines(response.iter_text()))
                return Answer(_completion(config, text), server)
            assembly = reading.read(response.iter_lines())
    except openai.APITimeoutError:  # not even the answer's headers in time
        if clipped:
            raise reading.still_answering() from None
        raise NoAnswer(silence, streamed=True) from None
    except stream.ErrorEvent as said:
        raise RequestFailed(f"model request to {endpoint_of(config)} failed: {said}", None, said.body) from None
    return Answer(assembly.body(), server, assembly.chunks)


def _completion(config: AgentConfig, text: str) -> dict:
    body = stream.loads(text)
    if not isinstance(body, dict):
        raise RequestFailed(
            f"model request to {endpoint_of(config)} got an answer that is not a chat completion: {text[:200]!r}"
        )
    return body


def request_options(config: AgentConfig, tools: list[dict]) -> dict:
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


def preflight(
    config: AgentConfig,
    messages: list[dict],
    tools: list[dict],
    *,
    deadline: float,
    max_tokens: int,
    attempts: int,
    sleep: Callable[[float], None] = time.sleep,
) -> Usage:
    """One cheap request with a role's tools, before its work starts: the endpoint is reachable,
    answers, and does not refuse the request's shape (text in answer is fine). Raises
    RequestFailed; the role says what that means for the run. `deadline`: a time.monotonic()
    value. Its tokens, for the role to count."""
    with open_client(api_key_of(config), endpoint_of(config)) as client:
        try:
            answer = call_with_retry(
                lambda: chat_request(client, config, messages, deadline, tools, max_tokens),
                endpoint=endpoint_of(config),
                deadline=deadline,
                sleep=sleep,
                attempts=attempts,
            )
        except StillAnswering as slow:
            raise RequestFailed(f"model request to {endpoint_of(config)} timed out: {slow}") from None
    tokens = tokens_of(answer.body, {"messages": messages, "tools": tools})
    return Usage(
        requests=1,
        prompt_tokens=tokens.prompt,
        completion_tokens=tokens.completion,
        cached_tokens=tokens.cached,
        estimated=tokens.estimated,
    )
