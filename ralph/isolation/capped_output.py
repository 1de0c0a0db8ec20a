"""Output kept for people and models to read: the head and the tail of it, the middle counted
and, when asked, all of it spilled to a file the cut marker names."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path


class CappedOutput:
    """Keeps the first and last `cap/2` bytes, counts the rest, optionally spills all of it."""

    def __init__(self, cap: int, spill: Path | None, listener: Callable[[bytes], None] | None = None):
        self.listener = listener
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.half = cap // 2
        self.total = 0
        self.spill = open(spill, "wb") if spill else None

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if self.spill:
            self.spill.write(data)
        if self.listener:
            self.listener(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_len += len(data)
            while self.tail_len - len(self.tail[0]) >= self.half:
                self.tail_len -= len(self.tail.popleft())

    def text(self, spill: Path | None) -> tuple[str, int]:
        if self.spill:
            self.spill.close()
        tail = b"".join(self.tail)[-self.half :] if self.tail else b""
        cut = self.total - len(self.head) - len(tail)
        head_text = self.head.decode("utf-8", "replace")
        if cut <= 0:
            return head_text + tail.decode("utf-8", "replace"), 0
        where = f"; the full output is in {spill}" if spill else ""
        marker = f"\n[... {cut} bytes cut{where} ...]\n"
        return head_text + marker + tail.decode("utf-8", "replace"), cut


def capped(data: bytes, cap: int, spill: Path) -> str:
    """`data` cut as a command's output is: the head and the tail kept, the middle counted;
    when it is cut, all of it is kept in `spill`, which the cut marker names."""
    output = CappedOutput(cap, spill)
    output.add(data)
    text, cut = output.text(spill)
    if not cut:
        spill.unlink(missing_ok=True)
    return text
