"""TODO.md: a markdown checklist (`- [ ]` open, `- [x]` done), read as markdown.

markdown-it-py (rich's own markdown parser) finds the list items, so a `- [ ]` inside a code
block is not an item (a run could never be done), an ordered `1. [ ]` is, and an item wrapped
over several lines keeps all of its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from pydantic import BaseModel

# Blocks only: an item's text is its paragraph's source, so the inline phase (two thirds of the
# time) is skipped.
_MARKDOWN = MarkdownIt("commonmark").disable("inline")
CACHED_CHARS = 1 << 20
_BOX = re.compile(r"^\[( |x|X)\]\s+(?P<text>.*\S)", re.DOTALL)


@dataclass(frozen=True)
class Item:
    text: str
    done: bool


def parse(text: str | None) -> list[Item]:
    """Every checkbox item, in order: a list item whose first paragraph starts with a box."""
    text = text or ""
    # A lap reads the same few texts several times; a huge one (a lap can write any TODO.md)
    # is parsed each time rather than kept.
    return list(_parse(text) if len(text) <= CACHED_CHARS else _parse.__wrapped__(text))


@lru_cache(maxsize=8)
def _parse(text: str) -> tuple[Item, ...]:
    tokens = _MARKDOWN.parse(text)
    items = []
    for at, token in enumerate(tokens[:-2]):
        if token.type == "list_item_open" and tokens[at + 1].type == "paragraph_open":
            match = _BOX.match(tokens[at + 2].content)
            if match:
                items.append(Item(" ".join(match["text"].split()), match[1] != " "))
    return tuple(items)


class Counts(BaseModel):
    """How many items are open and done; a lap's note keeps these (`todo`)."""

    open: int
    done: int

    @property
    def total(self) -> int:
        return self.open + self.done


def count(items: list[Item]) -> Counts:
    done = sum(item.done for item in items)
    return Counts(open=len(items) - done, done=done)


def combined(text: str, ticked: list[str], added: list[str]) -> str:
    """`text` (a TODO file) with the items `ticked` ticked and the `added` lines appended: what
    a lap did to its TODO, put onto another version of it (laps run side by side)."""
    wanted = set(ticked)
    lines = text.splitlines(keepends=True)
    tokens = _MARKDOWN.parse(text)
    for at, token in enumerate(tokens[:-2]):
        if token.type == "list_item_open" and tokens[at + 1].type == "paragraph_open" and token.map:
            match = _BOX.match(tokens[at + 2].content)
            if match and match[1] == " " and " ".join(match["text"].split()) in wanted:
                first = token.map[0]
                lines[first] = lines[first].replace("[ ]", "[x]", 1)
    tail = "" if not lines or lines[-1].endswith("\n") else "\n"
    return "".join(lines) + tail + "".join(line + "\n" for line in added)


def newly_ticked(before: list[Item], after: list[Item]) -> list[str]:
    """Items open before and done after, by their text."""
    was_open = {item.text for item in before if not item.done}
    return [item.text for item in after if item.done and item.text in was_open]
