"""The failure lines of a check judged by its exit code, lifted out of its whole output.

A red check's feedback is the end of its output, and the end is often the runner's summary
counts and a package manager's notices, the failures themselves scrolled far above. `lift`
finds the lines runners print where a test or a build fails (TAP's `not ok`, go's `--- FAIL`,
libtest's `FAILED` and `panicked at`, jest's `●`, mocha's `1) `, an error's first line, ...),
each with a line or two after it, once each, capped: what goes above the tail.

The contract (ralph/verdict/checks.py calls it): give it the WHOLE output, as the spill file
holds it; it gives back a short text (a heading line, then the lines, at most `limit`
characters) or "" when no failure line is there. `first` gives the first failure line alone,
for a message of one line. Each reads every line a bounded number of times, and no input
makes either raise.
"""

from __future__ import annotations

import re

LIFT_CHARS = 2000  # what a lift may take of the feedback, heading included
LINE_CHARS = 240  # of one line shown; a minified bundle's line says nothing more past it
CONTEXT_LINES = 2  # shown after a failure line: its message, or where it happened
SKIPPED_LINES = 4  # blank or empty-of-meaning lines passed over on the way to the context
TAP_LINES = 40  # of the YAML block under TAP's `not ok`, read for its `location` and `error`
HEADING = "[ralph: the failure lines of the whole output]"

# Colours and cursor moves (jest's, cargo's) would keep a line from matching and mean nothing in a prompt.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# After a line's indentation (taken whole, never given back, and never across a line end, so
# the scan stays linear), what runners print where a test or a build fails. `(?<![ \t])`: only
# at the line's start. A runner's summary counts are left out on purpose: the tail has them.
_RUNNER_LINES = (
    r"not ok\b",  # TAP: node --test, tap, bats
    r"--- FAIL\b",  # go test
    r"(?:FAIL|ERROR)[ \t]+\S",  # go's package line, jest/vitest's file, pytest's short summary
    r"(?<![ \t])(?:FAIL|ERROR): \S",  # unittest
    r"(?<![ \t])FAILED [^(\s]",  # pytest's short summary; `FAILED (failures=1)` is unittest's count
    # Further along the line, in one pass over it: libtest's and unittest -v's result, Rust's
    # panic, tsc's error.
    r"[^\n]*?(?: \.\.\. (?:FAILED|FAIL|ERROR)[ \t]*$|\bpanicked at\b|\berror TS\d+:)",
    r"(?<![ \t])panic: ",  # Go
    r"[✕✖×✗❌] ?\S",  # jest, node's spec reporter, vitest, ava
    r"● \S",  # jest
    r"(?<=[ \t])\d+\) \S",  # mocha
    r"(?:[A-Za-z_][\w.$]*)?(?:Error|Exception)(?: \[\w+\])?: \S",  # an error's first line
    r"AssertionError\b",  # assert's, Python's and node's
    r"(?<![ \t])error(?:\[E\d+\])?: \S",  # rustc, cargo
    r"(?<![ \t])[^\s:]+\.go:\d+(?::\d+)?: \S",  # go's compiler and vet
    r"(?<![ \t])[^\s:]+:\d+:\d+: (?:fatal )?error\b",  # gcc, clang
    r"(?<=[ \t])\d+:\d+[ \t]+error[ \t]",  # eslint
)
# A blank line fails at once, before any alternative is tried.
_FAILURE = re.compile(r"^[ \t]*+(?=\S)(?:" + "|".join(_RUNNER_LINES) + ")", re.MULTILINE)
_TAP_DIRECTIVE = re.compile(r"#[ \t]*(?:TODO|SKIP)\b", re.IGNORECASE)
# Lines that say nothing of a failure, passed over as context: rules and banners, the headers
# of a traceback or a failures list, other tests' results, a code frame's unmarked lines, and
# the summary counts the tail has anyway.
_EMPTY_OF_MEANING = re.compile(
    r"[ \t]*(?:"
    r"[-=_~*#.|:+^ \t]*"  # a rule (----, ====, TAP's --- and ...), a caret under a column
    r"|[-=]{3,}.*"  # ---- tests::x stdout ----, ==== short test summary info ====
    r"|Traceback \(most recent call last\):|failures:|stack backtrace:"
    r"|.* \.\.\. (?:ok|ignored|skipped.*|bench:.*)"  # libtest's and unittest's other tests
    r"|\d+ \|.*"  # jest's code frame, but its `>` line
    r"|\d+ (?:passing|failing|pending)\b.*"  # mocha
    r"|Ran \d+ tests? in .*|(?:OK|FAILED) \(.*|test result: .*"  # unittest, libtest
    r"|(?:Tests|Test Suites|Snapshots|Time): .*|Ran all test suites.*"  # jest
    r"|[#ℹ] (?:tests|suites|pass|fail|cancelled|skipped|todo|duration_ms)\b.*"  # node --test
    r"|FAIL|ok\b.*|note: run with `RUST_BACKTRACE.*"
    r")[ \t]*"
)
_TAP_KEYS = re.compile(r"[ \t]+(location|error|message|found|wanted|expected|actual):[ \t]*(.*)")
_BLOCK_SCALAR = re.compile(r"[|>][-+]?")


def lift(output: str, limit: int = LIFT_CHARS) -> str:
    """The failure lines of `output` (the whole of it), each once with a line or two after it,
    under a heading, in at most `limit` characters; "" when it holds none (or `limit` leaves no
    room for one)."""
    text = _plain(output)
    shown: list[str] = [HEADING]
    used = len(HEADING) + 1
    seen: set[str] = set()  # the failure lines found, shown or not
    left_out = 0
    for match in _FAILURE.finditer(text):
        end = _line_end(text, match.start())
        line = _clip(text[match.start() : min(end, match.start() + 2 * LINE_CHARS)])
        key = line.strip()
        if key in seen or _tap_directive(key):
            continue
        seen.add(key)
        after = [] if left_out else _tap_context(text, end) if key.startswith("not ok") else _context(text, end)
        entry = [line, *(context for context in after if context not in shown)]  # a stack frame once
        size = sum(len(part) + 1 for part in entry)
        if left_out or used + size > limit - 60:  # room kept for the line that says what was left out
            left_out += 1
            continue
        shown += entry
        used += size
    if len(shown) == 1:
        return ""
    if left_out:
        shown.append(f"[ralph: {left_out} more failure line(s) in the output, not shown]")
    return ("\n".join(shown) + "\n")[:limit]


def first(output: str) -> str:
    """The first failure line of `output`, stripped, for a message of one line (doctor's, a
    refused baseline's); "" when it holds none."""
    text = _plain(output)
    for match in _FAILURE.finditer(text):
        line = _clip(text[match.start() : min(_line_end(text, match.start()), match.start() + 2 * LINE_CHARS)])
        if not _tap_directive(line.strip()):
            return line.strip()
    return ""


def _tap_directive(line: str) -> bool:
    """TAP's `not ok ... # TODO` and `# SKIP`: a test not expected to pass, no failure."""
    return line.startswith("not ok") and _TAP_DIRECTIVE.search(line) is not None


def _plain(output: str) -> str:
    """The output as lines of text: escapes and control characters out, every line end a \\n."""
    text = _ESCAPES.sub("", output).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", text)


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def _context(text: str, end: int) -> list[str]:
    """The lines after a failure line (its message, where it happened): up to CONTEXT_LINES of
    the paragraph that follows it, over a few lines that say nothing; never another failure
    line, an entry of its own."""
    found: list[str] = []
    skipped = 0
    at = end + 1
    while at < len(text) and len(found) < CONTEXT_LINES and skipped <= SKIPPED_LINES:
        if _FAILURE.match(text, at):
            break
        line_end = _line_end(text, at)
        line = _clip(text[at : min(line_end, at + 2 * LINE_CHARS)])
        if found and not line.strip():  # the paragraph ended
            break
        if _EMPTY_OF_MEANING.fullmatch(line):
            skipped += 1
        else:
            found.append(line)
        at = line_end + 1
    return found


def _tap_context(text: str, end: int) -> list[str]:
    """TAP's YAML block under `not ok`: where the test is and what its error said (a block
    scalar's lines joined into one), not its duration or its stack."""
    found: list[str] = []
    at = end + 1
    for _ in range(TAP_LINES):
        if at >= len(text) or _FAILURE.match(text, at):
            break
        line_end = _line_end(text, at)
        line = text[at : min(line_end, at + 2 * LINE_CHARS)].rstrip()
        at = line_end + 1
        if line.strip() == "...":  # the block's end
            break
        key = _TAP_KEYS.fullmatch(line)
        if key is None:
            continue
        value = key[2]
        if _BLOCK_SCALAR.fullmatch(value):  # `error: |-`: its text is on the lines below, indented
            value, at = _block_text(text, at, len(line) - len(line.lstrip()))
        found.append(_clip(f"  {key[1]}: {value}"))
    return found[:CONTEXT_LINES]


def _block_text(text: str, at: int, indent: int) -> tuple[str, int]:
    """A YAML block scalar's lines (more indented than its key, or blank) as one line, and
    where the text after it starts."""
    words: list[str] = []
    for _ in range(TAP_LINES):
        line_end = _line_end(text, at)
        line = text[at : min(line_end, at + 2 * LINE_CHARS)]
        if at >= len(text) or (line.strip() and len(line) - len(line.lstrip()) <= indent):
            break
        words += line.split()
        at = line_end + 1
    return " ".join(words), at
