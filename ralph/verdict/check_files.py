"""The files that define how a check runs, read off its command: a lap that rewrites them
changes the judge rather than the code (a Makefile that forges the report, a `package.json`
script that no longer runs the tests), so they are protected like test configuration."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from ralph.isolation.sandbox import words

_MAKE = ["Makefile", "makefile", "GNUmakefile", "*.mk"]
_NODE = [
    # How the package manager runs a script: `script-shell`, `node-options`, a `yarnPath`.
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    "bunfig.toml",
    "package.json#scripts",
    "package.json#jest",
    "package.json#mocha",
    "jest.config.*",
    "vitest.config.*",
    "vitest.workspace.*",
    "vite.config.*",
    ".mocharc*",
    "playwright.config.*",
]
# A program's name: the files that say what it runs.
BY_PROGRAM = {
    "make": _MAKE,
    "gmake": _MAKE,
    "just": ["justfile", "Justfile", ".justfile"],
    "tox": ["tox.ini", "tox.toml", "pyproject.toml#tool.tox"],
    "nox": ["noxfile.py"],
    "hatch": ["hatch.toml", "pyproject.toml#tool.hatch"],
    "poe": ["pyproject.toml#tool.poe"],
    "npm": _NODE,
    "npx": _NODE,
    "yarn": _NODE,
    "pnpm": _NODE,
    "bun": _NODE,
    "node": _NODE,
    "jest": _NODE,
    "vitest": _NODE,
    "mocha": _NODE,
    "cargo": [".config/nextest.toml"],
    "phpunit": ["phpunit.xml", "phpunit.xml.dist"],
}
# Programs that run the next word as the command: `uv run make test`, `timeout 60 ./t.sh`.
_PREFIXES = {"uv": "run", "poetry": "run", "pipenv": "run", "env": "", "exec": "", "time": "", "nice": ""}
_INTERPRETERS = re.compile(r"^(sh|bash|dash|zsh|python[0-9.]*|node|ruby|perl)$")
_SCRIPT = re.compile(r"\.(sh|bash|py|js|mjs|cjs|ts|rb|pl)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def patterns(commands: list[str]) -> list[str]:
    """`protect` patterns for the files the commands' programs and scripts are defined by."""
    found: list[str] = []
    for command in commands:
        for segment in re.split(r"&&|\|\||[;|&\n]", command):
            found += _of_segment(words(segment))
    return list(dict.fromkeys(found))


def _of_segment(words: list[str]) -> list[str]:
    words = [word for word in words if not _ASSIGNMENT.match(word)] if words else []
    while words and words[0].rsplit("/", 1)[-1] in _PREFIXES:
        after = _PREFIXES[words[0].rsplit("/", 1)[-1]]
        words = words[2:] if after and words[1:2] == [after] else words[1:]
        words = [word for word in words if not _ASSIGNMENT.match(word)]
        if words and words[0] == "timeout":  # timeout DURATION COMMAND
            words = words[2:]
    if not words:
        return []
    program = words[0].rsplit("/", 1)[-1]
    found = list(BY_PROGRAM.get(program, []))
    if _in_tree(words[0]) and "/" in words[0]:  # ./run-tests, scripts/test.sh
        found.append(_anchored(words[0]))
    if _INTERPRETERS.match(program):
        script = next((word for word in words[1:] if not word.startswith("-")), None)
        if script and _SCRIPT.search(script) and _in_tree(script):
            found.append(_anchored(script))
    return found


def _in_tree(word: str) -> bool:
    path = PurePosixPath(word)
    return not path.is_absolute() and not word.startswith(("~", "$")) and ".." not in path.parts and "#" not in word


def _anchored(word: str) -> str:
    """The path as a pattern that matches that file only (gitignore rules: a leading slash
    anchors it to the top; special characters escaped)."""
    return "/" + re.sub(r"([*?\[\]!\\])", r"\\\1", str(PurePosixPath(word)))
