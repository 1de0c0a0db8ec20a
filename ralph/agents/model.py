"""Asking a model: the client, one chat request, and the cheap request that checks an endpoint.

Every role (the lap's agent, the planner, the judge) asks its model through these, in the
shape every mainstream OpenAI-compatible server accepts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ralph.agents import limiter
from ralph.agents.retry import RequestFailed, call_with_retry
from ralph.config.agent import AgentConfig

if TYPE_CHECKING:
    from openai import OpenAI

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
PREFLIGHT = "ralph endpoint check: reply with the word ready."


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


def chat_request(
    client: OpenAI,
    config: AgentConfig,
    messages: list[dict],
    deadline: float,
    tools: list[dict],
    max_tokens: int | None = None,
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
            f"model request to {endpoint_of(config)} got an answer that is not a chat "
            f"completion: {response.http_response.text[:200]!r}"
        )
    return body, response.http_response.headers.get("server", "")


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
) -> None:
    """One cheap request with a role's tools, before its work starts: the endpoint is reachable,
    answers, and does not refuse the request's shape (text in answer is fine). Raises
    RequestFailed; the role says what that means for the run. `deadline`: a time.monotonic() value."""
    with open_client(api_key_of(config), endpoint_of(config)) as client:
        call_with_retry(
            lambda: chat_request(client, config, messages, deadline, tools, max_tokens),
            endpoint=endpoint_of(config),
            deadline=deadline,
            sleep=sleep,
            attempts=attempts,
        )
