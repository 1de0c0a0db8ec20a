"""A conversation's transcript: one JSON object a line, appended as things happen (a crash keeps
the past). Every record carries the format it is written in (`"format": 1`), so a line read
alone says how to read it; records written before there was one have none, and read as format 1.
What `ralph show` reads of one (its tool calls, the endpoint check's tokens) is read here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ralph.agents.replies import parse_arguments
from ralph.errors import RalphError

FORMAT = 1


class Transcript:
    """Should the API key's value ever turn up in an event, it is masked before it is written."""

    def __init__(self, path: Path, secret: str | None):
        self.path = path
        self.secret = secret if secret and len(secret) >= 8 else None  # a short value would mask noise

    def write(self, event: str, **fields: object) -> None:
        line = json.dumps({"format": FORMAT, "event": event, "time": round(time.time(), 3), **fields})
        if self.secret:
            line = line.replace(self.secret, "[API key]")
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


def read(path: Path) -> list[dict]:
    """Every record of a transcript, of this format or an older one; a newer one is named, not guessed at."""
    try:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except RecursionError:
        raise ValueError(f"{path}: a record nested too deeply to read") from None
    for record in records:
        if not isinstance(record, dict):
            raise ValueError(f"{path}: a record that is no JSON object: {str(record)[:80]}")
        written = record.get("format", FORMAT)
        if not isinstance(written, int) or written > FORMAT:
            raise RalphError(
                f"{path} is a transcript of format {written}, newer than this ralph reads ({FORMAT}) — upgrade ralph"
            )
    return records


def tool_calls(records: list[dict]) -> list[tuple[str, dict, bool]]:
    """The tool calls a transcript's model made, in order: each one's name, arguments and whether
    the model wrote it as text. Arguments that do not read as an object read as none."""
    calls = []
    for record in records:
        message = record.get("message") if record.get("event") == "message" else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                arguments, _ = parse_arguments(function.get("arguments"))  # as the conversation read them
                calls.append((str(function.get("name")), arguments, record.get("from_text") is True))
    return calls


def endpoint_check(records: list[dict]) -> dict | None:
    """The usage of the endpoint check counted in this conversation's tokens, if one was."""
    found = [record.get("usage") for record in records if record.get("event") == "endpoint_check"]
    return found[-1] if found and isinstance(found[-1], dict) else None
