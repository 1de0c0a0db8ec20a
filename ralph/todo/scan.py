"""TODO.md's list items found line by line, as markdown-it's CommonMark block parser finds them.

The scanner applies CommonMark's block rules the way markdown-it applies them (its order of
rules, its list, paragraph, heading, thematic break and code rules, with their quirks) to what a
checklist is made of. Where
markdown-it would try a rule the scanner does not follow (a block quote, HTML, a link reference
definition, a setext heading) and that rule might match, it gives up (`Undecided`) and the
caller asks markdown-it itself: the answer is always markdown-it's. It is several times faster
because it does nothing else: no tokens, and no text but an item's first paragraph.
tests/test_todo_scan.py checks it against markdown-it on generated files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# markdown-it stops nesting at its `maxNesting` (20 levels of tokens, two a list item): the
# scanner leaves deep lists to it, so that limit is never reached here.
_DEEPEST = 8
_LINE_END = re.compile(r"\r\n?|\n")
# The first characters of a line that may start or end a block other than a paragraph: a line
# starting with none of them is a paragraph's (or goes on one).
_SPECIAL = frozenset("*-+_#`~<>=0123456789")
_BULLETS = frozenset("*-+")
_FENCES = frozenset("`~")
_BREAKS = frozenset("*-_")
_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
_UNDERLINE = re.compile(r"(?:=+|-+)[ \t]*$")
_ORDERED = re.compile(r"([0-9]{1,9})([.)])(?:[ \t]|$)")
_BOX_START = ("[ ]", "[x]", "[X]")


class Undecided(Exception):
    """The text uses a construct the scanner leaves to markdown-it (the reason is its message)."""


@dataclass(slots=True)
class ListItem:
    """A list item as markdown-it has it: its lines [start, end) and its first paragraph."""

    start: int
    depth: int  # how many list items it is in
    end: int = 0
    paragraph: int | None = None  # the line its first block starts on, when that block is a paragraph
    content: str = ""  # that paragraph's text when it starts with "[" (markdown-it's, up to whitespace)


def list_items(text: str) -> list[ListItem]:
    """Every list item, in the order markdown-it opens them; raises Undecided."""
    if "\0" in text:  # markdown-it reads NUL as U+FFFD
        raise Undecided("a NUL character")
    return _Blocks(text).items


class _Blocks:
    """markdown-it's StateBlock, as much of it as the scanner's rules read."""

    def __init__(self, text: str) -> None:
        lines = _LINE_END.split(text)
        if not lines[-1].strip(" \t"):  # markdown-it has no last line of blanks without a line end
            lines.pop()
        self.count = len(lines)
        self.lines = lines + [""]  # past the last line, an empty one (as markdown-it has)
        self.length = [len(line) for line in self.lines]
        self.shift = [len(line) - len(line.lstrip(" \t")) for line in self.lines]  # where its content starts
        self.column = self.shift[:]  # the column that is, tabs expanded
        if "\t" in text:
            for at, line in enumerate(self.lines):
                self.column[at] = _columns(line[: self.shift[at]])
        self.may_reference = "]:" in text  # a link reference definition has one
        self.indent = 0  # markdown-it's blkIndent: a list item's content column
        self.list_indent = -1  # its listIndent: the indent of the list the item is in
        self.line = 0  # its state.line: where the next block starts
        self.depth = 0
        self.items: list[ListItem] = []
        self.opened: ListItem | None = None  # an item whose first block is still to come
        self._tokenize(0, self.count)

    def _tokenize(self, line: int, end: int) -> None:
        """markdown-it's block tokenizer: blocks until `end` or a line indented less."""
        shift, length, column, count = self.shift, self.length, self.column, self.count
        while line < end:
            while line < count and shift[line] >= length[line]:
                line += 1
            self.line = line
            if line >= end or column[line] < self.indent:
                break
            self._block(line, end)
            line = self.line
            if line < end and shift[line] >= length[line]:
                line += 1
                self.line = line

    def _block(self, line: int, end: int) -> None:
        """The block starting at `line`: markdown-it's rules, in its order."""
        rest = self.lines[line][self.shift[line] :]
        first = rest[0]
        if self.column[line] - self.indent >= 4:
            self._opened_by(None)
            self._indented_code(line, end)
        elif first not in _SPECIAL:
            if first == "[" and self.may_reference and not (rest[:3] in _BOX_START and rest[3:4] != ":"):
                raise Undecided("a link reference definition")
            self._paragraph(line, end)
        elif first in _FENCES and _fence_opens(rest):
            self._opened_by(None)
            self._fenced_code(line, end, rest)
        elif first in "<>":
            raise Undecided("a block quote or HTML")
        elif (first in _BREAKS and _thematic_break(rest)) or (first == "#" and _HEADING.match(rest)):
            self._opened_by(None)
            self.line = line + 1
        elif not self._list(line, end, rest):
            self._paragraph(line, end)

    def _opened_by(self, paragraph: int | None) -> None:
        if self.opened is not None:
            self.opened.paragraph = paragraph
            self.opened = None

    def _paragraph(self, start: int, end: int) -> None:
        """A paragraph goes on to a blank line or a line that starts another block; first,
        markdown-it looks for a setext underline up to `end`, where this scan looks too."""
        lines, shift, length, column, indent, count = (
            self.lines,
            self.shift,
            self.length,
            self.column,
            self.indent,
            self.count,
        )
        line = start + 1
        while line < count and shift[line] < length[line]:
            if column[line] - indent <= 3 and lines[line][shift[line]] in _SPECIAL and self._interrupts(line, end):
                break
            line += 1
        if self.opened is not None:
            first = lines[start][shift[start] :]
            if first[0] == "[":
                self.opened.content = "\n".join([first, *lines[start + 1 : line]])
            elif not first[0].isprintable():  # markdown-it may trim it: its versions differ in what they trim
                raise Undecided("an item's paragraph starting with an unusual space")
            self._opened_by(start)
        self.line = line

    def _interrupts(self, line: int, end: int) -> bool:
        """Does the line end the paragraph above it (a line starting with a special character)?"""
        rest, column = self.lines[line][self.shift[line] :], self.column[line]
        first = rest[0]
        if line < end and column >= self.indent and first in "-=" and _UNDERLINE.match(rest):
            raise Undecided("a setext heading")
        if first in "<>":
            raise Undecided("a block quote or HTML")
        if (first in _FENCES and _fence_opens(rest)) or (first in _BREAKS and _thematic_break(rest)):
            return True
        if first == "#":
            return _HEADING.match(rest) is not None
        if self.list_indent >= 0 and column - self.list_indent >= 4 and column < self.indent:
            return False
        marker = _marker(rest)
        if marker is None:
            return False
        if column < self.indent:  # an item of a list this paragraph is in
            return True
        # a list that interrupts a paragraph: an ordered one starts at 1, and its item is not empty
        return (marker[0] == "" or int(marker[0]) == 1) and bool(rest[marker[1] :].strip(" \t"))

    def _list(self, start: int, end: int, rest: str) -> bool:
        column = self.column[start]
        if self.list_indent >= 0 and column - self.list_indent >= 4 and column < self.indent:
            return False
        marker = _marker(rest)
        if marker is None:
            return False
        if self.depth >= _DEEPEST:
            raise Undecided(f"lists nested deeper than {_DEEPEST}")
        self._opened_by(None)
        lines, shift, length = self.lines, self.shift, self.length
        ordered, after = marker[0] != "", marker[1]
        marker_char = rest[after - 1]
        line = start
        while line < end:
            self._item(start, shift[start] + after, end)
            line = start = self.line
            if line >= end or not 0 <= self.column[line] - self.indent < 4 or shift[line] >= length[line]:
                break
            rest = lines[line][shift[line] :]
            if rest[0] == ">":  # a block quote would end the list
                raise Undecided("a block quote")
            if (rest[0] in _FENCES and _fence_opens(rest)) or (rest[0] in _BREAKS and _thematic_break(rest)):
                break
            marker = _marker(rest)
            if marker is None or (marker[0] != "") != ordered or rest[marker[1] - 1] != marker_char:
                break
            after = marker[1]
        self.line = line
        return True

    def _item(self, start: int, after_marker: int, end: int) -> None:
        """One list item, its marker ending at `after_marker` on line `start`."""
        text, shift, column = self.lines[start], self.shift[start], self.column[start]
        initial = offset = column + after_marker - shift
        at = after_marker
        while at < len(text) and text[at] in " \t":
            offset += 4 - offset % 4 if text[at] == "\t" else 1
            at += 1
        after = 1 if at >= len(text) or offset - initial > 4 else offset - initial
        item = ListItem(start, self.depth)
        self.items.append(item)
        self.opened = item
        outer_list_indent, self.list_indent, self.indent = self.list_indent, self.indent, initial + after
        self.shift[start], self.column[start] = at, offset
        self.depth += 1
        if at >= len(text) and self.shift[start + 1] >= self.length[start + 1]:  # an empty item, then a blank
            self.line = min(self.line + 2, end)
        else:
            self._tokenize(start, end)
        self.depth -= 1
        self.indent, self.list_indent = self.list_indent, outer_list_indent
        self.shift[start], self.column[start] = shift, column
        self._opened_by(None)
        item.end = self.line

    def _indented_code(self, start: int, end: int) -> None:
        line = last = start + 1
        while line < end:
            empty = self.shift[line] >= self.length[line]
            if not empty and self.column[line] - self.indent < 4:
                break
            line += 1
            last = last if empty else line
        self.line = last

    def _fenced_code(self, start: int, end: int, rest: str) -> None:
        marker, length = rest[0], _run(rest)
        line, closed = start, False
        while not closed:
            line += 1
            if line >= end:
                break
            text, at = self.lines[line], self.shift[line]
            if at < len(text) and self.column[line] < self.indent:  # its list item ends here, and it too
                break
            if at >= len(text) or text[at] != marker or self.column[line] - self.indent >= 4:
                continue
            run = _run(text[at:])
            closed = run >= length and not text[at + run :].strip(" \t")
        self.line = line + closed


def _columns(indentation: str) -> int:
    column = 0
    for char in indentation:
        column += 4 - column % 4 if char == "\t" else 1
    return column


def _run(text: str) -> int:
    """How many times its first character starts `text`."""
    return len(text) - len(text.lstrip(text[0]))


def _fence_opens(rest: str) -> bool:
    length = _run(rest)
    return length >= 3 and not (rest[0] == "`" and "`" in rest[length:])


def _thematic_break(rest: str) -> bool:
    marker = rest[0]
    return rest.count(marker) >= 3 and not rest.replace(marker, "").strip(" \t")


def _marker(rest: str) -> tuple[str, int] | None:
    """A list marker at the start of `rest`: its number ("" for a bullet) and where it ends."""
    if rest[0] in _BULLETS:
        return ("", 1) if len(rest) == 1 or rest[1] in " \t" else None
    found = _ORDERED.match(rest)
    return None if found is None else (found[1], found.end(2))
