"""A lap's transcript: one JSON object a line, appended as things happen (a crash keeps the past)."""

from __future__ import annotations

import json
import time
from pathlib import Path


class Transcript:
    """Should the API key's value ever turn up in an event, it is masked before it is written."""

    def __init__(self, path: Path, secret: str | None):
        self.path = path
        self.secret = secret if secret and len(secret) >= 8 else None  # a short value would mask noise

    def write(self, event: str, **fields: object) -> None:
        line = json.dumps({"event": event, "time": round(time.time(), 3), **fields})
        if self.secret:
            line = line.replace(self.secret, "[API key]")
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
