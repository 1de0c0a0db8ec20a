"""Paths as the user writes them in ralph.yaml and TODO.md: git's own glob syntax, matched by
pathspec rather than by a matcher of our own."""

from __future__ import annotations

from functools import lru_cache

import pathspec


@lru_cache(maxsize=256)
def anchored(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """Patterns from the repository's root, whatever they look like: `setup.cfg` is the root's
    file, not every file of that name (as a .gitignore line without a slash would be)."""
    return pathspec.GitIgnoreSpec.from_lines(
        [pattern if pattern.startswith(("/", "!")) else "/" + pattern for pattern in patterns]
    )
