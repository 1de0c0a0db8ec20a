"""TODO.md: a markdown checklist (`- [ ]` open, `- [x]` done)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ITEM = re.compile(r"^\s*[-*+]\s+\[( |x|X)\]\s+(?P<text>.*\S)\s*$")


@dataclass(frozen=True)
class Item:
    text: str
    done: bool


def parse(text: str | None) -> list[Item]:
    """Every checkbox item, in order; lines that are not items are ignored."""
    items = []
    for line in (text or "").splitlines():
        match = _ITEM.match(line)
        if match:
            items.append(Item(" ".join(match["text"].split()), match[1] != " "))
    return items


@dataclass(frozen=True)
class Counts:
    open: int
    done: int

    @property
    def total(self) -> int:
        return self.open + self.done


def count(items: list[Item]) -> Counts:
    done = sum(item.done for item in items)
    return Counts(open=len(items) - done, done=done)


def newly_ticked(before: list[Item], after: list[Item]) -> list[str]:
    """Items open before and done after, by their text."""
    was_open = {item.text for item in before if not item.done}
    return [item.text for item in after if item.done and item.text in was_open]
