"""Rust's unit tests, read from the code's own files (`#[cfg(test)] mod tests { #[test] fn … }`
in src/lib.rs): which test functions a file declares and each one's text, so that a lap may add
tests beside the code but not weaken one that was there (`*.rs#tests` in `protect`:
ralph/verdict/guard.py). A lexer, not a parser: it knows what hides a brace (strings, raw strings,
char literals, comments) and what makes a test (an attribute named `test`, `tokio::test`,
`rstest`, `test_case(…)`, `wasm_bindgen_test`), and no more. Linear in the file's length, and it
never raises: a brace that never closes ends its test at the end of the file.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

# One token at a time, first match wins: a raw string's start (its end depends on its `#`s), a
# string, a char literal before a lifetime (`'{'` is a char, `'a` a lifetime), an identifier
# (a raw one `r#type` too), any other character alone. Comments and blanks are not tokens.
_TOKEN = re.compile(
    r"""(?P<blank>\s+)
    |(?P<line>//[^\n]*)
    |(?P<block>/\*)
    |(?P<raw>(?:br|cr|r)(?P<hashes>\#*)")
    |(?P<string>[bc]?"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z))
    |(?P<char>b?'(?:\\(?:u\{[^}'\n]{0,8}\}|x\w\w|.)|[^\\'\n])')
    |(?P<word>'?(?:r\#)?\w+)
    |(?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)
_BLOCK_EDGE = re.compile(r"/\*|\*/")
INNER = "inner"  # `//!` and `/*! */`: documentation of the enclosing module, an item boundary


class Token(NamedTuple):
    kind: str  # "word", "literal", "doc" (an outer doc comment), INNER or "other" (one character)
    text: str


def tokens(text: str) -> list[Token]:
    """The file's tokens, whatever it holds: an unterminated string or comment runs to the end."""
    found: list[Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        assert match is not None  # `other` matches any character
        kind, end = match.lastgroup, match.end()
        if kind == "block":
            end = _block_end(text, at)
        elif kind == "raw":
            closing = text.find('"' + match.group("hashes"), end)
            end = len(text) if closing < 0 else closing + 1 + len(match.group("hashes"))
        if kind in ("line", "block"):
            comment = text[at:end]
            doc = _doc_kind(comment)
            if doc:
                found.append(Token(doc, " ".join(comment.split())))
        elif kind != "blank":
            literal = kind in ("raw", "string", "char")
            found.append(Token("literal" if literal else kind or "other", text[at:end]))
        at = end
    return found


def _block_end(text: str, start: int) -> int:
    """Where a block comment starting at `start` ends: they nest in Rust."""
    depth = 0
    for edge in _BLOCK_EDGE.finditer(text, start):
        depth += 1 if edge.group() == "/*" else -1
        if depth == 0:
            return edge.end()
    return len(text)


def _doc_kind(comment: str) -> str:
    """`///` and `/** */` document the item that follows; `//!` and `/*! */` the enclosing one."""
    if comment.startswith(("//!", "/*!")):
        return INNER
    outer = comment.startswith("///") and not comment.startswith("////")
    outer |= comment.startswith("/**") and not comment.startswith(("/***", "/**/"))
    return "doc" if outer else ""


def is_test_attribute(path: list[str]) -> bool:
    """`#[test]`, `#[tokio::test]`, `#[test_case(…)]`, `#[rstest]`, `#[wasm_bindgen_test]`: by the
    last segment of the attribute's path. Not `#[cfg(test)]`, whose path is `cfg`."""
    last = path[-1] if path else ""
    return last.startswith("test") or last.endswith("_test") or last == "rstest"


@dataclass
class _Item:
    """What is known of the item being read at one level of braces."""

    start: int  # its first token: attributes and doc comments belong to it
    test: bool = False
    fn: str | None = None  # its name, once `fn NAME` is read
    module: str | None = None  # once `mod NAME` is read
    depth: int = 0  # open parentheses and brackets


@dataclass
class _Level:
    """One pair of braces: a module's (named), a function's body, or any other."""

    item: _Item
    module: str | None = None
    in_fn: bool = False  # inside a function's body: a test there is not one rustc runs
    test: tuple[str, int] | None = None  # a test's body: its name and its first token
    ends_item: bool = True  # braces inside parentheses (`[u8; {3}]`) do not end the item


def rust_tests(text: str) -> dict[str, str]:
    """Each test function of a Rust file, by its module path and name (`tests::subs`; a second of
    the same path gets `#2`), to its text from the end of the previous item through its closing
    brace: attributes above and below `#[test]`, doc comments, signature and body, its tokens
    joined by one space, so that a change of whitespace or of an ordinary comment is none."""
    if "test" not in text:  # every test attribute's name holds it: most code files are done here
        return {}
    reader = _Reader(tokens(text))
    at = 0
    while at < len(reader.found):
        at = reader.step(at)
    for depth, level in enumerate(reader.levels):  # braces left open: the test runs to the end
        if level.test:
            reader.record(reader.levels[:depth], level, len(reader.found))
    return reader.tests


@dataclass
class _Reader:
    found: list[Token]
    levels: list[_Level] = field(default_factory=lambda: [_Level(_Item(0))])
    tests: dict[str, str] = field(default_factory=dict)
    seen: Counter[str] = field(default_factory=Counter)

    def step(self, at: int) -> int:
        """Read the token at `at`; the index of the next one to read."""
        found, level, token = self.found, self.levels[-1], self.found[at]
        item, punct = level.item, token.text if token.kind == "other" else ""
        if token.kind == INNER or (punct == ";" and item.depth == 0):
            level.item = _Item(at + 1)
        elif punct == "#" and at + 1 < len(found) and found[at + 1].text in ("[", "!"):
            return _attribute(found, at, level)
        elif punct in ("(", "["):
            item.depth += 1
        elif punct in (")", "]"):
            item.depth = max(0, item.depth - 1)
        elif token.kind == "word" and token.text in ("fn", "mod") and item.depth == 0:
            name = _name(found, at + 1)
            if token.text == "fn" and item.fn is None:
                item.fn = name
            elif token.text == "mod":
                item.module = name
        elif punct == "{":
            self.levels.append(_open(level, at))
        elif punct == "}" and len(self.levels) > 1:
            closed = self.levels.pop()
            if closed.test:
                self.record(self.levels, closed, at + 1)
            if closed.ends_item:
                self.levels[-1].item = _Item(at + 1)
        return at + 1

    def record(self, outer: list[_Level], body: _Level, end: int) -> None:
        """The test whose body is `body`, inside the levels `outer`, ending before token `end`."""
        assert body.test is not None
        name, start = body.test
        key = "::".join([*(level.module for level in outer if level.module), name])
        self.seen[key] += 1
        if self.seen[key] > 1:
            key = f"{key}#{self.seen[key]}"
        self.tests[key] = " ".join(token.text for token in self.found[start:end])


def _name(found: list[Token], at: int) -> str:
    """The name after `fn` or `mod`: a word, or a macro's `$name`."""
    if at >= len(found):
        return ""
    if found[at].text == "$" and at + 1 < len(found):
        return "$" + found[at + 1].text
    return found[at].text


def _open(level: _Level, at: int) -> _Level:
    """The level a `{` opens, in the item being read at `level`."""
    item = level.item
    if item.depth:
        return _Level(_Item(at + 1), in_fn=level.in_fn, ends_item=False)
    body = item.fn is not None
    test = (item.fn or "", item.start) if body and item.test and not level.in_fn else None
    module = item.module if not body else None
    return _Level(_Item(at + 1), module=module, in_fn=level.in_fn or body, test=test)


def _attribute(found: list[Token], at: int, level: _Level) -> int:
    """Read `#[…]` (a test's mark, perhaps) or `#![…]` (the enclosing item's: a boundary); the
    index after its closing bracket. Brackets are counted; braces inside (`test_case(S { a: 1 })`)
    are not read."""
    inner = found[at + 1].text == "!"
    opening = at + 2 if inner else at + 1
    if inner and (opening >= len(found) or found[opening].text != "["):
        return at + 1
    depth, end = 0, opening
    while end < len(found):
        text = found[end].text if found[end].kind == "other" else ""
        depth += 1 if text == "[" else -1 if text == "]" else 0
        end += 1
        if depth == 0:
            break
    if inner:
        level.item = _Item(end)
    elif level.item.depth == 0 and is_test_attribute(_path(found, opening + 1, end)):
        level.item.test = True
    return end


def _path(found: list[Token], start: int, end: int) -> list[str]:
    """The attribute's path, `tokio::test` as ["tokio", "test"]: words joined by `::`."""
    path = []
    at = start + 2 if [token.text for token in found[start : start + 2]] == [":", ":"] else start
    while at < end and found[at].kind == "word":
        path.append(found[at].text)
        if at + 2 < end and found[at + 1].text == ":" and found[at + 2].text == ":":
            at += 3
        else:
            break
    return path
