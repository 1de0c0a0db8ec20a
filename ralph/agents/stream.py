"""A streamed chat completion, read as it comes and put together as the body a reply in one
piece would have been.

Streaming is how ralph tells a slow server from a dead one: a server that streams sends a
chunk a token (and a recent llama-server a keep-alive comment while it reads a long prompt),
so `agent.request_timeout` bounds the silence between them, not the whole reply, while the
request's deadline (the lap's time) still bounds the whole. The chunks are OpenAI's wire
format: server-sent events whose `data:` is a JSON chunk, `[DONE]` at the end; each choice
has a `delta` (content, reasoning, tool calls by index, finish_reason), and `usage` comes in
a last chunk without choices when stream_options asked for it. What a server sends beside
them (llama.cpp's `timings`) is kept, so the transcript holds what came.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ralph.agents.retry import NoAnswer, StillAnswering, StreamBroken


class ErrorEvent(Exception):
    """The server sent an error in the stream, after its 200: `body` is that event, whole."""

    def __init__(self, message: str, body: str):
        super().__init__(message)
        self.body = body


def _http_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """The timeouts and transport errors of the client's HTTP library, which raises them itself
    once the answer's headers are in: httpx, or httpx2 under newer openai releases."""
    timeouts: list[type[Exception]] = []
    transport: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        try:
            library: Any = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(library.TimeoutException)
        transport.append(library.TransportError)
    return tuple(timeouts), tuple(transport)


@dataclass
class Assembly:
    """The chunks of one reply, put together."""

    chunks: int = 0  # data events
    tokens: int = 0  # chunks that carried text: a token each on llama.cpp, vLLM and OpenAI
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, dict] = field(default_factory=dict)
    finish_reason: str | None = None
    beside: dict[str, Any] = field(default_factory=dict)  # id, model, usage, timings, …: the last of each

    def add(self, chunk: dict) -> None:
        self.chunks += 1
        for key, value in chunk.items():
            if key not in ("choices", "object") and value is not None:
                self.beside[key] = value
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else choice.get("message")
        if isinstance(delta, dict):
            self.add_delta(delta)
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]

    def add_delta(self, delta: dict) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")  # some servers send both, alike
        for parts, piece in ((self.content, delta.get("content")), (self.reasoning, reasoning)):
            if isinstance(piece, str) and piece:
                parts.append(piece)
                self.tokens += 1
        pieces = delta.get("tool_calls")
        for piece in pieces if isinstance(pieces, list) else []:
            if isinstance(piece, dict):
                self.add_call_piece(piece)
                self.tokens += 1

    def add_call_piece(self, piece: dict) -> None:
        """A tool call's part: its id and name once, its arguments in pieces, by index."""
        index = piece.get("index")
        if not isinstance(index, int):  # a server that numbers none: a new id starts a new call
            last = max(self.calls, default=-1)
            index = last + 1 if last < 0 or (piece.get("id") and self.calls[last]["id"]) else last
        call = self.calls.setdefault(index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if isinstance(piece.get("id"), str) and piece["id"]:
            call["id"] = piece["id"]
        function = piece["function"] if isinstance(piece.get("function"), dict) else {}
        name, arguments = function.get("name"), function.get("arguments")
        if isinstance(name, str) and name != call["function"]["name"]:  # some servers repeat the whole name
            call["function"]["name"] += name
        if isinstance(arguments, str):
            call["function"]["arguments"] += arguments
        elif isinstance(arguments, dict):  # an object, as some servers send arguments
            call["function"]["arguments"] = arguments

    def body(self) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) if self.content else None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {key: value for key, value in self.calls[index].items() if value is not None}
                for index in sorted(self.calls)
            ]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return {**self.beside, "object": "chat.completion", "choices": [choice]}


class Reading:
    """One streamed answer, read line by line against the silence and the deadline."""

    def __init__(self, *, started: float, deadline: float, silence: float):
        self.started, self.deadline, self.silence = started, deadline, silence
        self.assembly = Assembly()
        self.first_token: float | None = None
        self.timeouts, self.transport = _http_errors()

    def lines(self, source: Iterator[str]) -> Iterator[str]:
        """`source`'s lines, the HTTP library's failures turned into ralph's."""
        while True:
            try:
                line = next(source)
            except StopIteration:
                return
            except self.timeouts:
                if time.monotonic() >= self.deadline and self.assembly.tokens:  # the deadline, not the silence
                    raise self.still_answering() from None
                raise NoAnswer(self.silence, streamed=True, received=self.assembly.tokens) from None
            except self.transport as exc:
                raise StreamBroken(f"the connection broke {self.where()} ({exc})") from None
            yield line

    def read(self, source: Iterator[str]) -> Assembly:
        """The whole reply; StillAnswering once the deadline comes before its end."""
        data: list[str] = []
        for line in self.lines(source):
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line.strip() and data:
                if self.dispatch(data):
                    return self.assembly
                data = []
            if time.monotonic() >= self.deadline:
                raise self.still_answering()
        if data and self.dispatch(data):
            return self.assembly
        if self.assembly.finish_reason is None:  # closed before its end: a dropped connection
            raise StreamBroken(f"the connection closed {self.where()}")
        return self.assembly

    def dispatch(self, data: list[str]) -> bool:
        """One event's data; True at `[DONE]`. Data lines a server sent without the blank line
        between events are read one by one."""
        joined = "\n".join(data)
        for text in data if len(data) > 1 and not _is_json(joined) else [joined]:
            if self.event(text):
                return True
        return False

    def event(self, text: str) -> bool:
        if text.strip() == "[DONE]":
            return True
        try:
            chunk = json.loads(text)
        except ValueError:
            return False  # not a chunk: a server's comment written as data
        if not isinstance(chunk, dict):
            return False
        if chunk.get("error"):
            error = chunk["error"]
            said = error.get("message") if isinstance(error, dict) else error
            raise ErrorEvent(f"the server sent an error {self.where()}: {said}", text)
        tokens = self.assembly.tokens
        self.assembly.add(chunk)
        if self.first_token is None and self.assembly.tokens > tokens:
            self.first_token = time.monotonic()
        return False

    def still_answering(self) -> StillAnswering:
        now = time.monotonic()
        generating = now - self.first_token if self.first_token is not None else 0.0
        return StillAnswering(now - self.started, self.assembly.tokens, generating)

    def where(self) -> str:
        tokens = self.assembly.tokens
        return f"after about {tokens} tokens of the reply" if tokens else "before the reply began"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
