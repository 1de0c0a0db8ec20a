"""Per-test outcomes of `cargo test` (libtest's own output), in pytest's `TestResults`.

cargo prints a header for each test binary it runs (`Running unittests src/lib.rs (target/debug/
deps/alpha-0123abcd)`, `Running tests/api.rs (...)`, `Doc-tests alpha`), then libtest prints
`running N tests`, a line `test <path> ... ok|FAILED|ignored[, reason]` for each test, the names
of the failures and `test result: ...`; a build that fails prints ``error: could not compile `x` ``
and runs nothing. Any line the reader does not know is passed over; nothing makes `read` raise.

A test's id is `<file>::<test path>`: the binary's source file relative to the repository top
(`crates/a/src/lib.rs::tests::adds`), its package folder found from the Cargo.toml files under
the work tree (target/ and hidden folders left out); where no file is known, the package folder.
A doc-test's is `<file>::<item>` (`src/lib.rs::Pair<A,B>::new`, `src/lib.rs::(crate)` for the
crate's own docs): its ` (line N)` is dropped, since an edit above the item moves it, so the
doc-tests of one item fold into one id. `#[ignore]` counts as skipped. An id seen more than once
folds as pytest's: failing if any report fails.

Failing besides the tests that failed: one id `<file or folder>::<collection>` for a crate that
did not compile (its package folder; an integration test's own file where cargo names it), for a
test binary that died before its `test result:` line (a signal, an abort: the tests it had not
reported count in `not_run`; under --test-threads=1 the one it had started is failing), for one
that failed with no failing test, and for one whose lines disagree with its own summary: more
failures counted than named (a real FAILED line hidden by output glued in front of it), or more
passes named than counted.

What the code under test can forge: libtest's lines share stdout with the tests, and
`std::io::stdout().write_all` is not captured (println! is, unless --nocapture), so a test can
print `test other ... ok`. A forged pass never hides a real failure (failing wins, and the
`failures:` list and the summary's count back the FAILED line), and a forged pass of a test that
did not run outnumbers the summary's passes, which fails the binary. What remains: a process the
test leaves running can print whole forged sections after its binary ended.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ralph.facts.junit import ID_MAX
from ralph.facts.pytest_results import COLLECTION, TestResults, fold
from ralph.isolation.files import regular_text, walk

MANIFEST_MAX = 1 << 20  # bytes of a Cargo.toml read
SKIPPED_FOLDERS = ("target", "node_modules")  # besides hidden ones
_RUNNING = re.compile(r"^\s+Running (?:unittests )?(?:(?P<source>\S.*?) \((?P<binary>[^()]+)\)|(?P<bare>\S+))\s*$")
_DOC_TESTS = re.compile(r"^\s+Doc-tests (?P<crate>\S+)\s*$")
_COMPILE = re.compile(r"^error: could not compile `(?P<crate>[^`]+)`(?: \((?P<target>[^)]*)\))?")
_ANNOUNCED = re.compile(r"^running (\d+) tests?$")
_SUMMARY = re.compile(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored")
_BINARY_FAILED = re.compile(r"^error: \w+ failed, to rerun pass|^\s*process didn't exit successfully")
_HASH = re.compile(r"-[0-9a-f]{16}(?:\.exe)?$")
_ENDINGS = {" ... ok": "passed", " ... FAILED": "failure", " ... ignored": "skipped"}
_SUFFIX = re.compile(r" - (?:should panic|compile fail|compile)$")
_LINE = re.compile(r"(?:^| )\(line \d+\)$")
_COLOR = re.compile(r"\x1b\[[0-9;]*m")  # CARGO_TERM_COLOR=always, --color always


def read(output: str, root: Path) -> TestResults | None:
    """The outcomes in `output`, None when it holds no test binary's header and no compile error:
    then cargo test did not run."""
    sections: list[_Section] = []
    unbuilt: list[tuple[str, str]] = []  # (crate, target) of each compile error
    for line in output.split("\n"):  # never splitlines: a test may print \x1c or U+2028
        line = _COLOR.sub("", line) if "\x1b" in line else line
        line = line.rstrip("\r")
        section = _section(line)
        if section:
            sections.append(section)
        elif compile_error := _COMPILE.match(line):
            unbuilt.append((compile_error["crate"], compile_error["target"] or ""))
        elif sections:
            sections[-1].feed(line)
    if not (sections or unbuilt):
        return None
    return _results(sections, unbuilt, _Crates(root))


def _section(line: str) -> _Section | None:
    running = _RUNNING.match(line)
    if running:
        binary = (running["binary"] or running["bare"]).replace("\\", "/").rsplit("/", 1)[-1]
        return _Section(crate=_HASH.sub("", binary), source=running["source"])
    doc = _DOC_TESTS.match(line)
    return _Section(crate=doc["crate"], doc=True) if doc else None


@dataclass
class _Section:
    """One test binary's lines (or one crate's doc-tests)."""

    crate: str  # the binary's name before its hash, or the doc-tests' crate
    source: str | None = None  # the target's file, relative to its package folder
    doc: bool = False
    announced: int | None = None  # running N tests
    outcomes: dict[str, set[str]] = field(default_factory=dict)  # name as libtest printed it
    listed: set[str] = field(default_factory=set)  # names under the last `failures:`
    summary: tuple[int, int, int] | None = None  # passed, failed, ignored
    failed: bool = False  # cargo or libtest said the binary failed
    started: str | None = None  # a test whose result is still to come
    listing: bool = False

    def feed(self, line: str) -> None:
        if self.listing and line.startswith("    ") and line.strip():
            self.listed.add(line.strip())
            return
        self.listing = line == "failures:"
        if summary := _SUMMARY.match(line):
            self.summary = (int(summary[1]), int(summary[2]), int(summary[3]))
        elif announced := _ANNOUNCED.match(line):
            self.announced = int(announced[1])
        elif _BINARY_FAILED.match(line):
            self.failed = True
        else:
            self.result(line)

    def result(self, line: str) -> None:
        """A test's result: a whole line, or one glued after output a test printed without a
        newline; or, under --test-threads=1, `test x ... ` now and its result on a later line,
        after whatever the test printed: meanwhile no other test runs, so a started line holding
        more, or another test's result line, is that test's output."""
        name, outcome, whole = _result(line)
        if not whole and line.startswith("test ") and " ... " in line + " ":
            self.started = line[5:].split(" ...", 1)[0]
        elif self.started and name and name != self.started:
            return
        elif name:
            self.outcomes.setdefault(name, set()).add(outcome)
            self.started = None
        elif self.started and (line.strip() == "ok" or line.rstrip().endswith("FAILED")):
            self.outcomes.setdefault(self.started, set()).add("passed" if line.strip() == "ok" else "failure")
            self.started = None

    def broken(self) -> bool:
        """Did the binary fail in a way its test lines do not account for?"""
        for name in self.listed:
            self.outcomes.setdefault(name, set()).add("failure")
        failing = sum("failure" in found for found in self.outcomes.values())
        passing = sum("passed" in found for found in self.outcomes.values())
        if self.summary is None:
            return self.announced is not None or self.failed
        passed, failed, _ = self.summary
        return failed > failing or passing > passed or (self.failed and not failing)

    def not_run(self) -> int:
        """Tests the binary announced and never reported: it died before their end."""
        if self.summary is not None:
            return 0
        return max(0, (self.announced or 0) - len(self.outcomes))


def _result(line: str) -> tuple[str, str, bool]:
    """The test and outcome a line ends with, and whether the line is that result alone; found
    with string searches only, so each line costs its length whatever it holds."""
    ending = next((ending for ending in _ENDINGS if line.endswith(ending)), None)
    if ending:
        head, outcome = line[: -len(ending)], _ENDINGS[ending]
    elif (at := line.rfind(" ... ignored, ")) >= 0:  # `ignored, <the reason #[ignore] gave>`
        head, outcome = line[:at], "skipped"
    else:
        return "", "", False
    if head.startswith("test ") and " ... " not in head:
        return head[5:], outcome, True
    at = head.rfind("test ")  # after output a test printed with no newline
    return (head[at + 5 :], outcome, False) if at >= 0 else ("", "", False)


def _results(sections: list[_Section], unbuilt: list[tuple[str, str]], crates: _Crates) -> TestResults:
    outcomes: dict[str, set[str]] = {}
    not_run = 0
    previous = None  # the package of the last binary, which cargo runs next to its others
    for section in sections:
        where = crates.place(section, previous)
        previous = where.package
        not_run += section.not_run()
        if section.started is not None and section.summary is None:  # it died inside this one
            section.outcomes.setdefault(section.started, set()).add("failure")
        broken = section.broken()
        for name, found in section.outcomes.items():
            outcomes.setdefault(_id(where.test_file(name), where.test_name(name)), set()).update(found)
        if broken:
            outcomes.setdefault(_id(where.file or where.package, COLLECTION), set()).add("error")
    for crate, target in unbuilt:
        outcomes.setdefault(_id(crates.unbuilt(crate, target), COLLECTION), set()).add("error")
    results = fold(outcomes)
    results.counts.not_run = not_run
    return results


def _id(where: str, name: str) -> str:
    """A test id of text that survives any encoding (a forged line may hold lone surrogates), and
    of bounded length: a long one is cut, never dropped, so a failure is never lost."""
    return f"{where}::{name}".encode(errors="replace").decode()[:ID_MAX]


@dataclass
class _Place:
    """Where one section's tests live in the tree."""

    package: str  # the package folder, relative to the top
    file: str | None  # the binary's source file; None for doc-tests and where cargo named none
    doc_files: _DocPaths | None = None  # for doc-tests: each file by the path rustdoc printed

    def test_file(self, name: str) -> str:
        if self.doc_files is not None and " - " in name:
            return self.doc_files[name.split(" - ", 1)[0]]
        return self.file or self.package

    def test_name(self, name: str) -> str:
        """The name less what changes with unrelated edits (a doc-test's line) or says how the
        test is judged (` - should panic`, ` - compile fail`)."""
        name = _SUFFIX.sub("", name)
        if self.doc_files is None or " - " not in name:
            return name
        return _LINE.sub("", name.split(" - ", 1)[1]) or "(crate)"


class _Crates:
    """The packages of the work tree, from its Cargo.toml files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.targets: dict[str, set[str]] = {}  # a package's, lib's, bin's or test's name: package folders
        self.packages: dict[str, set[str]] = {}  # a package's or lib's name: package folders
        self.workspaces: list[str] = []
        for folder, manifest in _manifests(root):
            self._add(folder, manifest)

    def _add(self, folder: str, manifest: dict) -> None:
        if isinstance(manifest.get("workspace"), dict):
            self.workspaces.append(folder)
        package = manifest.get("package")
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            return
        lib = manifest.get("lib")
        names = {package["name"], lib.get("name") if isinstance(lib, dict) else None}
        for name in filter(None, names):
            self.packages.setdefault(_crate(str(name)), set()).add(folder)
        for kind in ("bin", "test", "bench", "example"):
            targets = manifest.get(kind)
            for target in targets if isinstance(targets, list) else ():
                names.add(target.get("name") if isinstance(target, dict) else None)
        for name in filter(None, names):
            self.targets.setdefault(_crate(str(name)), set()).add(folder)

    def place(self, section: _Section, previous: str | None) -> _Place:
        if section.doc:
            package = self._one(self.packages.get(_crate(section.crate), set()), previous)
            return _Place(package, None, _DocPaths(self, package))
        if section.source is None:  # cargo before 1.52 named the binary only
            return _Place(self._one(self.targets.get(_crate(section.crate), set()), previous), None)
        source = section.source.replace("\\", "/")
        having = {folder for folder in self._all() if self.is_file(folder, source)}
        named = having & (self.targets.get(_crate(section.crate), set()) | self._by_stem(having, source, section))
        package = self._one(named or having or self.targets.get(_crate(section.crate), set()), previous)
        return _Place(package, _joined(package, source))

    def unbuilt(self, crate: str, target: str) -> str:
        package = self._one(self.packages.get(_crate(crate), set()), None, crate)
        test = re.fullmatch(r'test "([^"]+)"', target)
        for candidate in (f"tests/{test[1]}.rs", f"tests/{test[1]}/main.rs") if test else ():
            if self.is_file(package, candidate):
                return _joined(package, candidate)
        return package

    def _by_stem(self, having: set[str], source: str, section: _Section) -> set[str]:
        """An integration test's binary is named after its file (tests/api.rs: api)."""
        stem = posixpath.splitext(posixpath.basename(source))[0]
        if posixpath.basename(source) == "main.rs":
            stem = posixpath.basename(posixpath.dirname(source))
        return having if _crate(stem) == _crate(section.crate) else set()

    def _all(self) -> set[str]:
        return set().union(*self.targets.values()) if self.targets else set()

    def _one(self, folders: set[str], previous: str | None, unknown: str = ".") -> str:
        """One package folder of several: the last binary's (cargo runs a package's binaries one
        after another), else the first by name."""
        if previous in folders:
            return previous
        return min(folders) if folders else unknown

    def is_file(self, folder: str, path: str) -> bool:
        try:
            return (self.root / folder / path).is_file()
        except (OSError, ValueError):
            return False


class _DocPaths(dict[str, str]):
    """A doc-test's path as rustdoc printed it, by the file it names: relative to the workspace
    in today's cargo, to the package in older ones."""

    def __init__(self, crates: _Crates, package: str) -> None:
        super().__init__()
        self.crates, self.package = crates, package

    def __missing__(self, printed: str) -> str:
        printed = printed.replace("\\", "/")
        bases = [self.package, ".", *self.crates.workspaces]
        found = next((base for base in bases if self.crates.is_file(base, printed)), self.package)
        self[printed] = _joined(found, printed)
        return self[printed]


def _joined(folder: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(folder, path)) if folder != "." else posixpath.normpath(path)


def _crate(name: str) -> str:
    return name.replace("-", "_")


def _manifests(root: Path) -> list[tuple[str, dict]]:
    """Each Cargo.toml under the tree by its folder, relative to the top; target/ and hidden
    folders left out."""
    found = []
    for folder, folders, files in walk(root):
        if "Cargo.toml" in files:
            text = regular_text(Path(folder, "Cargo.toml"), MANIFEST_MAX)
            try:
                found.append((Path(folder).relative_to(root).as_posix(), tomllib.loads(text or "")))
            except (tomllib.TOMLDecodeError, RecursionError):
                pass
        folders[:] = [name for name in folders if not name.startswith(".") and name not in SKIPPED_FOLDERS]
    return found
