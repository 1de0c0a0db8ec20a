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

The event framing (`Reading.read`, `dispatch`) is ralph's, not httpx-sse's (considered for
issue 40): that wraps an httpx response, and openai here runs on httpx2; its public reader
swallows the keep-alive comments that tell "still reading the prompt" from "not answering",
and gives no line to check the deadline on; it joins `data:` lines sent without the blank line
between events into one event that is no JSON; and it refuses a reply that is not an event
stream, which ralph reads as one piece (model.py).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ralph.agents.retry import SUMMARY_CHARS, NoAnswer, StillAnswering, StreamBroken
from ralph.show.ui import one_line


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
        transport.append(library.RequestError)  # its transport errors, and DecodingError
    return tuple(timeouts), tuple(transport)


@dataclass
class CallParts:
    """One tool call's parts as they come: its id and name once, its arguments in pieces."""

    id: str | None = None
    name: str = ""
    pieces: list[str] = field(default_factory=list)  # arguments as text, the wire's form
    whole: str | None = None  # arguments a server sent as a JSON value, not as text: see `add`

    def add(self, arguments: object) -> None:
        """An object (some servers send one) is a parsed value, whole by construction: it is the
        call's arguments, whenever it comes. Text pieces beside it are dropped, not appended:
        nothing can extend a value already whole, and such a piece can only be the `""` of a
        delta with nothing more to add, or the same arguments again, as text."""
        if isinstance(arguments, str) and self.whole is None:
            self.pieces.append(arguments)
        elif arguments is not None and not isinstance(arguments, str):
            try:
                self.whole = json.dumps(arguments)
            except (ValueError, RecursionError):  # left for the reader to answer as a format error
                self.whole = repr(arguments)[:200]

    def body(self) -> dict:
        arguments = self.whole if self.whole is not None else "".join(self.pieces)
        call = {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}}
        return call if self.id is not None else {key: value for key, value in call.items() if key != "id"}


@dataclass
class Assembly:
    """The chunks of one reply, put together."""

    chunks: int = 0  # data events
    tokens: int = 0  # chunks that carried text: a token each on llama.cpp, vLLM and OpenAI
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, CallParts] = field(default_factory=dict)
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
        """A tool call's part, by index."""
        index = piece.get("index")
        if not isinstance(index, int):  # a server that numbers none: a new id starts a new call
            last = max(self.calls, default=-1)
            given, known = piece.get("id"), self.calls[last].id if last >= 0 else None
            index = last + 1 if last < 0 or (given and known and given != known) else last
        call = self.calls.setdefault(index, CallParts())
        if isinstance(piece.get("id"), str) and piece["id"]:
            call.id = piece["id"]
        function = piece["function"] if isinstance(piece.get("function"), dict) else {}
        name = function.get("name")
        if isinstance(name, str) and name != call.name:  # some servers repeat the whole name
            call.name += name
        call.add(function.get("arguments"))

    def body(self) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) if self.content else None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.calls[index].body() for index in sorted(self.calls)]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return {**self.beside, "object": "chat.completion", "choices": [choice]}


class Reading:
    """One streamed answer, read line by line against the silence and the deadline. `clipped`:
    the silence allowed is what was left of the deadline, shorter than `agent.request_timeout`,
    so running out of it is running out of time, not an endpoint's silence."""

    def __init__(self, *, started: float, deadline: float, silence: float, clipped: bool = False):
        self.started, self.deadline, self.silence, self.clipped = started, deadline, silence, clipped
        self.assembly = Assembly()
        self.first_token: float | None = None
        self.heard = False  # anything at all, a keep-alive included
        self.timeouts, self.transport = _http_errors()

    def lines(self, source: Iterator[str]) -> Iterator[str]:
        """`source`'s lines, the HTTP library's failures turned into ralph's."""
        while True:
            try:
                line = next(source)
            except StopIteration:
                return
            except self.timeouts:
                if self.clipped or (time.monotonic() >= self.deadline and self.assembly.tokens):
                    raise self.still_answering() from None  # the deadline, not the silence
                raise NoAnswer(self.silence, streamed=True, received=self.assembly.tokens) from None
            except self.transport as exc:  # a broken connection, or a body that cannot be decoded
                raise StreamBroken(f"the connection broke {self.where()} ({one_line(str(exc), 200)})") from None
            self.heard = True
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
        chunk = loads(text)
        if not isinstance(chunk, dict):
            return False  # not a chunk: a server's comment written as data
        if chunk.get("error"):
            error = chunk["error"]
            said = error.get("message") if isinstance(error, dict) and error.get("message") else error
            message = f"the server sent an error {self.where()}: {one_line(str(said), SUMMARY_CHARS)}"
            raise ErrorEvent(message, text)
        tokens = self.assembly.tokens
        self.assembly.add(chunk)
        if self.first_token is None and self.assembly.tokens > tokens:
            self.first_token = time.monotonic()
        return False

    def still_answering(self) -> StillAnswering:
        now = time.monotonic()
        generating = now - self.first_token if self.first_token is not None else 0.0
        return StillAnswering(now - self.started, self.assembly.tokens, generating, answered=self.heard)

    def where(self) -> str:
        tokens = self.assembly.tokens
        return f"after about {tokens} tokens of the reply" if tokens else "before the reply began"


def loads(text: str) -> object:
    """`text` as JSON, or None: what a server sends is read whole or not at all, and JSON nested
    deeper than Python's recursion limit is not JSON ralph can use either."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
