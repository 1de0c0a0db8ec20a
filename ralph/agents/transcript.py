"""A conversation's transcript: one JSON object a line, appended as things happen (a crash keeps
the past). Every record carries the format it is written in (`"format": 1`), so a line read
alone says how to read it; records written before there was one have none, and read as format 1.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

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
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for record in records:
        written = record.get("format", FORMAT)
        if not isinstance(written, int) or written > FORMAT:
            raise RalphError(
                f"{path} is a transcript of format {written}, newer than this ralph reads ({FORMAT}) — upgrade ralph"
            )
    return records
