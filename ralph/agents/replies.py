"""Reading a model's reply defensively, as local servers and small models really send it.

Each tool call comes out with an id of its own, its arguments as a dict, and a format
error for the model when it cannot be run. `assistant_message` puts the reply back into
history in a form every server accepts on the next request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict
    problem: str | None = None  # a format error to answer with instead of running it


@dataclass
class Reply:
    content: str
    calls: list[ToolCall]
    cut_off: bool  # finish_reason "length": the output limit ended it mid-way


class ReplyReader:
    """Reads the replies of one conversation; ids must be unique across all of it."""

    def __init__(self, tool_names: tuple[str, ...]):
        self.tool_names = tool_names
        self.ids: set[str] = set()

    def read(self, body: dict) -> Reply:
        choices = body.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        message = _dict(choice.get("message"))
        content = message["content"] if isinstance(message.get("content"), str) else ""
        raw_calls = message["tool_calls"] if isinstance(message.get("tool_calls"), list) else []
        calls = [self.call(item) for item in raw_calls if isinstance(item, dict)]
        return Reply(content, calls, choice.get("finish_reason") == "length")

    def call(self, item: dict) -> ToolCall:
        function = _dict(item.get("function"))
        name = function.get("name") if isinstance(function.get("name"), str) else ""
        arguments, problem = parse_arguments(function.get("arguments"))
        if problem is None and name not in self.tool_names:
            problem = f"format error: there is no tool named {name!r}; the tools are {', '.join(self.tool_names)}."
        return ToolCall(self.unique_id(item.get("id")), name or "unnamed", arguments, problem)

    def unique_id(self, given: object) -> str:
        """The model's id, or a new one when it sent none or reused one: each answer needs its own."""
        call_id = given if isinstance(given, str) and given.strip() else ""
        serial = len(self.ids)
        while not call_id or call_id in self.ids:
            serial += 1
            call_id = f"call_ralph_{serial}"
        self.ids.add(call_id)
        return call_id


def parse_arguments(raw: object) -> tuple[dict, str | None]:
    """The arguments as a dict, and a format error for the model when they cannot be used."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None  # some servers send "" for a call without arguments
    if isinstance(raw, dict):
        return _text_fit(raw), None  # some servers send an object instead of a JSON string
    try:
        value = _text_fit(json.loads(raw))  # type: ignore[arg-type]
    except RecursionError:
        return {}, "format error: the arguments are nested too deeply; send a flat JSON object."
    except (TypeError, ValueError) as exc:
        return {}, (
            f"format error: the arguments were not valid JSON ({exc}): {str(raw)[:200]!r}. "
            'Send them as one JSON object, e.g. {"command": "ls"}.'
        )
    if not isinstance(value, dict):
        return {}, 'format error: the arguments must be a JSON object, e.g. {"command": "ls"}.'
    return value, None


def schema_problems(error: ValidationError) -> str:
    """A validation error of a model's call, as a line the model can act on."""
    return "; ".join(f"{'.'.join(map(str, item['loc']))}: {item['msg']}" for item in error.errors()[:5])


def _text_fit(value: Any) -> Any:
    """Strings that can be written as UTF-8: JSON may spell a lone surrogate ("\\ud800"), which
    no note, transcript or terminal can hold."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_text_fit(item) for item in value]
    if isinstance(value, dict):
        return {_text_fit(key): _text_fit(item) for key, item in value.items()}
    return value


def assistant_message(reply: Reply) -> dict:
    """The reply as it goes back into history: arguments re-encoded, so always valid JSON, and
    the content a string even beside tool calls (servers that validate reject null)."""
    message: dict = {"role": "assistant", "content": reply.content}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in reply.calls
        ]
    return message


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}
