"""The checks `ralph init` suggests, in the form that gives per-test results wherever the runner
can: `go test -json`, `cargo test --no-fail-fast`, `python -m unittest -v`, and node's runners
through their own reports (docs/trust.md: Per-test results from other runners). The project's
own command (its CI's first, then its Makefile, tox.ini, noxfile.py) is the starting point, with
the variables its CI sets as a prefix of the command: the check then runs as the CI runs it,
in ralph, in `ralph doctor` and by hand alike."""

from __future__ import annotations

import itertools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ralph.commands.init_sources import MAX_FILES, Found, text, words

UNJUDGED = "an exit code judges it only while it passes at the base"


@dataclass(frozen=True)
class Check:
    """One suggested check: its YAML list item, what is said beside and above it, and, where it
    gives no per-test results, why (said in ralph.yaml and on the terminal)."""

    item: str
    comment: str = ""
    above: tuple[str, ...] = ()
    unjudged: str = ""

    def yaml(self) -> list[str]:
        said = self.comment or (f"no per-test results: {self.unjudged}; {UNJUDGED}" if self.unjudged else "")
        return [f"  # {line}" for line in self.above] + [f"  - {self.item}" + (f"   # {said}" if said else "")]


def quoted(command: str) -> str:
    """The command as a YAML scalar (a JSON string is one)."""
    return json.dumps(command, ensure_ascii=False)


def with_report(run: str, key: str, path: str) -> str:
    return "{run: " + quoted(run) + f", {key}: {quoted(path)}" + "}"


def prefix(env: tuple[tuple[str, str], ...]) -> str:
    """The CI's variables as a prefix of the command (`TZ=America/New_York npx jest`)."""
    return "".join(f"{name}={shlex.quote(value)} " for name, value in env)


def source_note(found: Found | None, what: str) -> tuple[str, ...]:
    if found is None:
        return ()
    variables = ", with its variables as a prefix" if found.env else ""
    return (f"{found.source} runs `{found.command}`{what}{variables}",)


def shown_aside(found: list[Found]) -> tuple[str, ...]:
    """CI lines with expressions ralph cannot know (a matrix value): shown, never used."""
    return tuple(f"{each.source} runs `{each.command}` (not used: its values are the CI's)" for each in found[:2])


def go_check(own: list[Found]) -> Check:
    """`go test -json`: test2json's events, no extra tool; the project's own flags kept, `-v`
    dropped (events carry every test already)."""
    found, aside = _first(own, ("go", "test"))
    split = words(found.command) if found else ["go", "test", "./..."]
    flags = [word for word in split[2:] if word not in ("-v", "-json")]
    run = prefix(found.env if found else ()) + shlex.join(["go", "test", "-json", *flags])
    return Check(quoted(run), "per-test results: go test -json", source_note(found, "") + aside)


def cargo_check(own: list[Found]) -> Check:
    """`cargo test --no-fail-fast`: without it cargo stops at the first failing test binary and the
    tests of the rest go unjudged."""
    found, aside = _first(own, ("cargo", "test"))
    split = words(found.command) if found else ["cargo", "test"]
    rest = [word for word in split[2:] if word != "--no-fail-fast"]
    run = prefix(found.env if found else ()) + shlex.join(["cargo", "test", "--no-fail-fast", *rest])
    also = _others(own, ("cargo", "test"), found)
    return Check(quoted(run), "per-test results: libtest's lines", source_note(found, "") + also + aside)


def _first(own: list[Found], start: tuple[str, str]) -> tuple[Found | None, tuple[str, ...]]:
    """The first of the project's commands that runs `start`, and those with CI expressions."""
    runs = [found for found in own if tuple(words(found.command)[:2]) == start]
    usable = [found for found in runs if not found.unknowable]
    return (usable[0] if usable else None), shown_aside([found for found in runs if found.unknowable])


def _others(own: list[Found], start: tuple[str, str], chosen: Found | None) -> tuple[str, ...]:
    others = {f.command for f in own if tuple(words(f.command)[:2]) == start and not f.unknowable} - {
        chosen.command if chosen else ""
    }
    return (f"the project also runs: {', '.join(sorted(others)[:3])}",) if others else ()


def unittest_args(own: list[Found]) -> tuple[list[str], Found] | None:
    """The arguments after `-m unittest` in the project's own command (`discover -s tests`), or
    None where it runs no unittest."""
    for found in own:
        split = words(found.command)
        pairs = list(zip(split, split[1:], strict=False))
        if ("-m", "unittest") in pairs and not found.unknowable:
            rest = split[pairs.index(("-m", "unittest")) + 2 :]
            return [word for word in rest if word not in ("-v", "--verbose")], found
    return None


def unittest_run(python: str, args: list[str]) -> str:
    """`-v` names each test in the output, which ralph reads; discover takes it after its name."""
    if args[:1] == ["discover"]:
        return shlex.join([*shlex.split(python), "-m", "unittest", "discover", "-v", *args[1:]])
    return shlex.join([*shlex.split(python), "-m", "unittest", "-v", *args])


def writes_unittest(top: Path) -> bool:
    """The project's test files import unittest (two levels of its test folders looked at, no
    deeper: a huge tree or a loop of links costs nothing)."""
    files: list[Path] = []
    for folder, pattern in (
        (top / "tests", "test*.py"),
        (top / "tests", "*/test*.py"),
        (top / "test", "test*.py"),
        (top, "test*.py"),
    ):
        try:
            files += list(itertools.islice(folder.glob(pattern), MAX_FILES)) if folder.is_dir() else []
        except OSError:
            continue
    return any(re.search(r"^\s*(import|from) unittest\b", text(path), re.MULTILINE) for path in files[: 2 * MAX_FILES])


def unittest_default(top: Path) -> list[str]:
    """Discovery from the top finds only test packages: a tests folder with no __init__.py is asked for."""
    for name in ("tests", "test"):
        if (top / name).is_dir() and not (top / name / "__init__.py").exists():
            return ["discover", "-s", name]
    return []


def mentions_pytest(top: Path) -> bool:
    """pytest among the project's dependencies, requirements or tool configs."""
    named = [top / name for name in ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "noxfile.py", "Pipfile")]
    try:
        pinned = sorted(top.glob("requirements*.txt")) + sorted(top.glob("requirements/*.txt"))
    except OSError:
        pinned = []
    return any("pytest" in text(path) for path in named + pinned[:MAX_FILES])


def runs_unittest(top: Path, own: list[Found]) -> bool:
    """The project's own first test command runs unittest; or, with none, its tests are written
    with unittest and nothing brings pytest (a pytest check would find no pytest)."""
    for found in own:
        split = words(found.command)
        if "pytest" in split:
            return False
        if ("-m", "unittest") in zip(split, split[1:], strict=False):
            return True
    return not mentions_pytest(top) and writes_unittest(top)


def unittest_check(top: Path, own: list[Found], python: str) -> Check:
    """`python -m unittest -v` with the project's own arguments (`discover -s tests`)."""
    chosen = unittest_args(own)
    args, found = chosen if chosen else (unittest_default(top), None)
    run = prefix(found.env if found else ()) + unittest_run(python, args)
    return Check(quoted(run), "per-test results: unittest -v", source_note(found, ""))
