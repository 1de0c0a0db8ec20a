"""What a lap may not do, whatever its checks say: change what is not its to change, rewrite the TODO.

A lap may add, modify or delete a path only where the run's scope allows it and the path is not
one of those never in scope (ralph/verdict/scope.py), unless a grant names it: an item of the
run's base TODO.md ending in `(may change: PATH …)` (ralph/verdict/grants.py), the user's own
words as committed, which hold for every lap. Protected paths (`protect`, the existing tests) may
be added to, not modified or deleted, unless a grant names them; `*.rs#tests` protects the test
functions of Rust files (ralph/verdict/inline_tests.py): a lap may add one, not change or remove
one the last green commit had. Whatever `protect` says, a new module may not shadow what the
checks import (ralph/verdict/shadowing.py), nor a new stub hide its module from a type checker,
unless granted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ralph import git, todo
from ralph.facts import paths
from ralph.verdict import grants, inline_tests, shadowing
from ralph.verdict.scope import Scope, never_itself

_WHAT = {"A": "added", "D": "deleted"}
EVERY_PATH = Scope()
SHOWN = 5


@dataclass
class GuardReport:
    problems: list[str] = field(default_factory=list)
    protected_touched: list[str] = field(default_factory=list)  # modified or deleted, not granted
    out_of_scope: list[str] = field(default_factory=list)  # added, modified or deleted, not granted
    granted: list[str] = field(default_factory=list)  # not the lap's to change, but a grant names them
    grants: tuple[str, ...] = ()  # what the items of the run's base TODO.md grant
    idle_ticks: str = ""  # items ticked with nothing changed: red unless a test or check now passes
    # The grants compiled once, for the grants they were compiled from: a lap asks of every test
    # that is gone and every path it changed.
    _compiled: tuple[tuple[str, ...], Callable[[str], bool]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def allows(self, path: str) -> bool:
        """Does a grant of the user's name this path?"""
        if not path:
            return False
        if self._compiled is None or self._compiled[0] is not self.grants:
            self._compiled = (self.grants, grants.matcher(tuple(self.grants)))
        return self._compiled[1](path)


def check_lap(
    cwd: Path,
    green: str,
    commit: str,
    changes: dict[str, tuple[str, str]],
    protect: list[str],
    todo_name: str,
    progress_name: str,
    base: str,
    scope: Scope = EVERY_PATH,
    *,
    todo_items: tuple[list[todo.Item], list[todo.Item]] | None = None,
) -> GuardReport:
    """Everything a lap did between the last green commit and its own commit (`changes`:
    the changed paths, as git.changes gives them) that it may not. `todo_items`: the TODO's
    items at `green` and at `commit`, when the caller has read them (else read here)."""
    statuses = {path: status for path, (status, _) in changes.items()}
    notes = [todo_name, progress_name]
    report = GuardReport(grants=base_grants(cwd, base, todo_name))
    before, after = todo_items or (
        todo.parse(git.show_file(cwd, green, todo_name)),
        todo.parse(git.show_file(cwd, commit, todo_name)),
    )
    ticked = todo.newly_ticked(before, after)
    report.problems += _not_files(changes, notes)
    report.problems += todo_problems(before, after)
    report.problems += _lap_grants(before, after)
    if ticked and not any(path not in notes for path in statuses):
        report.idle_ticks = (
            f"ticked without work: {len(ticked)} item(s) ticked, nothing changed outside {todo_name} and "
            f"{progress_name}, and no test or check went from failing to passing"
        )
    runs = scope.run_files(lambda path: git.show_file(cwd, green, path))
    links = [path for path, (_, mode) in changes.items() if mode == "120000"]
    report.problems += _scope_problems(statuses, protect, scope, runs, notes, report, frozenset(links))
    report.problems += _shadowing_problems(cwd, green, commit, changes, report)
    report.problems += _stub_problems(cwd, commit, changes, report)
    report.problems += _symlink_problems(cwd, green, commit, links, protect, notes)
    judged = set(report.out_of_scope) | set(report.granted)
    for path, status in statuses.items():
        if status == "A" or path in judged or not _is_protected(cwd, green, commit, path, protect):
            continue
        (report.granted if report.allows(path) else report.protected_touched).append(path)
    if report.protected_touched:
        verb = ", ".join(f"{path} ({_WHAT.get(statuses[path], 'modified')})" for path in report.protected_touched)
        report.problems.append(f"protected files changed: {verb}")
    return report


def base_grants(cwd: Path, base: str, todo_name: str) -> tuple[str, ...]:
    """What the items of the run's base TODO.md grant, ticked or not: the user's words as
    committed. An item a lap, a split, the planner or an issue added grants nothing."""
    if _OBJECT_ID.fullmatch(base):  # what a commit holds never changes: read once a run, not once a lap
        return _grants_at(cwd, base, todo_name)
    return grants.all_of(item.text for item in todo.parse(git.show_file(cwd, base, todo_name)))


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@lru_cache(maxsize=4)
def _grants_at(cwd: Path, commit: str, todo_name: str) -> tuple[str, ...]:
    return grants.all_of(item.text for item in todo.parse(git.show_file(cwd, commit, todo_name)))


def _scope_problems(
    statuses: dict[str, str],
    protect: list[str],
    scope: Scope,
    runs: tuple[str, ...],
    notes: list[str],
    report: GuardReport,
    links: frozenset[str],
) -> list[str]:
    """The paths the lap changed that are outside the run's scope or never in any, and not granted.
    What is never in scope opens only to a grant that names it: the path itself, or a folder that
    is never in scope itself (`.github/`), never a folder that merely holds it (`src/` and
    src/conftest.py)."""
    found: dict[str, list[str]] = {"outside": [], "never": []}
    for path in sorted(statuses):
        why = "" if path in notes else scope.why_not(path, runs, protect, link=path in links)
        if not why:  # in scope: no grant needed (and none looked for, one path by one grant)
            continue
        opens = [grant for grant in report.grants if grants.allows((grant,), path)]
        if why == "never":
            opens = [grant for grant in opens if grant == path or never_itself(grant, runs, tuple(protect))]
        if opens:
            report.granted.append(path)
        else:
            report.out_of_scope.append(path)
            found[why].append(path)
    problems = []
    for why, named in found.items():
        if not named:
            continue
        listed = _listed([f"{path} ({_WHAT.get(statuses[path], 'modified')})" for path in named])
        grant = f'grant it with "(may change: {", ".join(named[:SHOWN])})" at the end of a TODO item of yours'
        if why == "outside":
            problems.append(f"outside the run's scope: {listed} — {grant}, or widen scope: in ralph.yaml")
        else:
            problems.append(
                f"never in scope (what runs, installs or configures the code and its checks): {listed} — {grant}"
            )
    return problems


def _listed(entries: list[str]) -> str:
    shown = ", ".join(entries[:SHOWN])
    return shown + (f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else "")


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
    """A stub beside a module of the tree, the lap having added one of the two: mypy, given a
    folder or the module's name, reads the stub in its place and never checks the code (calc.pyi
    hides calc.py), whichever came first (a stub one lap adds before the module another adds)."""
    added = [path for path, (status, _) in changes.items() if status == "A"]
    stubs = {path for path in added if path.endswith(".pyi")} | {path + "i" for path in added if path.endswith(".py")}
    stubs = {path for path in stubs if not report.allows(path)}
    if not stubs:
        return []
    asked = sorted(stubs | {path[:-1] for path in stubs})
    if len(asked) > 1000:  # (a command line of paths has a limit; the whole listing has none)
        files = set(git.files_at(cwd, commit))
    else:
        listing = git.out(cwd, "--literal-pathspecs", "ls-tree", "-r", "-z", "--name-only", commit, "--", *asked)
        files = set(listing.split("\0"))
    hiding = sorted(path for path in stubs if path in files and path[:-1] in files)
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


def _lap_grants(before: list[todo.Item], after: list[todo.Item]) -> list[str]:
    """An item the lap added may not carry a grant: it would grant nothing in this run, but once
    landed it would read as the user's own in the next run's base TODO.md."""
    if todo.same_items(before, after):
        return []
    remaining = Counter(item.text for item in before)
    written = []
    for item in after:
        if remaining[item.text] > 0:
            remaining[item.text] -= 1
        elif grants.of(item.text):
            written.append(item.text)
    if not written:
        return []
    return [f"items the lap added carry a grant, which only you write: '{written[0]}' — drop its (may change: …)"]


def todo_problems(before: list[todo.Item], after: list[todo.Item]) -> list[str]:
    """Open items may be ticked, never deleted or reworded; new items are fine, and so is a new
    order. Counted by text, so an item listed twice is kept twice."""
    if todo.same_items(before, after):
        return []
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
    """Whole-file patterns are read together, in order (so `!` excludes); `*.rs#tests` protects
    the test functions of Rust files (unit tests live in the code's own files). Any other
    `file#table` protects its whole file: the tables it once meant were configuration files',
    now never in scope whole (ralph/verdict/scope.py)."""
    if matches([pattern.partition("#")[0] for pattern in protect if not pattern.endswith("#tests")], path):
        return True
    rust = [pattern.partition("#")[0] for pattern in protect if pattern.endswith("#tests")]
    if not path.endswith(".rs") or not matches(rust, path):
        return False
    return _tests_changed(git.show_file(cwd, green, path), git.show_file(cwd, commit, path))


def _tests_changed(old: str | None, new: str | None) -> bool:
    """Did a test function of the last green commit's Rust file change or vanish? New ones are
    free. Bytes that are not UTF-8 (git gives them as U+FFFD) need no rule of their own: rustc
    builds no such file, so its tests fail, and a test of lossy decoding may hold a real U+FFFD."""
    if old is None:
        return False
    after = inline_tests.rust_tests(new or "")
    return any(after.get(key) != text for key, text in inline_tests.rust_tests(old).items())


def matches(patterns: list[str], path: str) -> bool:
    """Patterns as git users mean them (.gitignore rules: `tests/`, `/conftest.py`, `[ab]`, `!`)."""
    return paths.spec(tuple(patterns)).match_file(path)
