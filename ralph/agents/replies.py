"""Reading a model's reply defensively, as local servers and small models really send it.

Each tool call comes out with an id of its own, its arguments as a dict, and a format
error for the model when it cannot be run. `assistant_message` puts the reply back into
history in a form every server accepts on the next request. Tool calls a model wrote as text
(a JSON object naming an offered tool, as Qwen's models do under a chat template the server
does not parse) are found by `written_calls`; `tokens_of` reads what a reply cost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from pydantic import ValidationError


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict
    problem: str | None = None  # a format error to answer with instead of running it
    from_text: bool = False  # the model wrote it as text (agent.compat.text_tool_calls)


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
        content = _text_fit(message["content"]) if isinstance(message.get("content"), str) else ""
        raw_calls = message["tool_calls"] if isinstance(message.get("tool_calls"), list) else []
        calls = [self.call(item) for item in raw_calls if isinstance(item, dict)]
        return Reply(content, calls, choice.get("finish_reason") == "length")

    def call(self, item: dict) -> ToolCall:
        function = _dict(item.get("function"))
        name = _text_fit(function["name"]) if isinstance(function.get("name"), str) else ""
        arguments, problem = parse_arguments(function.get("arguments"))
        if problem is None and name not in self.tool_names:
            problem = f"format error: there is no tool named {name!r}; the tools are {', '.join(self.tool_names)}."
        return ToolCall(self.unique_id(item.get("id")), name or "unnamed", arguments, problem)

    def written_calls(self, content: str) -> tuple[list[ToolCall], str]:
        """The tool calls a text reply spells, and the text around them: see `standing_calls`."""
        spelled, rest = standing_calls(content, self.tool_names)
        calls = [ToolCall(self.unique_id(None), name, arguments, from_text=True) for name, arguments in spelled]
        return calls, rest

    def unique_id(self, given: object) -> str:
        """The model's id, or a new one when it sent none or reused one: each answer needs its own."""
        call_id = _text_fit(given) if isinstance(given, str) and given.strip() else ""
        serial = len(self.ids)
        while not call_id or call_id in self.ids:
            serial += 1
            call_id = f"call_ralph_{serial}"
        self.ids.add(call_id)
        return call_id


_DECODER = json.JSONDecoder()
# A fenced block (its opening and closing fences on lines of their own) or a <tool_call> tag
# opened at the start of a line and closed at the end of one; either may run to the reply's end
_WRAPPED = re.compile(
    r"^[ \t]*```[ \t]*(?P<info>[^\n`]*)\n(?P<fenced>.*?)(?:^[ \t]*```[ \t]*$|\Z)"
    r"|^[ \t]*<tool_call>(?P<tagged>.*?)(?:</tool_call>[ \t]*$|\Z)",
    re.MULTILINE | re.DOTALL,
)
CALL_FENCES = ("", "json", "tool_call")  # a block's language: ```python shows code, it does not call


def standing_calls(content: str, tool_names: tuple[str, ...]) -> tuple[list[tuple[str, dict]], str]:
    """The tool calls (name, arguments) a text reply spells, and the text around them. A call is
    a JSON object with an offered tool's `name` and its `arguments` (or `parameters`) that
    stands on its own: the whole content of a ```json (or bare, or ```tool_call) block or of a
    <tool_call> tag, one or several; or the whole reply is calls, such wrappers aside. JSON a
    reply only shows is none: inline in prose or in backticks, nested in other JSON, in a
    block of code, a tool's schema echoed (its parameters a JSON schema)."""
    pieces: list[tuple[str, list[tuple[str, dict]] | None]] = []  # text, and the calls it is if it is one
    done = 0
    for match in _WRAPPED.finditer(content):
        inner = match["tagged"] if match["tagged"] is not None else match["fenced"]
        if match["tagged"] is None and match["info"].strip().lower() not in CALL_FENCES:
            continue  # a block of code stays text, and what is in it is not searched
        pieces += [(content[done : match.start()], None), (match[0], _calls_only(inner, tool_names))]
        done = match.end()
    pieces.append((content[done:], None))
    bare = [calls if calls is not None else _calls_only(text, tool_names) for text, calls in pieces]
    if all(calls is not None or not text.strip() for (text, _), calls in zip(pieces, bare, strict=True)):
        pieces = [(text, calls) for (text, _), calls in zip(pieces, bare, strict=True)]  # the whole reply is calls
    found = [call for _, calls in pieces for call in calls or []]
    rest = "".join(text for text, calls in pieces if calls is None)
    return found, re.sub(r"\n\s*\n\s*\n", "\n\n", rest).strip() if found else content


def _calls_only(text: str, tool_names: tuple[str, ...]) -> list[tuple[str, dict]] | None:
    """The calls `text` is, whitespace aside (and a wrapper around them); None when it is
    anything else, or nothing."""
    text = text.strip()
    wrapped = _WRAPPED.fullmatch(text)
    if wrapped is not None and (wrapped["tagged"] is not None or wrapped["info"].strip().lower() in CALL_FENCES):
        text = (wrapped["tagged"] if wrapped["tagged"] is not None else wrapped["fenced"]).strip()
    calls: list[tuple[str, dict]] = []
    at = 0
    while at < len(text):
        try:
            value, end = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None
        call = _written_call(value, tool_names)
        if call is None:
            return None
        calls.append(call)
        at = len(text) - len(text[end:].lstrip())
    return calls or None


def _written_call(value: object, tool_names: tuple[str, ...]) -> tuple[str, dict] | None:
    if not isinstance(value, dict) or value.get("name") not in tool_names or "description" in value:
        return None  # a description: a tool's schema, not a call of it
    key = "arguments" if "arguments" in value else "parameters"
    if key not in value:
        return None
    arguments, problem = parse_arguments(value[key])
    if problem or ("type" in arguments and "properties" in arguments):  # a JSON schema: the tool's own
        return None
    return value["name"], arguments


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
    no note, transcript, terminal or next request can hold; a pair split over two chunks of a
    stream is put back together first."""
    if isinstance(value, str):
        paired = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return paired.encode("utf-8", "replace").decode("utf-8")
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


@dataclass(frozen=True)
class Tokens:
    """One answer's tokens, as its server reported them, else estimated."""

    prompt: int
    completion: int
    cached: int  # of `prompt`: what the server said came from its prompt cache
    estimated: bool


CHARS_PER_TOKEN = 4  # the estimate when a server reports no usage
MOST_TOKENS = 10**12  # more than any lap spends: a larger count reported is no count


def is_count(value: object) -> TypeGuard[int]:
    """Whether what a server or an agent CLI reported is a token count ralph can add up."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MOST_TOKENS


def estimate_tokens(payload: object) -> int:
    return max(1, len(json.dumps(payload, ensure_ascii=False)) // CHARS_PER_TOKEN)


def tokens_of(body: dict, asked: object) -> Tokens:
    """The tokens of `body`, the answer to `asked` (what was sent: estimated from it when the
    server reports no usage). Cached prompt tokens: OpenAI's and llama.cpp's
    `usage.prompt_tokens_details.cached_tokens`, else llama.cpp's `timings.cache_n`."""
    reported = _dict(body.get("usage"))
    prompt, completion = reported.get("prompt_tokens"), reported.get("completion_tokens")
    if not (is_count(prompt) and is_count(completion)):
        return Tokens(estimate_tokens(asked), estimate_tokens(body.get("choices")), _cached(body, None), True)
    return Tokens(prompt, completion, _cached(body, prompt), False)


def _cached(body: dict, prompt: int | None) -> int:
    cached = _dict(_dict(body.get("usage")).get("prompt_tokens_details")).get("cached_tokens")
    if not is_count(cached):
        cached = _dict(body.get("timings")).get("cache_n")
    if not is_count(cached):
        return 0
    return cached if prompt is None else min(cached, prompt)


def describe(call: ToolCall) -> str:
    """One short line for a person watching: `bash: pytest -q`, `str_replace calc.py`."""
    if call.name == "bash":
        return f"bash: {arguments_summary(call.name, call.arguments)}"
    if call.name.startswith("mcp__"):
        return f"{call.name} {arguments_summary(call.name, call.arguments)}"
    return f"{call.arguments.get('command', call.name)} {call.arguments.get('path', '')}".strip()


def arguments_summary(name: str, arguments: dict, limit: int = 100) -> str:
    """A call's arguments in one short line: a command, an edit's kind and path, a finish's summary."""
    if name == "bash":
        line = str(arguments.get("command", ""))
    elif name == "finish":
        line = f"{arguments.get('status', 'done')}: {arguments.get('summary', '')}"
    elif "path" in arguments:
        line = f"{arguments.get('command', '')} {arguments['path']}"
    else:
        line = json.dumps(arguments, ensure_ascii=False)
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
