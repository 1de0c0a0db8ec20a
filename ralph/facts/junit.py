"""Per-test outcomes from the JUnit XML reports a check writes, in pytest's `TestResults`.

A check may name its reports, `{run: "npm test", junit: "reports/*.xml"}`: a path or git glob
relative to the work tree, matched by pathspec (`validate_pattern` checks one). Before the check runs,
`remove(workspace, pattern)` deletes whatever matches, so that nothing is left from before;
after it, `read(matching(workspace, pattern), root=workspace)` gives one of three answers:

- None: no file matched, the check wrote no report;
- it raises `ReportUnreadable`, whose text is a one-line reason naming the file and the cause,
  when any file is not one ralph reads: a link (never followed), a FIFO or other non-regular
  file, over REPORT_MAX_BYTES alone or all together, not UTF-8, with a DTD (`<!DOCTYPE`, so no
  entity ever expands), not well-formed, with a root other than <testsuites> or <testsuite>, or
  without any <testsuite> or <testcase>. Then no outcome counts, not even those of other files;
- TestResults: every <testcase>'s outcome, by test id.

A test's id is the non-empty of: its file (the testcase's `file`, else its nearest testsuite's),
the names of the testsuites around it from the outermost in, its `classname`, its `name`; a part
equal to the one before it is left out, and the rest are joined with "::". A part that starts
with `root` (runners write absolute paths) has it cut off, so that ids stay the same whatever
folder a lap runs in. An outcome is a testcase's own child: <failure> fails it, <error> errors
it, <skipped> skips it, none passes it (<flakyFailure>, <rerunFailure> and the like record a
retry, not an outcome). An id found more than once is folded as pytest's are: failing if any is
a failure or an error, else skipped if any is skipped, else passed.

Which file a test is in comes from the report's structure, never from a test's name (a lap names
its tests): the testcase's `file`, else its testsuite's `file`, else its `classname` where that is
its testsuite's name (vitest writes a testsuite per file, its classname the file). A testcase
that stands for its whole file — a file the runner could not load, or that ran no test (node,
vitest and jest-junit report one so) — is the one whose name is that file; where the report
gives no file at all (node 20), a testcase outside every testsuite whose name is a path inside
`root` (node names a file so; a test's name in its source cannot know the folder a lap runs in).
Its id is `<file>::<collection>`, as pytest's for a module that did not import: it passes no
test. A testsuite whose `failures=` and `errors=` add up to more than its failing testcases (an
error outside any test) fails `<its file or name>::<collection>` too. `passing_files` lists the
files of the passing tests, "" for a passing test the report gives no file: the ratchet lets a
failing file's `<collection>` go only when a test of that file passes.
"""

from __future__ import annotations

import errno
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

from ralph.facts import paths
from ralph.facts.paths import anchored
from ralph.facts.pytest_results import COLLECTION, REPORT_MAX_BYTES, TestResults, _regular_file, fold
from ralph.isolation.files import walk

OUTCOMES = ("failure", "error", "skipped", "passed")  # the first found of a testcase's is its outcome
ROOTS = ("testsuites", "testsuite")
MAX_DEPTH = 64  # testsuites inside one another
ID_MAX = 4096  # characters in a test id; all the ids together: REPORT_MAX_BYTES


class ReportUnreadable(Exception):
    """A report ralph will not read; str() is the reason, one line naming the file."""


def validate_pattern(pattern: str) -> str:
    """The pattern, plain (no `./`, no doubled `/`); ValueError for one that could reach outside
    the work tree, names no file, or means something else as git's glob (pathspec matches it)."""
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    where = f"junit: {pattern!r} must be a path or glob inside the repository, relative to its top"
    if pattern.startswith(("/", "~")) or ".." in parts or "\0" in pattern or parts[:1] == [".git"]:
        raise ValueError(where)
    if not parts or parts[-1] == "**":
        raise ValueError(f"junit: {pattern!r} names no file: end it with a file name or glob, as in reports/*.xml")
    plain = "/".join(parts)
    # A .gitignore line that starts with `!` is a negation, and git drops a line's trailing spaces
    # (each part is checked: _may_hold matches the pattern's first parts alone).
    if plain.startswith("!") or any(part != part.rstrip() for part in parts) or not _glob(plain):
        raise ValueError(
            f"junit: {pattern!r} is not a glob as git reads one: no leading `!`, no trailing space, [ ] closed"
        )
    return plain


def matching(workspace: Path, pattern: str) -> list[Path]:
    """What `pattern` matches in the work tree, sorted: files, and links of any kind (listed, so
    that read() refuses them and remove() deletes them); never a folder. Found without entering
    a linked folder or .git, so never anything outside the work tree."""
    wanted = validate_pattern(pattern)
    found = []
    for folder, folders, files in walk(workspace):  # links are among the files: listed, never entered
        here = Path(folder).relative_to(workspace).parts
        found += [Path(folder, name) for name in files if _matches("/".join((*here, name)), wanted)]
        folders[:] = [name for name in folders if name != ".git" and _may_hold((*here, name), wanted.split("/"))]
    return sorted(found)


def tracked_matches(tracked: list[str], pattern: str) -> list[str]:
    """The paths of `tracked` (files git tracks, relative to the top) that `pattern` matches:
    remove() would delete them before every check, changing the tree the checks judge."""
    wanted = validate_pattern(pattern)
    return [path for path in tracked if _matches(path, wanted)]


def remove(workspace: Path, pattern: str) -> list[Path]:
    """Delete what `pattern` matches, before the check writes its reports: a file, a link itself
    (never what it points to), a FIFO a lap left there; never a folder. What was deleted."""
    removed = []
    for path in matching(workspace, pattern):
        try:
            os.unlink(path)  # never follows a link, never deletes a folder
        except OSError:
            continue  # gone already, or swapped for a folder
        removed.append(path)
    return removed


def read(files: list[Path], root: Path | None = None) -> TestResults | None:
    """The outcomes in every report of `files`, each read whole; None for no files. Raises
    ReportUnreadable (see the module's docstring) rather than give part of them."""
    if not files:
        return None
    report = _Report(root)
    size = 0
    for path in files:
        shown = report.shown(path)
        data = _contents(path, shown)
        size += len(data)
        if size > REPORT_MAX_BYTES:
            raise ReportUnreadable(f"{shown}: the reports add up to over {REPORT_MAX_BYTES} bytes")
        text = _text(data, shown)
        del data  # only the text is held while it is parsed
        report.parse(text, shown)
    results = fold(report.outcomes)
    passing = {report.files.get(test, "") for test in results.passed_ids if not test.endswith(COLLECTION)}
    return results.model_copy(update={"passing_files": sorted(passing)})


def _contents(path: Path, shown: str) -> bytes:
    try:
        return _regular_file(path)
    except OSError as error:
        why = "a link, never followed" if error.errno == errno.ELOOP else error.strerror
        raise ReportUnreadable(f"{shown}: cannot be read ({why})") from None
    except ValueError:
        raise ReportUnreadable(f"{shown}: {_not_regular(path)}") from None


def _not_regular(path: Path) -> str:
    try:
        info = os.lstat(path)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return f"{info.st_size} bytes, over the {REPORT_MAX_BYTES} a report may have"
    return "not a regular file (a FIFO, a socket, a device or a folder)"


def _text(data: bytes, shown: str) -> str:
    """The report as text, once it is known to declare no DTD. Fed as text, it is parsed as
    UTF-8 whatever encoding or byte order mark it has, so the prolog looked at is the one the
    parser sees (fed bytes, expat follows a UTF-16 mark over any encoding it is told)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ReportUnreadable(f"{shown}: not UTF-8 (at byte {error.start})") from None
    if _declares_dtd(text):
        raise ReportUnreadable(f"{shown}: declares a DTD (<!DOCTYPE>), which ralph refuses: its entities could expand")
    return text


def _declares_dtd(text: str) -> bool:
    """Does anything but the XML declaration, processing instructions and comments come
    before the first element in `<!` form? Only there can a DTD, and with it an entity, be
    declared; a `<!DOCTYPE` further on is text, or an error the parser stops at."""
    at = text.find("<")
    while at >= 0:
        if text.startswith("<?", at):
            end = text.find("?>", at)
        elif text.startswith("<!--", at):
            end = text.find("-->", at)
        else:
            return text.startswith("<!", at)
        at = text.find("<", end) if end >= 0 else -1
    return False


class _Report:
    """An ElementTree parser target that keeps each testcase's id and outcome, not the tree
    (a report's output is never held), and counts on no recursion however deep the nesting."""

    def __init__(self, root: Path | None) -> None:
        folders = [str(root), os.path.realpath(root)] if root else []
        self.prefixes = {folder.rstrip("/") + "/" for folder in folders}
        self.outcomes: dict[str, set[str]] = {}
        self.files: dict[str, str] = {}  # test id: its file, by the report's structure
        self.id_chars = 0
        self.open: list[str] = []  # the elements open, by tag
        self.suites: list[_Suite] = []  # the testsuites open
        self.cases: list[list[str]] = []  # the testcases open: id, outcome
        self.first = ""  # the root element's tag
        self.seen = False  # a testsuite or testcase

    def shown(self, path: Path) -> str:
        return self.relative(str(path))

    def relative(self, value: str) -> str:
        for prefix in self.prefixes:
            if value.startswith(prefix):
                return value[len(prefix) :]
        return value

    def parse(self, text: str, shown: str) -> None:
        """Add the outcomes of one report."""
        self.open, self.suites, self.cases, self.first, self.seen = [], [], [], "", False
        parser = ET.XMLParser(target=self)
        try:
            parser.feed(text)
            parser.close()
        except ET.ParseError as error:
            raise ReportUnreadable(f"{shown}: not well-formed XML ({error})") from None
        except _Refused as error:
            raise ReportUnreadable(f"{shown}: {error}") from None
        if self.first not in ROOTS:
            raise ReportUnreadable(f"{shown}: not a JUnit report (its root element is <{self.first}>)")
        if not self.seen:
            raise ReportUnreadable(f"{shown}: holds no <testsuite> and no <testcase>")

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        tag = tag.rpartition("}")[2]  # a namespace, should a runner use one
        parent = self.open[-1] if self.open else ""
        self.first = self.first or tag
        self.open.append(tag)
        if tag == "testsuite":
            self.seen = True
            if len(self.suites) == MAX_DEPTH:
                raise _Refused(f"testsuites nested over {MAX_DEPTH} deep")
            name, file = attrs.get("name", ""), attrs.get("file") or self._suite_file()
            self.suites.append(_Suite(name, file, _count(attrs, "failures") + _count(attrs, "errors")))
        elif tag == "testcase":
            self.seen = True
            test, file = self._id(attrs), self._file(attrs)
            if self._is_whole_file(attrs, file):
                test = f"{self.relative(attrs['name'])}::{COLLECTION}"
            self.files[test] = self.relative(file)
            self.cases.append([test, "passed"])
        elif parent == "testcase" and tag in OUTCOMES:
            case = self.cases[-1]
            case[1] = min(case[1], tag, key=OUTCOMES.index)

    def end(self, tag: str) -> None:
        closed = self.open.pop()
        if closed == "testsuite":
            suite = self.suites.pop()
            if suite.claimed > suite.failing:  # its own count says something failed outside its testcases
                where = [suite.file, *(outer.name for outer in self.suites), suite.name]
                self._add(self._joined(where) + f"::{COLLECTION}", "error")
                for outer in self.suites:  # counted once, where it was found
                    outer.failing += suite.claimed - suite.failing
        elif closed == "testcase":
            test, outcome = self.cases.pop()
            if outcome in ("failure", "error"):
                for suite in self.suites:
                    suite.failing += 1
            self._add(test, outcome)

    def _add(self, test: str, outcome: str) -> None:
        if test not in self.outcomes:
            self.id_chars += len(test)
            if self.id_chars > REPORT_MAX_BYTES:
                raise _Refused(f"its test ids add up to over {REPORT_MAX_BYTES} characters")
        self.outcomes.setdefault(test, set()).add(outcome)

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        raise _Refused("declares a DTD (<!DOCTYPE>), which ralph refuses")  # _declares_dtd saw it first

    def close(self) -> None:
        return None

    def _suite_file(self) -> str:
        return self.suites[-1].file if self.suites else ""

    def _file(self, attrs: dict[str, str]) -> str:
        """The testcase's file as the report's structure gives it: a `file` attribute, else the
        classname of a testcase in a testsuite of that name (vitest's suite per file); never a name."""
        classname = attrs.get("classname", "")
        in_suite_named = bool(self.suites) and classname == self.suites[-1].name
        return attrs.get("file") or self._suite_file() or (classname if in_suite_named else "")

    def _is_whole_file(self, attrs: dict[str, str], file: str) -> bool:
        """Does the testcase stand for its whole file (one that did not load, or ran no test)?"""
        name = attrs.get("name", "")
        if file:
            return bool(name) and self.relative(name) == self.relative(file)
        return not self.suites and self.relative(name) != name  # node 20: a path inside the root

    def _id(self, attrs: dict[str, str]) -> str:
        suites = [suite.name for suite in self.suites]
        parts = [attrs.get("file") or self._suite_file(), *suites, attrs.get("classname", ""), attrs.get("name", "")]
        if sum(map(len, parts)) > ID_MAX:
            raise _Refused(f"a test id over {ID_MAX} characters")
        test = self._joined(parts)
        if not test:
            raise _Refused("a <testcase> with no name, classname or file")
        return test

    def _joined(self, parts: list[str]) -> str:
        kept: list[str] = []
        for part in map(self.relative, parts):
            if part and part != (kept[-1] if kept else None):
                kept.append(part)
        return "::".join(kept)


class _Suite:
    """A testsuite open: its name, its file, the failing tests its counts claim and those found."""

    def __init__(self, name: str, file: str, claimed: int) -> None:
        self.name, self.file, self.claimed, self.failing = name, file, claimed, 0


def _count(attrs: dict[str, str], key: str) -> int:
    """A testsuite's count; 0 where it is missing or not a number (mocha writes skipped="-1")."""
    value = attrs.get(key, "").strip()
    return int(value) if value.isdigit() else 0


class _Refused(Exception):
    """Raised inside the parser: what makes the report one ralph will not read."""


def _glob(pattern: str) -> bool:
    """Does pathspec read `pattern` as a glob? An unclosed `[` makes a line it skips, a reversed
    range (`[z-a]`) one it cannot compile."""
    return paths.problem("/" + pattern) is None


def _matches(path: str, pattern: str) -> bool:
    """Does the file at `path` match `pattern` itself? In a .gitignore, a line that matches a folder
    takes everything inside it, so "reports" would take reports/x.xml: that match ends at the
    folder's `/`, and a file's own never ends so."""
    found = anchored((pattern,)).patterns[0].match_file(path)
    return found is not None and not found.match.group().endswith("/")


def _may_hold(folder: tuple[str, ...], pattern: list[str]) -> bool:
    """Could anything inside `folder` match `pattern`? pathspec cannot say, so without this
    matching() would walk every folder of the workspace (node_modules, target) before each check.
    The folder's first parts must match the pattern's, up to a `**`."""
    for depth in range(len(folder)):
        if depth >= len(pattern) - 1:  # the pattern's last part names what is found, not a folder
            return False
        if pattern[depth] == "**":
            return True
        if not _matches("/".join(folder[: depth + 1]), "/".join(pattern[: depth + 1])):
            return False
    return True
