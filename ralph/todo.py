"""TODO.md: a markdown checklist (`- [ ]` open, `- [x]` done), read as markdown.

markdown-it-py (rich's own markdown parser) finds the list items, so a `- [ ]` inside a code
block is not an item (a run could never be done), an ordered `1. [ ]` is, and an item wrapped
over several lines keeps all of its text.
"""

from __future__ import annotations

import re
from collections import Counter
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


def sources(text: str) -> list[tuple[Item, int, str]]:
    """Every item with the line it starts on and its source lines (a wrapped item's all)."""
    lines = text.splitlines(keepends=True)
    found = []
    tokens = _MARKDOWN.parse(text)
    for at, token in enumerate(tokens[:-2]):
        if token.type == "list_item_open" and tokens[at + 1].type == "paragraph_open" and token.map:
            match = _BOX.match(tokens[at + 2].content)
            if match:
                item = Item(" ".join(match["text"].split()), match[1] != " ")
                source = "".join(lines[token.map[0] : token.map[1]]).rstrip("\n") + "\n"  # no blank line after
                found.append((item, token.map[0], source))
    return found


def combined(text: str, ticked: list[str], added: list[str]) -> str:
    """`text` (a TODO file) with the items `ticked` ticked (as many open ones of a text as it
    is named) and the `added` items' source appended: what a lap did to its TODO, put onto
    another version of it (laps run side by side)."""
    wanted = Counter(ticked)
    lines = text.splitlines(keepends=True)
    for item, first, _ in sources(text):
        if not item.done and wanted[item.text] > 0:
            wanted[item.text] -= 1
            lines[first] = lines[first].replace("[ ]", "[x]", 1)
    tail = "" if not lines or lines[-1].endswith("\n") else "\n"
    return "".join(lines) + tail + "".join(source if source.endswith("\n") else source + "\n" for source in added)


def newly_ticked(before: list[Item], after: list[Item]) -> list[str]:
    """Items open before and done after, by their text: a text twice when two of its items
    were ticked (as many as were open before, and more are done than before)."""
    was_open = Counter(item.text for item in before if not item.done)
    done_before = Counter(item.text for item in before if item.done)
    done_after = Counter(item.text for item in after if item.done)
    ticked = []
    for text in dict.fromkeys(item.text for item in after if item.done):
        ticked += [text] * min(was_open[text], done_after[text] - done_before[text])
    return ticked
