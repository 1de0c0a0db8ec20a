"""The line scanner finds TODO.md's items exactly as markdown-it does, on every file it decides.

The files are generated from a grammar of what a TODO.md holds (checklist lines, nested and
ordered lists, wrapped items, headings, blank lines) and of what the scanner leaves to
markdown-it (fences, HTML, quotes, setext underlines, indented code, link definitions), with
tabs, odd bullets and boxes, 0-8 spaces of indentation and every kind of line end.
"""

from __future__ import annotations

from random import Random

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ralph import todo
from ralph.todo import scan

# A few seconds in all (the suite has a time budget); nothing written into the repository; a
# failure prints the blob that replays it (@reproduce_failure).
_QUICK = settings(deadline=None, database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
_INDENT = st.sampled_from(["", " ", "  ", "   ", "    ", "     ", "      ", "        ", "\t", "  \t", " \t "])
_MARKER = st.sampled_from(["-", "*", "+", "1.", "1)", "2.", "01.", "10)", "-", "-", "1."])
_AFTER_MARKER = st.sampled_from([" ", " ", " ", "  ", "   ", "    ", "     ", "\t", ""])
_BOX = st.sampled_from(["[ ]", "[x]", "[X]", "[]", "[ ]", "[x]", "[ ]:", "[y]", "[x]\t", "\u00a0[ ]", "[ ]\u00a0"])
_WORD = st.sampled_from(["fix", "the", "bug", "a", "`code`", "[link]", "x", "*", "#", "1.", "\u2028", "\x1c", "\u00a0"])
_TEXT = st.lists(_WORD, max_size=4).map(" ".join)
_PLAIN_WORD = st.sampled_from(["fix", "the", "`bug`", "a", "[link]", "(may change: a.py)"])
_PLAIN_TEXT = st.lists(_PLAIN_WORD, max_size=4).map(" ".join)
_OTHER = st.sampled_from(
    [
        "# TODO",
        "## Done",
        "#nohead",
        "####### seven",
        "---",
        "***",
        "* * *",
        "___",
        "- - -",
        "===",
        "-",
        "```",
        "```py",
        "~~~",
        "> quoted",
        "<div>",
        "<!-- note -->",
        "[foo]: /url",
        "[ref]: <x> 'title'",
        "\0",
        "",
        "",
        "",
    ]
)


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["item", "item", "item", "item", "nested", "text", "other", "blank"]))
    indent = draw(_INDENT)
    if kind == "item":
        return indent + draw(_MARKER) + draw(_AFTER_MARKER) + draw(_BOX) + " " + draw(_TEXT)
    if kind == "nested":
        return indent + draw(_MARKER) + " " + draw(_MARKER) + draw(_AFTER_MARKER) + draw(_BOX) + " " + draw(_TEXT)
    if kind == "text":
        return indent + draw(_TEXT)
    if kind == "other":
        return indent + draw(_OTHER)
    return draw(st.sampled_from(["", " ", "  ", "\t"]))


@st.composite
def _document(draw: st.DrawFn) -> str:
    lines = draw(st.lists(_line(), max_size=14))
    ends = draw(st.lists(st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"]), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, ends, strict=True))
    return text + draw(st.sampled_from(["", "", " ", "  \t", "- [ ] last", "\n"]))


@st.composite
def _checklist(draw: st.DrawFn) -> str:
    """A TODO.md as people write one: nested items, wrapped ones, headings and blank lines between."""
    lines: list[str] = []
    columns: list[int] = []  # the content column of each item this one may be nested in
    for _ in range(draw(st.integers(0, 24))):
        kind = draw(st.sampled_from(["item", "item", "item", "wrapped", "blank", "heading", "break"]))
        if kind == "heading" or kind == "break":
            lines.append(draw(st.sampled_from(["# TODO", "## Later", "***", "* * *"])))
            columns = []
        elif kind == "blank":
            lines.append("")
        elif kind == "wrapped" and columns:
            lines.append(" " * draw(st.sampled_from([0, columns[-1]])) + draw(_PLAIN_TEXT) + "x")
        else:
            columns = columns[: draw(st.integers(0, len(columns)))]
            marker = draw(st.sampled_from(["-", "*", "+", "1.", "2)"]))
            indent = columns[-1] if columns else 0
            box = draw(st.sampled_from(["[ ]", "[x]", "[X]"]))
            lines.append(f"{' ' * indent}{marker} {box} {draw(_PLAIN_TEXT)}")
            columns.append(indent + len(marker) + 1)
    return "\n".join(lines)


@settings(_QUICK, max_examples=400)
@given(_document())
def test_the_scanner_finds_what_markdown_it_finds(text: str):
    try:
        scanned = todo.by_scanner(text)
    except scan.Undecided:
        event("left to markdown-it")
        return
    event("decided by the scanner")
    assert scanned == todo.by_markdown_it(text)


@settings(_QUICK, max_examples=100)
@given(_checklist())
def test_a_checklist_is_decided_by_the_scanner(text: str):
    assert todo.by_scanner(text) == todo.by_markdown_it(text)


@settings(_QUICK, max_examples=50)
@given(_document())
def test_parse_answers_as_markdown_it_does(text: str):
    expected = todo._own_lines(todo.by_markdown_it(text), todo.lines(text))
    assert todo.parse(text) == [found.item for found in expected]
    assert todo.nesting(text) == [found.under for found in expected]


@settings(_QUICK, max_examples=150)
@given(st.one_of(_document(), _checklist()), st.randoms(use_true_random=False))
def test_a_text_with_boxes_ticked_is_read_from_the_one_before(text: str, random: Random):
    todo.parse(text)
    boxes = [at for at in range(1, len(text) - 1) if text[at - 1] == "[" and text[at + 1] == "]"]
    ticked = list(text)
    for at in random.sample(boxes, k=random.randint(min(1, len(boxes)), len(boxes))):
        ticked[at] = random.choice([mark for mark in " xX" if mark != text[at]])
    ticked_text = "".join(ticked)
    expected = tuple(todo._own_lines(todo.by_markdown_it(ticked_text), todo.lines(ticked_text)))
    read = todo._reticked(ticked_text)
    if read is not None:
        event("read from the text before")
        assert read == expected
    assert todo._scanned(ticked_text) == expected


_ITEMS = st.lists(st.builds(todo.Item, st.sampled_from(["a", "b", "c", "d"]), st.booleans()), max_size=12)


@settings(_QUICK, max_examples=150)
@given(_ITEMS, st.lists(st.booleans(), min_size=12, max_size=12))
def test_ticks_in_place_are_counted_as_by_text(before: list[todo.Item], marks: list[bool]):
    after = [todo.Item(item.text, done) for item, done in zip(before, marks, strict=False)]
    assert todo.newly_ticked(before, after) == todo.ticked_by_counting(before, after)
