"""A scripted model server on loopback for the real agent CLIs: one port, four dialects.

Routed by path: Anthropic Messages (`POST /v1/messages`, Claude Code), Gemini
(`POST /v1beta/models/M:streamGenerateContent` and `:generateContent`, Gemini CLI), OpenAI chat
completions (`POST …/chat/completions`: opencode, aider, mini-swe-agent) and OpenAI Responses
(`POST …/responses`: Codex; its events are rendered by model_apis_responses.py).

The model is scripted the same way in every dialect, with the tool's own tool names:
- a request that offers a shell tool and holds no tool result yet → one call of that tool
  running `command` (claude `Bash`, gemini `run_shell_command`, opencode and mini `bash`,
  codex its shell tool);
- a request with a tool result → a final text (mini: its submit command, as a call);
- aider (no tools: it edits by its edit format) → `files` written out in its whole-file format;
- anything else (titles, summaries, a tool's own checks) → a short text, or JSON when the
  request asks for JSON.
Every request is recorded (dialect, path, headers, body); every answer carries usage the server
chose (prompt = request bytes // 4, completion = COMPLETION) and the server keeps the totals, so a
test compares what a tool reports with what was served. `limited=N` answers the first N model
requests with HTTP 429 (the dialect's error body, Retry-After).
"""

from __future__ import annotations

import importlib
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

COMPLETION = 20  # completion tokens of every answer
FINAL = "Done: the item is ticked and notes.txt written."
MINI_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SHELL_TOOLS = ("Bash", "run_shell_command", "bash", "shell", "exec_command", "local_shell", "shell_command")


@dataclass
class Request:
    dialect: str  # anthropic, gemini, chat, responses, other
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the JSON body, or None
    status: int = 0  # what the server answered
    step: str = ""  # call, final, text, files, limited, error
    usage: dict[str, int] = field(default_factory=dict)  # prompt and completion tokens served


@dataclass
class Totals:
    requests: int = 0  # model requests answered with usage
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ModelApis:
    """Serves on 127.0.0.1 (a free port) from a daemon thread until closed."""

    def __init__(
        self,
        command: str = "echo hi > notes.txt",
        *,
        files: dict[str, str] | None = None,
        limited: int = 0,
        retry_after: int = 1,
        final: str = FINAL,
    ):
        self.command, self.final = command, final
        self.files = files or {"notes.txt": "hi\n"}
        self.limited, self.retry_after = limited, retry_after
        self.requests: list[Request] = []
        self.totals = Totals()
        self._lock = threading.Lock()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.apis = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:  # OpenAI style, /v1 included
        return self.origin + "/v1"

    def __enter__(self) -> ModelApis:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def model_requests(self) -> list[Request]:
        return [request for request in self.requests if request.dialect != "other" and request.method == "POST"]

    def copies(self, marker: str) -> list[int]:
        """How many times `marker` is in the user-visible text of each model request."""
        return [user_text(request.dialect, request.body).count(marker) for request in self.model_requests()]

    def record(self, request: Request) -> bool:
        """Records the request; True when it is to be answered with a 429."""
        with self._lock:
            self.requests.append(request)
            limited = request.method == "POST" and request.dialect != "other" and self.limited > 0
            if limited:
                self.limited -= 1
            return limited

    def count(self, request: Request, prompt_tokens: int) -> dict[str, int]:
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": COMPLETION}
        with self._lock:
            request.usage = usage
            self.totals.requests += 1
            self.totals.prompt_tokens += prompt_tokens
            self.totals.completion_tokens += COMPLETION
        return usage


# What the model says -------------------------------------------------------------------------


def choose(apis: ModelApis, tools: list[dict], answered: bool, text: str) -> dict:
    """The step for a request: {"call": name, "arguments": {...}}, {"text": ...} or {"files": ...}."""
    shell = next((tool for tool in tools if tool["name"] in SHELL_TOOLS), None)
    if shell is not None and not answered:
        return {"call": shell["name"], "arguments": arguments(shell.get("parameters") or {}, apis.command)}
    if shell is not None and MINI_SUBMIT in text:  # mini ends by running its submit command
        return {"call": shell["name"], "arguments": arguments(shell.get("parameters") or {}, f"echo {MINI_SUBMIT}")}
    if shell is not None:
        return {"text": apis.final}
    if not tools and "Act as an expert software developer" in text and not answered:
        return {"files": apis.files}  # aider's main request
    return {"text": "Ticking the item"}


def arguments(schema: dict, command: str) -> dict:
    """A shell call's arguments by the tool's own schema: the command, and any other required string."""
    properties = schema.get("properties") or {}
    said: dict[str, Any] = {}
    for name in properties:
        if name in ("command", "cmd"):
            said[name] = command if properties[name].get("type") != "array" else ["bash", "-lc", command]
    for name in schema.get("required") or []:
        if name not in said and (properties.get(name) or {}).get("type") == "string":
            said[name] = "Run the lap's command"
    return said or {"command": command}


def whole_files(files: dict[str, str]) -> str:
    """aider's whole-file edit format: the path on its own line, then the file in a fence."""
    return "".join(f"{path}\n```\n{content}```\n\n" for path, content in files.items())


def json_answer(schema: dict | None) -> Any:
    """A value of `schema`'s shape: what a tool's own JSON question (next speaker, routing) gets."""
    schema = schema or {}
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    if kind == "object":
        return {name: json_answer(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "scripted"


AIDER_FILES = "I have *added these files to the chat*"  # aider's user message that lists the chat's files


def user_text(dialect: str, body: Any) -> str:
    """The text of a request's user messages: not its system prompt, not tool results, not the files
    aider shows the model (TODO.md, added to its chat, is the file's copy, not the prompt's)."""
    if not isinstance(body, dict):
        return ""
    said: list[str] = []
    if dialect == "anthropic":
        for message in body.get("messages") or []:
            if message.get("role") == "user":
                said += _texts(message.get("content"), "text")
    elif dialect == "gemini":
        for content in body.get("contents") or []:
            if content.get("role", "user") == "user":
                said += [part["text"] for part in content.get("parts") or [] if isinstance(part.get("text"), str)]
    elif dialect == "chat":
        for message in body.get("messages") or []:
            if message.get("role") == "user":
                said += [text for text in _texts(message.get("content"), "text") if not text.startswith(AIDER_FILES)]
    elif dialect == "responses":
        items = body.get("input")
        for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
            if item.get("role") == "user":
                said += _texts(item.get("content"), "input_text")
    return "\n".join(said)


def _texts(content: Any, kind: str) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [block["text"] for block in content or [] if isinstance(block, dict) and block.get("type") == kind]


# The dialects ----------------------------------------------------------------------------------


def anthropic(apis: ModelApis, request: Request, size: int) -> tuple[int, list | dict]:
    body = request.body
    tools = [{"name": tool.get("name"), "parameters": tool.get("input_schema")} for tool in body.get("tools") or []]
    messages = body.get("messages") or []
    answered = any(block.get("type") == "tool_result" for message in messages for block in _blocks(message))
    step = choose(apis, tools, answered, json.dumps(body.get("system") or "") + user_text("anthropic", body))
    usage = apis.count(request, size // 4)
    request.step = "call" if "call" in step else "text"
    if "call" in step:
        content = [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": step["call"], "input": {}}]
        stop, arguments_json = "tool_use", json.dumps(step["arguments"])
    else:
        content, stop, arguments_json = [{"type": "text", "text": step["text"]}], "end_turn", ""
    message = {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]},
    }
    if not body.get("stream"):
        if "call" in step:
            content[0]["input"] = step["arguments"]
        return 200, message
    start = message | {
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": 1},
    }
    block = content[0] | ({"text": ""} if "text" in content[0] else {})
    delta = (
        {"type": "input_json_delta", "partial_json": arguments_json}
        if "call" in step
        else {"type": "text_delta", "text": step["text"]}
    )
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage["completion_tokens"]},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return 200, events


def _blocks(message: dict) -> list[dict]:
    content = message.get("content")
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def gemini(apis: ModelApis, request: Request, size: int) -> tuple[int, list | dict]:
    body, method = request.body, urlsplit(request.path).path.rsplit(":", 1)[-1]
    if method == "countTokens":
        request.step = "count"
        return 200, {"totalTokens": size // 4}
    declarations = [
        {"name": declared.get("name"), "parameters": declared.get("parameters") or declared.get("parametersJsonSchema")}
        for tool in body.get("tools") or []
        for declared in tool.get("functionDeclarations") or []
    ]
    contents = body.get("contents") or []
    answered = any("functionResponse" in part for content in contents for part in content.get("parts") or [])
    config = body.get("generationConfig") or {}
    usage = apis.count(request, size // 4)
    if config.get("responseMimeType") == "application/json" and not declarations:
        step = {"text": json.dumps(json_answer(config.get("responseJsonSchema") or config.get("responseSchema")))}
    else:
        step = choose(apis, declarations, answered, user_text("gemini", body))
    request.step = "call" if "call" in step else "text"
    part = (
        {"functionCall": {"name": step["call"], "args": step["arguments"]}}
        if "call" in step
        else {"text": step["text"]}
    )
    answer = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": usage["prompt_tokens"],
            "candidatesTokenCount": usage["completion_tokens"],
            "totalTokenCount": usage["prompt_tokens"] + usage["completion_tokens"],
        },
        "modelVersion": body.get("model") or urlsplit(request.path).path.split("/")[-1].split(":")[0],
        "responseId": uuid.uuid4().hex[:16],
    }
    if method == "streamGenerateContent":
        return 200, [("", answer)]
    return 200, answer


def chat(apis: ModelApis, request: Request, size: int) -> tuple[int, list | dict]:
    body = request.body
    tools = [tool.get("function") or {} for tool in body.get("tools") or []]
    messages = body.get("messages") or []
    answered = any(message.get("role") == "tool" for message in messages)
    system = "\n".join(
        text
        for message in messages
        if message.get("role") == "system"
        for text in _texts(message.get("content"), "text")
    )
    step = choose(apis, tools, answered, system + user_text("chat", body))
    usage = apis.count(request, size // 4)
    request.step = next(iter(step))
    if "call" in step:
        function = {"name": step["call"], "arguments": json.dumps(step["arguments"])}
        call = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": function}
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    else:
        said = whole_files(step["files"]) if "files" in step else step["text"]
        message, finish = {"role": "assistant", "content": said}, "stop"
    served = {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
    }
    if body.get("stream") is True:
        from ralph.agents.scripted_stream import chunks

        options = body.get("stream_options")
        sent = chunks(message, finish, served, body, len(apis.requests))
        if not (isinstance(options, dict) and options.get("include_usage")):
            sent[-1]["usage"] = served  # as OpenAI-compatible servers that always send it
        return 200, [("", chunk) for chunk in sent] + [("", "[DONE]")]
    return 200, {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": served,
    }


def responses(apis: ModelApis, request: Request, size: int) -> tuple[int, list | dict]:
    try:
        rendering = importlib.import_module("helpers.model_apis_responses")
    except ImportError:
        return 501, {"error": {"message": "the Responses dialect is not written yet", "type": "server_error"}}
    body = request.body
    offered = rendering.offered(body)  # Codex's tools, those of its namespaces included
    shell = any(name in offered for name in ("exec_command", "shell_command", "shell", "local_shell", "exec"))
    answered = rendering.has_tool_result(body)
    step = {"call": apis.command} if shell and not answered else {"text": apis.final if shell else "Ticking the item"}
    usage = apis.count(request, size // 4)
    request.step = "call" if "call" in step else "text"
    tokens = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
    return 200, list(rendering.render(step, body, tokens, len(apis.requests)))


def error_body(dialect: str, status: int, message: str) -> dict:
    if dialect == "anthropic":
        kind = "rate_limit_error" if status == 429 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": message}}
    if dialect == "gemini":
        if status != 429:
            return {"error": {"code": status, "message": message, "status": "INTERNAL"}}
        # A free tier's daily quota spent, as Google says it: Gemini CLI stops at once (a per-minute
        # one it retries with backoff for minutes, then fails the same way).
        violation = {"quotaMetric": "generate_content_free_tier_requests", "quotaId": "GenerateRequestsPerDay"}
        spent = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]}]
        return {"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED", "details": spent}}
    if dialect == "responses":
        try:
            return importlib.import_module("helpers.model_apis_responses").error(status, message)
        except ImportError:
            pass
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


DIALECTS = {"anthropic": anthropic, "gemini": gemini, "chat": chat, "responses": responses}


def dialect_of(path: str) -> str:
    route = urlsplit(path).path.rstrip("/")
    if route.endswith("/messages") or route.endswith("/messages/count_tokens"):
        return "anthropic"
    if re.search(r"/models/[^/]+:(stream)?[gG]enerateContent$|:countTokens$", route):
        return "gemini"
    if route.endswith("/chat/completions"):
        return "chat"
    if route.endswith("/responses"):
        return "responses"
    return "other"


# HTTP ------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    apis: ModelApis


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        apis, dialect = self.server.apis, dialect_of(self.path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = Request(dialect, "POST", self.path, dict(self.headers), body)
        if apis.record(request):
            request.status, request.step = 429, "limited"
            message = "Rate limit reached: 429 Too Many Requests (scripted)"
            return self._json(429, error_body(dialect, 429, message), {"Retry-After": str(apis.retry_after)})
        if dialect == "other" or not isinstance(body, dict):
            request.status = 404
            return self._json(404, error_body(dialect, 404, f"no route for POST {self.path}"))
        if urlsplit(self.path).path.endswith("/messages/count_tokens"):
            request.status, request.step = 200, "count"
            return self._json(200, {"input_tokens": len(raw) // 4})
        status, answer = DIALECTS[dialect](apis, request, len(raw))
        request.status = status
        if isinstance(answer, dict):
            return self._json(status, answer)
        return self._events(answer)

    def do_GET(self) -> None:
        route = urlsplit(self.path).path.rstrip("/")
        self.server.apis.record(Request("other", "GET", self.path, dict(self.headers), None, 200))
        if route.endswith("/models") and "/v1beta" in route:
            return self._json(
                200, {"models": [{"name": "models/scripted", "supportedGenerationMethods": ["generateContent"]}]}
            )
        if route.endswith("/models"):
            model = {"id": "scripted", "object": "model", "type": "model", "display_name": "scripted", "created": 0}
            return self._json(200, {"object": "list", "data": [model], "has_more": False})
        return self._json(200, {})

    def do_HEAD(self) -> None:
        self.server.apis.record(Request("other", "HEAD", self.path, dict(self.headers), None, 200))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _events(self, events: list[tuple[str, Any]]) -> None:
        """Server-sent events, then the connection closed (no length: the stream ends with it)."""
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for name, data in events:
                line = data if isinstance(data, str) else json.dumps(data)
                self.wfile.write((f"event: {name}\n" if name else "").encode() + f"data: {line}\n\n".encode())
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass
