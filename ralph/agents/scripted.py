"""A scripted OpenAI-compatible chat server on loopback: the model's fake, for tests and `ralph demo`.

It speaks the real wire format (`POST …/chat/completions`, JSON bodies, OpenAI-style
error bodies and headers; `"stream": true` answered as server-sent events, `[DONE]` last),
so the real `openai` client, its HTTP stack and its error mapping all run; only the model is
scripted (how it streams: scripted_stream.py). A script is a list of steps, or a callable
`(request_body, call_index) -> step` for replies that depend on the request. `streams=False`
refuses to stream with tools, as llama-server did before May 2025; `stream_options=False`
refuses that field.

Strict (the default), it behaves like the strictest real servers met so far (llama-cpp-python's
server among them): a message whose content is not a string is a validation error answered
with HTTP 500; tools sent without `tool_choice` are left out of the prompt, so the model
answers in text; and it has one slot: a reply still being generated after the client gave
up holds every later request until it is done. ralph's endpoint check (a request whose last
message is PREFLIGHT) is answered by `preflight`, outside the script.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ralph.agents.model import PREFLIGHT
from ralph.agents.scripted_stream import EventStream, chunks

_GENERATED = object()  # "make up an id", as opposed to None: "send the call without one"


@dataclass(frozen=True)
class Reply:
    """A chat completion: the assistant message and why it ended."""

    message: dict[str, Any]
    finish_reason: str = "stop"
    usage: bool = True  # False: no `usage` block, as some local servers answer
    pace: float = 0.0  # seconds a chunk: a slow server (not streamed: all of them before the answer)
    stall: tuple[int, float] | None = None  # streamed: after this many chunks, this long silent, then closed
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens
    extra: dict[str, Any] = field(default_factory=dict)  # top-level fields of a server's own (the last chunk's)


@dataclass(frozen=True)
class HttpError:
    status: int
    body: dict | str | None = None  # None: an OpenAI-style {"error": {...}} body
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "3"}


@dataclass(frozen=True)
class Hang:
    """Wait `seconds` before answering with `then`; with no `then`, close without an answer.
    With `ping`, a streamed answer starts at once and says `: ping` every `ping` seconds while
    it waits, as llama-server does while it reads a long prompt (--sse-ping-interval)."""

    seconds: float
    then: Reply | HttpError | Raw | None = None
    ping: float | None = None


@dataclass(frozen=True)
class Raw:
    """A 200 whose body is these bytes, whatever the request: a server's odd stream (CRLF line
    ends, lines that are not events, bytes that do not decode), then the connection closed."""

    body: bytes
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)


Step = Reply | HttpError | Hang | Raw
Script = list[Step] | Callable[[dict, int], Step]


def call(name: str, arguments: dict | str | None = None, *, call_id: Any = _GENERATED) -> dict:
    """One tool call; `arguments` as a string is sent verbatim (to send invalid JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    tool_call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": raw}}
    if call_id is _GENERATED:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
    if call_id is not None:
        tool_call["id"] = call_id
    return tool_call


def tool_calls(
    *calls: dict, content: str | None = None, finish_reason: str = "tool_calls", usage: bool = True
) -> Reply:
    return Reply({"role": "assistant", "content": content, "tool_calls": list(calls)}, finish_reason, usage)


def tool_call(
    name: str,
    arguments: dict | str | None = None,
    *,
    call_id: Any = _GENERATED,
    finish_reason: str = "tool_calls",
    usage: bool = True,
) -> Reply:
    return tool_calls(call(name, arguments, call_id=call_id), finish_reason=finish_reason, usage=usage)


def text(content: str | None, *, finish_reason: str = "stop", usage: bool = True) -> Reply:
    return Reply({"role": "assistant", "content": content}, finish_reason, usage)


def bash(command: str, **options: Any) -> Reply:
    return tool_call("bash", {"command": command}, **options)


def finish(summary: str = "done", status: str = "done", **options: Any) -> Reply:
    return tool_call("finish", {"summary": summary, "status": status}, **options)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict


class ScriptedServer:
    """Serves the script on 127.0.0.1 (a free port) from a daemon thread until closed."""

    def __init__(
        self,
        script: Script,
        *,
        strict: bool = True,
        preflight: Step | None = None,
        streams: bool = True,
        stream_options: bool = True,
    ):
        self.script, self.strict = script, strict
        self.streams, self.stream_options = streams, stream_options
        self.preflight = preflight or Reply({"role": "assistant", "content": "ready"})
        self.requests: list[RecordedRequest] = []
        self.preflights: list[RecordedRequest] = []
        self.refused: list[RecordedRequest] = []  # streamed requests refused before any step was taken
        self.slot = threading.Lock()  # strict: one reply generated at a time
        self.closing = threading.Event()  # wakes hanging answers so close() never waits on them
        self._lock = threading.Lock()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.scripted = self
        # A short poll interval: shutdown() waits for the serving loop to notice, 0.5 s by default.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="scripted-server", daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def refusal(self, request: RecordedRequest) -> tuple[int, str] | None:
        """What a server that does not stream (with tools), or takes no stream_options, says."""
        body, said = request.body, None
        if body.get("stream") is True and not self.streams and body.get("tools"):
            said = 500, "Cannot use tools with stream"
        elif body.get("stream") is True and not self.stream_options and "stream_options" in body:
            said = 400, "stream_options: Extra inputs are not permitted"
        if said is not None:
            with self._lock:
                self.refused.append(request)
        return said

    def next_step(self, request: RecordedRequest) -> tuple[Step, int]:
        if _is_preflight(request.body):
            with self._lock:
                self.preflights.append(request)
            return self.preflight, -1
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
        if callable(self.script):
            try:
                return self.script(request.body, index), index
            except Exception as exc:  # shown to the client, rather than a dropped connection and a retry
                message = f"scripted server: the script raised {type(exc).__name__}: {exc}"
                return HttpError(400, _error_body(message, "invalid_request_error")), index
        if index < len(self.script):
            return self.script[index], index
        # Non-retryable on purpose: a test that runs past its script fails at once, saying why.
        message = f"scripted server: the script has {len(self.script)} steps; none for request {index + 1}"
        return HttpError(400, _error_body(message, "invalid_request_error")), index


class _HTTPServer(ThreadingHTTPServer):
    block_on_close = False  # a hanging answer must not hold up close()
    scripted: ScriptedServer


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send(404, _error_body(f"no route for POST {self.path}", "not_found"))
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return self._send(400, _error_body(f"request body is not JSON: {exc}", "invalid_request_error"))
        scripted = self.server.scripted
        invalid = _validation_error(body) if scripted.strict else None
        if invalid:
            return self._send(500, _error_body(invalid, "internal_server_error"))
        request = RecordedRequest(self.path, dict(self.headers), body)
        refused = scripted.refusal(request)
        if refused is not None:
            return self._send(refused[0], _error_body(refused[1], "invalid_request_error"))
        step, index = scripted.next_step(request)
        self.events = EventStream(self, scripted.closing)
        with scripted.slot if scripted.strict else contextlib.nullcontext():  # generating holds the slot
            answer = self._wait(step, streamed=body.get("stream") is True) if isinstance(step, Hang) else step
            if answer is None:
                return None  # the connection closes unanswered
            if isinstance(answer, Raw):
                if self.events.start(answer.content_type, answer.headers):
                    self.events.write(answer.body)
                return None
            if isinstance(answer, Reply):
                answer = _as_served(answer, body, strict=scripted.strict)
                usage = _usage(answer, len(raw)) if answer.usage else None
                streamed = chunks(answer.message, answer.finish_reason, usage, body, index)
                streamed[-1] |= answer.extra  # llama.cpp sends its timings with the last chunk
                if body.get("stream") is True:
                    return self.events.send(streamed, answer.pace, answer.stall)
                if answer.pace and scripted.closing.wait(answer.pace * len(streamed)):
                    return None
        if isinstance(answer, HttpError):
            error = answer.body or _error_body(f"scripted HTTP {answer.status}")
            if self.events.started:  # after a 200 has gone out, an error can only be an event
                return self.events.send([error if isinstance(error, dict) else {"error": {"message": error}}])
            return self._send(answer.status, error, answer.headers)
        return self._send(200, _completion(answer, body, len(raw), index))

    def _wait(self, hang: Hang, *, streamed: bool) -> Reply | HttpError | Raw | None:
        """`hang` waited out, saying `: ping` meanwhile when it should; then what follows it."""
        if not (hang.ping and streamed):
            return None if self.server.scripted.closing.wait(hang.seconds) else hang.then
        return hang.then if self.events.keep_alive(hang.seconds, hang.ping) else None

    def _send(self, status: int, payload: dict | str, headers: dict[str, str] | None = None) -> None:
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout) before the answer came

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read `.requests`; a line per request on stderr is noise


def _as_served(reply: Reply, request: dict, *, strict: bool) -> Reply:
    """A strict server leaves tools sent without tool_choice out of the prompt: the model answers in text."""
    if strict and "tools" in request and "tool_choice" not in request and reply.message.get("tool_calls"):
        said = "I would call " + json.dumps(reply.message["tool_calls"])
        return dataclasses.replace(reply, message={"role": "assistant", "content": said}, finish_reason="stop")
    return reply


def _completion(reply: Reply, request: dict, request_bytes: int, index: int) -> dict:
    completion = {
        "id": f"chatcmpl-scripted-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "message": reply.message, "finish_reason": reply.finish_reason, "logprobs": None}],
    }
    if reply.usage:
        completion["usage"] = _usage(reply, request_bytes)
    return completion | reply.extra


def _usage(reply: Reply, request_bytes: int) -> dict:
    # Deterministic and roughly proportional, so token budgets behave as with a real model.
    prompt_tokens = max(1, request_bytes // 4)
    completion_tokens = max(1, len(json.dumps(reply.message)) // 4)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return usage


def _is_preflight(body: dict) -> bool:
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    return isinstance(last, dict) and last.get("content") == PREFLIGHT


def _validation_error(body: dict) -> str | None:
    """What a server that validates requests with pydantic says of a message whose content is
    not a string: long, with the useful part at its end."""
    for index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            got = type(message.get("content")).__name__ if isinstance(message, dict) else type(message).__name__
            return (
                "Exception in ASGI application while handling POST /v1/chat/completions: "
                "Traceback (most recent call last): ... pydantic_core._pydantic_core.ValidationError: "
                "1 validation error for ChatCompletionRequestAssistantMessage (the request's messages were "
                "checked one by one against the chat completion request schema) "
                f"messages.{index}.content Input should be a valid string [type=string_type, "
                f"input_value=None, input_type={got}]"
            )
    return None


def _error_body(message: str, kind: str = "server_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
