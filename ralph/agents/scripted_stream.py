"""How the scripted server (scripted.py) streams: a reply as OpenAI's chunks, and the event
stream that carries them to the client, keep-alives and odd bytes of a server's own included.

The chunks follow OpenAI's wire format: the role first, a chunk a word of content, each tool
call opened with its id and name and then its arguments in pieces, the finish_reason; usage in
a chunk without choices when stream_options asks for it (and `usage: null` on the others).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any


def chunks(message: dict, finish_reason: str, usage: dict | None, request: dict, index: int) -> list[dict]:
    """`message` streamed; `usage` is sent only when the request asked for it in the stream."""
    options = request.get("stream_options")
    with_usage = isinstance(options, dict) and options.get("include_usage") is True
    head: dict[str, Any] = {
        "id": f"chatcmpl-scripted-{index}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
    } | ({"usage": None} if with_usage else {})

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return head | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    content = message.get("content")
    sent = [chunk({"role": "assistant", "content": ""})]
    sent += [chunk({"content": word}) for word in re.findall(r"\s*\S+|\s+", content or "")]
    for number, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        opening = {"index": number, "type": "function", "function": {"name": function.get("name"), "arguments": ""}}
        sent.append(chunk({"tool_calls": [opening | ({"id": call["id"]} if "id" in call else {})]}))
        arguments = function.get("arguments") or ""
        for at in range(0, len(arguments), 8):
            sent.append(chunk({"tool_calls": [{"index": number, "function": {"arguments": arguments[at : at + 8]}}]}))
    sent.append(chunk({}, finish_reason))
    if with_usage and usage is not None:
        sent.append(head | {"choices": [], "usage": usage})
    return sent


class EventStream:
    """One answer's event stream: its headers once, then what is written, until the client goes
    or the server closes (`closing` wakes every wait, so closing never waits on an answer)."""

    def __init__(self, handler: BaseHTTPRequestHandler, closing: threading.Event):
        self.handler, self.closing = handler, closing
        self.started = False  # the headers are sent: an error can now only be an event

    def start(self, content_type: str = "text/event-stream", headers: dict[str, str] | None = None) -> bool:
        """The headers, once; False when the client is gone."""
        if self.started:
            return True
        self.started = True
        try:
            self.handler.send_response(200)
            self.handler.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.handler.send_header(name, value)
            self.handler.end_headers()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def write(self, data: bytes) -> bool:
        try:
            self.handler.wfile.write(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def keep_alive(self, seconds: float, every: float) -> bool:
        """`: ping` every `every` seconds for `seconds`, as llama-server says while it reads a
        long prompt (--sse-ping-interval); False when the client or the server went away."""
        if not self.start():
            return False
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.closing.wait(min(every, left)) or not self.write(b": ping\n\n"):
                return False
        return True

    def send(self, events: list[dict], pace: float = 0.0, stall: tuple[int, float] | None = None) -> None:
        """Each event `pace` seconds apart, then `[DONE]`; with `stall`, silent after that many
        events for that long, then closed without the rest."""
        if not self.start():
            return
        for number, event in enumerate(events):
            if stall is not None and number == stall[0]:
                self.closing.wait(stall[1])
                return
            if number and pace and self.closing.wait(pace):
                return
            if not self.write(f"data: {json.dumps(event)}\n\n".encode()):
                return  # the client went away: a real server stops generating too
        self.write(b"data: [DONE]\n\n")
