"""The OpenAI Responses dialect of the test model server (model_apis.py): the events of one streamed
answer to `POST /v1/responses`, as Codex CLI reads them. Rendering only: the server chooses the
step and the usage, records the request and writes each (event, data) as `event: NAME` and
`data: JSON` lines of server-sent events.

A step is `{"call": "<shell command>"}`, one call of the shell tool the request offers, in that
tool's own argument shape, or `{"text": "..."}`, a final assistant message. For the server's
choice: `offered(body)` (Codex's gpt-6 models get no top-level `tools`: theirs come in an
`additional_tools` input item), `has_tool_result(body)` and `user_text(body)` (for counting a
prompt's copies).

Checked against Codex CLI 0.171.0 (`codex exec --json`, a provider by `-c model_providers.*`):
its default model (code mode, the `exec` tool) and -m gpt-5, gpt-5-codex, gpt-5.1-codex-max, o3,
gpt-4.1 (`exec_command`) each ran the call and ended the turn; its `turn.completed` usage is the
sum of the `response.completed` usages. opencode 1.18.33 with `-m openai/gpt-5` and
OPENAI_BASE_URL (`bash`) too."""

from __future__ import annotations

import json
import time
import uuid


def render(step: dict, body: dict, usage: dict, index: int) -> list[tuple[str, dict]]:
    """The events of one streamed answer: created, in_progress, one output item (a shell call or a
    message) with its deltas, and completed with `usage` (input_tokens, output_tokens)."""
    response = {
        "id": f"resp_{index}_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": body.get("model") or "scripted",
        "output": [],
        "usage": None,
    }
    events: list[tuple[str, dict]] = []

    def event(name: str, **data: object) -> None:
        events.append((name, {"type": name, "sequence_number": len(events), **data}))

    event("response.created", response=dict(response))
    event("response.in_progress", response=dict(response))
    if "call" in step:
        item, deltas = _call(str(step["call"]), body, index)
    else:
        item, deltas = _message(str(step.get("text") or ""), index)
    added = {**item, "status": "in_progress"}
    if item["type"] == "function_call":
        added["arguments"] = ""
    elif item["type"] == "custom_tool_call":
        added["input"] = ""
    elif item["type"] == "message":
        added["content"] = []
    event("response.output_item.added", output_index=0, item=added)
    for name, data in deltas:
        event(name, output_index=0, item_id=item["id"], **data)
    event("response.output_item.done", output_index=0, item=item)
    total = usage["input_tokens"] + usage["output_tokens"]
    completed = {
        **response,
        "status": "completed",
        "output": [item],
        "usage": {
            "input_tokens": usage["input_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total,
        },
    }
    event("response.completed", response=completed)
    return events


def error(status: int, message: str) -> dict:
    """OpenAI's error body for an HTTP error (a 429 is `rate_limit_exceeded`)."""
    kind, code = {
        400: ("invalid_request_error", None),
        401: ("invalid_request_error", "invalid_api_key"),
        404: ("invalid_request_error", "model_not_found"),
        429: ("rate_limit_error", "rate_limit_exceeded"),
    }.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _message(text: str, index: int) -> tuple[dict, list[tuple[str, dict]]]:
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {"id": f"msg_{index}", "type": "message", "status": "completed", "role": "assistant", "content": [part]}
    at = {"content_index": 0}
    return item, [
        ("response.content_part.added", {**at, "part": {**part, "text": ""}}),
        ("response.output_text.delta", {**at, "delta": text}),
        ("response.output_text.done", {**at, "text": text}),
        ("response.content_part.done", {**at, "part": part}),
    ]


def offered(body: dict) -> dict[str, dict]:
    """The tools a request offers, by name: its `tools`, and those of `additional_tools` input items
    (Codex's newer models get theirs there, in namespaces), namespaces opened."""
    found: dict[str, dict] = {}

    def add(tools: object) -> None:
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict) and tool.get("type") == "namespace":
                add(tool.get("tools"))
            elif isinstance(tool, dict):
                found.setdefault(str(tool.get("name") or tool.get("type")), tool)

    add(body.get("tools"))
    for item in _input(body):
        if item.get("type") == "additional_tools":
            add(item.get("tools"))
    return found


def has_tool_result(body: dict) -> bool:
    """Whether the request carries the output of a tool call (the model's call was run)."""
    return any(item.get("type", "").endswith("call_output") for item in _input(body))


def user_text(body: dict) -> list[str]:
    """The texts of the request's user messages (`input_text` parts, or a plain string input), where
    a prompt arrives; Codex's own instructions are developer messages and `instructions`."""
    if isinstance(body.get("input"), str):
        return [body["input"]]
    texts = []
    for item in _input(body):
        content = item.get("content") if item.get("role") == "user" else None
        if isinstance(content, str):
            texts.append(content)
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts


def _input(body: dict) -> list[dict]:
    items = body.get("input")
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _call(command: str, body: dict, index: int) -> tuple[dict, list[tuple[str, dict]]]:
    """One call of the request's shell tool. By model, Codex offers `exec_command` ({"cmd": str}),
    `shell_command` ({"command": str}), `shell` ({"command": [argv]}), the built-in `local_shell`,
    or (gpt-6 models, "code mode") only the free-form `exec` tool, JavaScript that calls
    `tools.exec_command`; opencode's `openai/…` models (its built-in OpenAI provider speaks
    Responses) offer `bash` ({"command", "description"}). The first of them offered, in that
    order, is called."""
    tools = offered(body)
    call_id = f"call_{index}_{uuid.uuid4().hex[:8]}"
    name = next((name for name in ("exec_command", "shell_command", "shell", "bash") if name in tools), None)
    if name is None and "local_shell" in tools:
        action = {"type": "exec", "command": ["bash", "-lc", command], "env": {}}
        item = {"id": f"lsh_{index}", "type": "local_shell_call", "status": "completed", "call_id": call_id}
        return {**item, "action": action}, []
    if name is None and tools.get("exec", {}).get("type") == "custom":
        source = f"const result = await tools.exec_command({{cmd: {json.dumps(command)}}});\ntext(result.output);\n"
        item = {"id": f"ctc_{index}", "type": "custom_tool_call", "status": "completed", "call_id": call_id}
        return {**item, "name": "exec", "input": source}, [
            ("response.custom_tool_call_input.delta", {"delta": source}),
            ("response.custom_tool_call_input.done", {"input": source}),
        ]
    name = name or "exec_command"
    arguments = json.dumps(
        {
            "exec_command": {"cmd": command},
            "shell_command": {"command": command},
            "shell": {"command": ["bash", "-lc", command]},
        }.get(name, {"command": command, "description": "Runs the command"})
    )
    item = {"id": f"fc_{index}", "type": "function_call", "status": "completed", "call_id": call_id, "name": name}
    return {**item, "arguments": arguments}, [
        ("response.function_call_arguments.delta", {"delta": arguments}),
        ("response.function_call_arguments.done", {"arguments": arguments}),
    ]
