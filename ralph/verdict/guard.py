"""What a lap may not do, whatever its checks say: touch protected files, rewrite the TODO.

Protected paths: a lap may add files there but not modify or delete existing ones,
unless an item it ticks names the file (its path or its file name) and that item was
already in the TODO when the run started (the user's word, not a lap's), or the user
set `protect: []`. Adding a test-configuration file (conftest.py, pytest.ini, …) where
a pattern protects it counts as a change too: a new one can deselect or skip tests.
`file#table` entries protect one table of a TOML file (pyproject.toml) or one section of an
INI file (setup.cfg), so the rest of the file stays editable; `file#prefix*` every one whose name
starts so (`setup.cfg#mypy*`: [mypy] and each [mypy-module]). `*.rs#tests` protects the test
functions of Rust files (ralph/verdict/inline_tests.py): a lap may add one, not change or remove
one the last green commit had. Whatever `protect` says, a new
module may not shadow what the checks import (ralph/verdict/shadowing.py), nor a new stub hide
its module from a type checker, unless an item names it.
"""

from __future__ import annotations

import configparser
import fnmatch
import json
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import pathspec

from ralph import git, todo
from ralph.verdict import check_files, inline_tests, shadowing

_SETUP_WORDS = re.compile(r"\b(pytest|plugins?|conftest|config(uration)?)\b", re.IGNORECASE)
# An item grants changing a file only when its own words ask for a change to it: in one clause,
# a word that asks for a change and the file's name, and nothing that says to leave it be. A
# file it names as the goal of the work ("… so tests/test_calc.py::test_sub passes", "make
# test_x pass", with what follows it in parentheses), for reference ("see tests/test_x.py") or to
# keep ("do not edit …", "keeping … as it is") is not one.
_CHANGE_WORDS = re.compile(
    r"\b(?:(?:rewrit|delet|remov|renam|mov|updat|chang|replac|migrat|merg|restructur|regenerat|upgrad|writ)"
    r"(?:e|es|ed|ing|ten)|wrote|drop(?:s|ped|ping)?|modif(?:y|ies|ied|ying)|edit(?:s|ed|ing)?|port(?:s|ed|ing)?"
    r"|convert(?:s|ed|ing)?|split(?:s|ting)?|refactor(?:s|ed|ing)?|add(?:s|ed|ing)?|extend(?:s|ed|ing)?"
    r"|adjust(?:s|ed|ing)?|tid(?:y|ies|ied|ying)|bump(?:s|ed|ing)?|reformat(?:s|ted|ting)?)\b",
    re.IGNORECASE,
)
_LEAVE_BE = re.compile(
    r"\b(?:not|never|without|don'?t|keep|keeping|kept|leave|leaving|unchanged|untouched|intact|as (?:it )?is|see|cf)\b",
    re.IGNORECASE,
)
_GOAL_CLAUSES = re.compile(
    r"(?:\b(so( that)?|make|makes|making|until|till|get|getting|let|letting)\b[^.;]*?\bpass(es|ing)?\b"
    r"|[\w./:\[\]-]+\s+(?:(?:should|must|will|to|now)\s+)?(?:passes|pass|passing)\b)(?:\s*\([^)]*\))?",
    re.IGNORECASE,
)
_CLAUSE_BREAKS = re.compile(r"[;,]|:\s|\.\s|\s[—–-]\s")
# Files that make pytest pass over a folder (it takes one holding pyvenv.cfg for a virtualenv).
COLLECTION_BLINDERS = frozenset({"pyvenv.cfg"})


@dataclass
class GuardReport:
    problems: list[str] = field(default_factory=list)
    protected_touched: list[str] = field(default_factory=list)  # modified or deleted, not granted
    granted: list[str] = field(default_factory=list)  # protected, but a ticked item named them
    grants: list[str] = field(default_factory=list)  # the ticked items that may grant: the user's
    idle_ticks: str = ""  # items ticked with nothing but whitespace changed: red unless a test now passes

    def allows(self, name: str) -> bool:
        """Does an item this lap ticked, open since the run started, ask for a change to this file?"""
        return _named_in(name, self._asking[0])

    def allows_setup(self, name: str) -> bool:
        """A change to how pytest runs needs an item that names the file and says what it is
        (a plugin, a conftest, pytest's configuration), not one that names it in passing."""
        return _named_in(name, self._asking[1])

    @cached_property
    def _asking(self) -> tuple[frozenset[str], frozenset[str]]:
        """The words of the grants' clauses that ask for a change, of them all and of those that
        name pytest's set-up: asked once per file, so a lap that ticks many items and changes
        many files costs their sum, not their product. `grants` is set before the first question."""
        asking = {item: _asking_words(item) for item in self.grants}
        setup = [words for item, words in asking.items() if _SETUP_WORDS.search(item)]
        return frozenset().union(*asking.values()), frozenset().union(*setup)


# .gitattributes: an encoding, ident or eol attribute changes what a checkout of a file holds,
# a test file's included, without changing its blob. .gitmodules: a submodule is code from
# elsewhere that the checks then run.
CONFIG_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "noxfile.py",
        "pyproject.toml",
        "ralph.yaml",
        ".pre-commit-config.yaml",
        ".gitattributes",
        ".gitmodules",
        ".mcp.json",
    }
)
# And what a check's program reads to know what to run and how to judge (check_files.py): a new
# one takes over, GNUmakefile beside a Makefile, mypy.ini beside pyproject.toml.
CONFIG_GLOBS = check_files.FILE_NAMES


def check_lap(
    cwd: Path,
    green: str,
    commit: str,
    changes: dict[str, tuple[str, str]],
    protect: list[str],
    todo_name: str,
    progress_name: str,
    base: str,
) -> GuardReport:
    """Everything a lap did between the last green commit and its own commit (`changes`:
    the changed paths, as git.changes gives them) that it may not."""
    statuses = {path: status for path, (status, _) in changes.items()}
    report = GuardReport()
    before = todo.parse(git.show_file(cwd, green, todo_name))
    after = todo.parse(git.show_file(cwd, commit, todo_name))
    ticked = todo.newly_ticked(before, after)
    # Only items open when the run started grant: not one a lap added, nor one the user had
    # already ticked (a lap could untick it, then tick it again).
    users_items = {item.text for item in todo.parse(git.show_file(cwd, base, todo_name)) if not item.done}
    report.grants = [item for item in ticked if item in users_items]
    report.problems += _not_files(changes, [todo_name, progress_name])
    report.problems += todo_problems(before, after)
    if ticked and not _did_work(cwd, green, commit, statuses, [todo_name, progress_name]):
        report.idle_ticks = (
            f"ticked without work: {len(ticked)} item(s) ticked, nothing but whitespace "
            f"changed outside {todo_name} and {progress_name}, and no test or check went from failing to passing"
        )
    blinders = [
        path
        for path, status in statuses.items()
        if status != "D" and path.rsplit("/", 1)[-1] in COLLECTION_BLINDERS and not report.allows(path)
    ]
    if blinders:
        report.problems.append(f"files that make pytest skip their folder: {', '.join(sorted(blinders)[:5])}")
    report.problems += _shadowing_problems(cwd, green, commit, changes, report)
    report.problems += _stub_problems(cwd, commit, changes, report)
    links = [path for path, (_, mode) in changes.items() if mode == "120000"]
    report.problems += _symlink_problems(cwd, green, commit, links, protect, [todo_name, progress_name])
    for path, status in statuses.items():
        added_freely = status == "A" and not is_config(path.rsplit("/", 1)[-1]) and path not in protect
        if added_freely or not _is_protected(cwd, green, commit, path, protect):
            continue
        if report.allows(path):
            report.granted.append(path)
        else:
            report.protected_touched.append(path)
    if report.protected_touched:
        what = {"A": "added", "D": "deleted"}
        verb = ", ".join(f"{path} ({what.get(statuses[path], 'modified')})" for path in report.protected_touched)
        report.problems.append(f"protected files changed: {verb}")
    return report


def _not_files(changes: dict[str, tuple[str, str]], names: list[str]) -> list[str]:
    """The TODO or PROGRESS file made a folder or a submodule: ralph reads the job's items and
    the handoff from them as files, and writes them when it puts a lap onto a moved line (a
    folder's listing is no checklist, and no file can be written over it)."""
    problems = []
    for name in names:
        inside = any(path.startswith(name + "/") and status != "D" for path, (status, _) in changes.items())
        kind = "a folder" if inside else "a submodule" if changes.get(name, ("", ""))[1] == "160000" else ""
        if kind:
            problems.append(f"{name} is {kind} in the lap's commit, not a file: ralph reads and writes it as one")
    return problems


def is_config(name: str) -> bool:
    """A file name that decides how a check runs or what it sees, wherever it is added."""
    return name in CONFIG_NAMES or any(fnmatch.fnmatchcase(name, glob) for glob in CONFIG_GLOBS)


def _did_work(cwd: Path, green: str, commit: str, statuses: dict[str, str], notes: list[str]) -> bool:
    """A file added or deleted (an empty __init__.py is work), or a change that is more than
    whitespace and blank lines, outside the TODO and PROGRESS files."""
    elsewhere = {path: status for path, status in statuses.items() if path not in notes}
    return any(status != "M" for status in elsewhere.values()) or (
        bool(elsewhere) and git.changes_beyond_whitespace(cwd, green, commit, notes)
    )


def _shadowing_problems(
    cwd: Path, green: str, commit: str, changes: dict[str, tuple[str, str]], report: GuardReport
) -> list[str]:
    added = [path for path, (status, _) in changes.items() if status in "AT" and not report.allows(path)]
    links = {path for path in added if changes[path][1] == "120000"}
    added = shadowing.candidates(added, links)
    if not added:
        return []
    found = shadowing.shadowing(added, links, git.files_at(cwd, green), git.files_at(cwd, commit))
    return [f"new modules shadow what the checks import: {', '.join(found[:5])}"] if found else []


def _stub_problems(cwd: Path, commit: str, changes: dict[str, tuple[str, str]], report: GuardReport) -> list[str]:
    """A stub added beside a module of the tree: mypy, given a folder or the module's name, reads
    the stub in its place and never checks the code (calc.pyi hides calc.py)."""
    stubs = [path for path, (status, _) in changes.items() if status == "A" and path.endswith(".pyi")]
    stubs = [path for path in stubs if not report.allows(path)]
    if not stubs:
        return []
    files = set(git.files_at(cwd, commit))
    hiding = sorted(path for path in stubs if path[:-1] in files)
    return [f"stubs that hide their module from type checkers: {', '.join(hiding[:5])}"] if hiding else []


def _symlink_problems(
    cwd: Path, green: str, commit: str, links: list[str], protect: list[str], files: list[str]
) -> list[str]:
    """A link the lap commits where a protected file, the TODO or PROGRESS should be (ralph and
    the tools would follow it to different files), or to anything outside the repository."""
    at_protected = [path for path in links if path in files or _is_protected(cwd, green, commit, path, protect)]
    outside = [
        path
        for path in links
        if path not in at_protected and _leaves_repository(path, git.show_file(cwd, commit, path) or "")
    ]
    problems = [f"symbolic links where protected files belong: {', '.join(at_protected[:5])}"] if at_protected else []
    if outside:
        problems.append(f"symbolic links to outside the repository: {', '.join(outside[:5])}")
    return problems


def _leaves_repository(path: str, target: str) -> bool:
    if target.startswith("/"):
        return True
    depth = len(Path(path).parts) - 1  # folders above the link, inside the repository
    for part in Path(target).parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return True
    return False


def todo_problems(before: list[todo.Item], after: list[todo.Item]) -> list[str]:
    """Open items may be ticked, never deleted or reworded; new items are fine, and so is a new
    order. Counted by text, so an item listed twice is kept twice."""
    remaining = Counter(item.text for item in after)
    lost = []
    for item in before:
        if item.done:
            continue
        if remaining[item.text] > 0:
            remaining[item.text] -= 1
        else:
            lost.append(item.text)
    if not lost:
        return []
    shown = "; ".join(f"'{text}'" for text in lost[:3])
    return [f"TODO items deleted or reworded: {shown}" + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")]


def _is_protected(cwd: Path, green: str, commit: str, path: str, protect: list[str]) -> bool:
    """Whole-file patterns are read together, in order (so `!` excludes); a `file#table` one
    protects that table of the files it matches, and `*.rs#tests` the test functions of Rust
    files (unit tests live in the code's own files)."""
    if matches([pattern for pattern in protect if "#" not in pattern], path):
        return True
    for pattern in protect:
        file_pattern, _, table = pattern.partition("#")
        if not table or not matches([file_pattern], path):
            continue
        old, new = git.show_file(cwd, green, path), git.show_file(cwd, commit, path)
        if table == "tests" and path.endswith(".rs"):
            if _tests_changed(old, new):
                return True
        elif _table(old, path, table) != _table(new, path, table):
            return True
    return False


def _tests_changed(old: str | None, new: str | None) -> bool:
    """Did a test function of the last green commit's Rust file change or vanish? New ones are
    free. Bytes that are not UTF-8 (git gives them as U+FFFD) need no rule of their own: rustc
    builds no such file, so its tests fail, and a test of lossy decoding may hold a real U+FFFD."""
    if old is None:
        return False
    after = inline_tests.rust_tests(new or "")
    return any(after.get(key) != text for key, text in inline_tests.rust_tests(old).items())


def _table(text: str | None, path: str, name: str) -> object:
    """One table (TOML, dotted prefix) or section (INI) of a file, or all those a name ending in
    `*` starts (by name); None when absent, "unreadable" when the file is."""
    if text is None:
        return None
    if path.endswith((".toml", ".json")):
        try:
            data = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
        except (tomllib.TOMLDecodeError, ValueError, RecursionError):
            return "unreadable"
        *parents, last = name.split(".")
        found: object = data
        for key in parents:
            found = found.get(key) if isinstance(found, dict) else None
        return _entry(found, last)
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return "unreadable"
    return _entry({section: dict(parser[section]) for section in parser.sections()}, name)


def _entry(table: object, key: str) -> object:
    """`table[key]`, or for `prefix*` the entries whose keys start so (None for none: a file
    without them and no file read the same)."""
    if not isinstance(table, dict):
        return None
    if not key.endswith("*"):
        return table.get(key)
    return {name: value for name, value in table.items() if name.startswith(key[:-1])} or None


def _asking_words(item: str) -> set[str]:
    """The words (paths, file names) of the item's clauses, goal clauses aside, that have a word
    asking for a change and none saying to leave it be: the files it asks to change."""
    clauses = _CLAUSE_BREAKS.split(_GOAL_CLAUSES.sub(" ", item))
    asking = [clause for clause in clauses if _CHANGE_WORDS.search(clause) and not _LEAVE_BE.search(clause)]
    return {word for clause in asking for word in re.findall(r"[\w./-]+", clause)}


def _named_in(path: str, words: frozenset[str]) -> bool:
    """Is the file named among these words, by its path or its file name?"""
    return bool(path) and (path in words or path.rsplit("/", 1)[-1] in words)


def spec_of(patterns: list[str]) -> pathspec.GitIgnoreSpec:
    """Patterns as git users mean them (.gitignore rules: `tests/`, `/conftest.py`, `[ab]`, `!`),
    by pathspec rather than by a matcher of our own."""
    return _spec(tuple(patterns))


@lru_cache(maxsize=256)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def matches(patterns: list[str], path: str) -> bool:
    return spec_of(patterns).match_file(path)
