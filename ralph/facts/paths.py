"""Paths as the user writes them in ralph.yaml and TODO.md: git's own glob syntax, matched by
pathspec rather than by a matcher of our own.

Every pattern is matched, whatever it holds: a line git's syntax cannot read (`[z-a]`, a lone
`\\`, an unclosed `[`) is taken as the literal path it spells, so no pattern from ralph.yaml, TODO.md or a
repository's own files can stop ralph. ralph.yaml's are refused where it is read (`problem`).
"""

from __future__ import annotations

import re
from functools import lru_cache

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

_SPECIAL = re.compile(r"[\\*?\[\]]")


@lru_cache(maxsize=256)
def spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """Patterns as .gitignore lines mean them: `tests/` at any depth, `/conftest.py` from the
    root, `[ab]`, `**`, `!` to take a path back. A newline in a path is a character like any
    other, as git's wildmatch has it (pathspec's `.` would stop at it: `a\nb/.gitignore` was no
    `.gitignore` at any depth), and only the path's real end ends it. Each pattern's regex is
    compiled once, so, and matched by pathspec's own matcher: re2 or hyperscan, when installed,
    would compile the unchanged regexes for themselves and match by those."""
    empty = GitIgnoreSpecPattern(None)
    made = [_compiled(line) or _compiled(_literal(line)) or empty for line in patterns]
    return pathspec.GitIgnoreSpec(made, backend="simple")


def _compiled(line: str) -> GitIgnoreSpecPattern | None:
    """The pattern git's glob syntax reads in `line`; None when it reads none (`problem`)."""
    try:
        regex, include = GitIgnoreSpecPattern.pattern_to_regex(line)
        if regex is None or include is None:
            return None
        return GitIgnoreSpecPattern(re.compile(_whole_end(regex), re.DOTALL), include)
    except (ValueError, re.error):
        return None


def _whole_end(regex: str) -> str:
    """pathspec's end anchors (`|$)` and a last `$`) as `\\Z`: `$` also ends before a final newline."""
    regex = regex.replace("|$)", "|\\Z)")
    return regex[:-1] + "\\Z" if regex.endswith("$") and not regex.endswith("\\$") else regex


def anchored(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """Patterns from the repository's root, whatever they look like: `setup.cfg` is the root's
    file, not every file of that name (as a .gitignore line without a slash would be)."""
    return spec(tuple(pattern if pattern.startswith(("/", "!")) else "/" + pattern for pattern in patterns))


@lru_cache(maxsize=1024)
def problem(line: str) -> str | None:
    """Why git's glob syntax cannot read `line`, None when it can."""
    try:
        compiled = pathspec.GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error) as error:  # pathspec's own error is a ValueError; a range like [z-a], re's
        return str(error)
    if not compiled.patterns or compiled.patterns[0].include is None:
        return "git reads it as no pattern at all: a comment, a blank, an unclosed ["
    return None


def _literal(line: str) -> str:
    """The line as a pattern that matches exactly the path it spells."""
    escaped = _SPECIAL.sub(lambda found: "\\" + found.group(0), line)
    return "\\" + escaped if escaped.startswith(("!", "#")) else escaped
