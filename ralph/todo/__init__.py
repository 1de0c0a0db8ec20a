"""TODO.md: a markdown checklist (`- [ ]` open, `- [x]` done), read as markdown.

CommonMark's block structure (markdown-it-py's, rich's own markdown parser) says what the list
items are, so a `- [ ]` inside a code block is not an item (a run could never be done), an
ordered `1. [ ]` is, and an item wrapped over several lines keeps all of its text. A line
scanner (ralph/todo/scan.py) finds them as markdown-it does in the blocks a checklist is made
of, and leaves a file with other blocks (a code fence, a quote, HTML) to markdown-it itself.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter, deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress
from operator import attrgetter, itemgetter, ne
from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel

from ralph.todo import scan

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

_ITEM, _TEXT, _DONE = itemgetter(0), attrgetter("text"), attrgetter("done")
CACHED_CHARS = 8 << 20  # a TODO of 100,000 items is 4 MB; a lap reads its few texts several times
_BOX = re.compile(r"^\[( |x|X)\]\s+(?P<text>.*\S)", re.DOTALL)
# Where a line ends, as markdown-it counts lines (its item line numbers index these lines): \n,
# \r\n or a lone \r; never U+2028, U+2029, \x85, \v, \f or \x1c-\x1e, where str.splitlines()
# also splits, so that a lap's U+2028 above the items would shift every line number by one.
_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+")


# What `ralph init` writes for the user to replace: `ralph run` says when they are still there.
PLACEHOLDER_GOAL = "Describe the whole job in one sentence"
PLACEHOLDER_ITEMS = ("First slice of the job", "Second slice of the job")


@dataclass(frozen=True)
class Item:
    text: str
    done: bool


class Found(NamedTuple):
    """An item where it is in the text."""

    item: Item
    box_line: int  # the line its box is on (the paragraph's first: "-" may stand alone above it)
    start: int  # its lines: [start, end), up to the first item inside it, blank lines at its end left out
    end: int
    under: int | None  # the item it is nested in (its index), None for one at the top


def lines(text: str) -> list[str]:
    """The text's lines, each with its line end: the one definition of a line for TODO.md and
    PROGRESS.md, markdown-it's."""
    return _LINE.findall(text)


def parse(text: str | None) -> list[Item]:
    """Every checkbox item, in order: a list item whose first paragraph starts with a box."""
    return list(map(_ITEM, _scan(text or "")))


def _scan(text: str) -> tuple[Found, ...]:
    # A lap reads the same few texts several times; a huge one (a lap can write any TODO.md)
    # is parsed each time rather than kept.
    return _scanned(text) if len(text) <= CACHED_CHARS else _scanned.__wrapped__(text)


@lru_cache(maxsize=8)
def _scanned(text: str) -> tuple[Found, ...]:
    found = _reticked(text)
    if found is None:
        try:
            found = tuple(_own_lines(by_scanner(text), lines(text)))
        except scan.Undecided:
            found = tuple(_own_lines(by_markdown_it(text), lines(text)))
    if len(text) <= CACHED_CHARS:
        _RECENT.append((text, found))
    return found


# The texts parsed last, with their items: a lap's TODO is most often the one it started from
# with a box ticked, and is then read from it (_reticked) instead of parsed again.
_RECENT: deque[tuple[str, tuple[Found, ...]]] = deque(maxlen=4)


def _reticked(text: str) -> tuple[Found, ...] | None:
    """The items of a text parsed lately but for boxes ticked or unticked, None when no such text
    was: the same lines but for a box's mark."""
    for before, found in tuple(_RECENT):
        if len(before) == len(text) and before != text:
            ticked = _ticked_from(before, text, found)
            if ticked is not None:
                return ticked
    return None


def _ticked_from(before: str, text: str, found: tuple[Found, ...]) -> tuple[Found, ...] | None:
    """`found` in `before`, its boxes as `text` marks them; None when `text` changed anything
    else. A box is where markdown-it's blocks look at the first character of a line and whether a
    list marker has text after it, never at a box's mark, so the blocks and the items stay."""
    changed: list[int] = []
    if not _differing(before, text, 0, len(text), changed):
        return None
    items, line, counted = list(found), 0, 0
    for at in changed:
        # the line `at` is on, as lines() counts them: a "\r\n" ends one line
        line += before.count("\n", counted, at) + before.count("\r", counted, at) - before.count("\r\n", counted, at)
        counted = at
        starts = max(before.rfind("\n", 0, at), before.rfind("\r", 0, at)) + 1
        index = bisect_left(found, line, key=lambda item: item.box_line)
        if not (index < len(found) and found[index].box_line == line and before[at] in " xX" and text[at] in " xX"):
            return None
        if before.find("[", starts, at) != at - 1 or before[at + 1 : at + 2] != "]":  # not its box's mark
            return None
        items[index] = found[index]._replace(item=Item(found[index].item.text, text[at] != " "))
    return tuple(items)


_MOST_TICKS = 1000


def _differing(before: str, text: str, start: int, end: int, changed: list[int]) -> bool:
    """Where `before` and `text` (of one length) differ between `start` and `end`, halving the
    span to find it; False past _MOST_TICKS places."""
    if end - start <= 256:
        changed += (at for at in range(start, end) if before[at] != text[at])
        return len(changed) <= _MOST_TICKS
    middle = (start + end) // 2
    for low, high in ((start, middle), (middle, end)):
        if before[low:high] != text[low:high] and not _differing(before, text, low, high, changed):
            return False
    return True


def by_scanner(text: str) -> list[Found]:
    """The items as the line scanner finds them (raises scan.Undecided), their lines as
    markdown-it has them."""
    found: list[Found] = []
    around: list[int | None] = []  # for each list item this one is in, the item it is or is nested in
    for listed in scan.list_items(text):
        del around[listed.depth :]
        under = around[-1] if around else None
        match = _BOX.match(listed.content) if listed.content else None
        if match is None or listed.paragraph is None:
            around.append(under)
            continue
        item = Item(" ".join(match["text"].split()), match[1] != " ")
        found.append(Found(item, listed.paragraph, listed.start, listed.end, under))
        around.append(len(found) - 1)
    return found


def by_markdown_it(text: str) -> list[Found]:
    """The items in markdown-it's tokens, their lines as it has them."""
    tokens = _markdown().parse(text)
    found: list[Found] = []
    around: list[int | None] = []  # the list items open here: each an item's index, None when no item
    for at, token in enumerate(tokens):
        if token.type == "list_item_close":
            around.pop()
        if token.type != "list_item_open":
            continue
        paragraph = tokens[at + 1]  # (an item's paragraph_open is followed by its inline token)
        match = _BOX.match(tokens[at + 2].content) if paragraph.type == "paragraph_open" else None
        if not (match and token.map and paragraph.map):
            around.append(None)
            continue
        item = Item(" ".join(match["text"].split()), match[1] != " ")
        under = next((index for index in reversed(around) if index is not None), None)
        found.append(Found(item, paragraph.map[0], token.map[0], token.map[1], under))
        around.append(len(found) - 1)
    return found


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    """CommonMark's blocks only: an item's text is its paragraph's source, so the inline phase
    (two thirds of the time) is skipped. Imported when a TODO needs it (most never do)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


def _own_lines(found: list[Found], text_lines: list[str]) -> list[Found]:
    """Each item's lines end where the next item starts inside it (a nested one has lines of
    its own) and before the blank lines at its end."""
    kept = []
    for at, item in enumerate(found):
        end = min(item.end, found[at + 1].start) if at + 1 < len(found) else item.end
        while end > item.box_line + 1 and not text_lines[end - 1].strip(" \t\r\n"):
            end -= 1
        kept.append(item._replace(end=end) if end != item.end else item)
    return kept


class Counts(BaseModel):
    """How many items are open and done; a lap's note keeps these (`todo`)."""

    open: int
    done: int

    @property
    def total(self) -> int:
        return self.open + self.done


def count(items: list[Item]) -> Counts:
    done = sum(map(_DONE, items))
    return Counts(open=len(items) - done, done=done)


def sources(text: str) -> list[tuple[Item, int, str]]:
    """Every item with the line its box is on and its own source lines (a wrapped item's all,
    not those of the items inside it), ending with a line end."""
    text_lines = lines(text)
    found = []
    for item in _scan(text):
        source = "".join(text_lines[item.start : item.end])
        found.append((item.item, item.box_line, _ended(source)))
    return found


def nesting(text: str) -> list[int | None]:
    """For every item, in order, the index of the item it is nested in (a step under it), None
    for an item at the top."""
    return [found.under for found in _scan(text)]


def combined(text: str, ticked: list[str], added: list[str]) -> str:
    """`text` (a TODO file) with the items `ticked` ticked (as many open ones of a text as it
    is named) and the `added` items' source appended: what a lap did to its TODO, put onto
    another version of it (laps run side by side)."""
    wanted = Counter(ticked)
    text_lines = lines(text)
    for found in _scan(text):
        item = found.item
        if not item.done and wanted[item.text] > 0:
            wanted[item.text] -= 1
            text_lines[found.box_line] = text_lines[found.box_line].replace("[ ]", "[x]", 1)
    kept = "".join(text_lines)
    return (_ended(kept) if kept else "") + "".join(map(_ended, added))


def _ended(text: str) -> str:
    """The text, with a line end after its last line if it has none."""
    return text if text.endswith(("\n", "\r")) else text + "\n"


def same_items(before: list[Item], after: list[Item]) -> bool:
    """The same items' texts in the same order (a lap that ticked, or did nothing to its TODO)."""
    return len(before) == len(after) and list(map(_TEXT, before)) == list(map(_TEXT, after))


def newly_ticked(before: list[Item], after: list[Item]) -> list[str]:
    """Items open before and done after, by their text: a text twice when two of its items
    were ticked (as many as were open before, and more are done than before)."""
    texts = list(map(_TEXT, after))
    if list(map(_TEXT, before)) == texts:
        return _ticked_in_place(before, after, texts)
    return ticked_by_counting(before, after)


def ticked_by_counting(before: list[Item], after: list[Item]) -> list[str]:
    """newly_ticked of any two lists, by counting each text's open and done items."""
    was_open = Counter(item.text for item in before if not item.done)
    done_before = Counter(item.text for item in before if item.done)
    done_after = Counter(item.text for item in after if item.done)
    ticked = []
    for text in dict.fromkeys(item.text for item in after if item.done):
        ticked += [text] * min(was_open[text], done_after[text] - done_before[text])
    return ticked


def _ticked_in_place(before: list[Item], after: list[Item], texts: list[str]) -> list[str]:
    """newly_ticked of the same items in the same order (a lap that only ticked), from the few
    whose box changed: a text's count is its items ticked less those unticked, and it comes
    where the first of its done items comes."""
    changed = [after[at] for at in compress(range(len(after)), map(ne, map(_DONE, before), map(_DONE, after)))]
    gained = Counter(item.text for item in changed if item.done)
    gained.subtract(item.text for item in changed if not item.done)
    first_done = {}
    for text in [text for text, gain in gained.items() if gain > 0]:
        at = texts.index(text)
        while not after[at].done:
            at = texts.index(text, at + 1)
        first_done[text] = at
    return [text for text in sorted(first_done, key=first_done.__getitem__) for _ in range(gained[text])]
