"""Per-test outcomes of `go test -json`, in pytest's `TestResults`, read from the check's output.

`go test -json` prints one test2json event a line (`{"Action": "pass", "Package": ..., "Test":
...}`); the go command's own messages (build errors, `FAIL <package> [build failed]`) come as
plain lines among them, since a check's stdout and stderr are one stream. Any line that is not
an event is passed over; nothing in the output makes `read` raise.

A test's id is `<file>::<name>`: the file is the `_test.go` file of the package's folder (relative
to the repository top) that declares `func <TestName>(`, else the folder alone (`.` for a module
at the top); the name is go's, subtests included (`TestSub/case_one`). A package's folder is its
import path less the path of the module that holds it (the `module` line of a go.mod under the
work tree; the longest that matches, so nested modules and go.work are found).

A subtest is a test of its own, and so is its parent: the parent passes or fails by itself (a
`t.Error` after its `t.Run`s), and a subtest that calls t.Skip is skipped while its parent still
passes, so skipping one case of a table reads as a skipped test. What else becomes failing:

- a test that started (`run`) more often than it ended: the binary died inside it (a panic in
  another goroutine, os.Exit, a signal, a timeout): counted in `not_run`;
- a package that failed to build or set up (go 1.19's `FAIL <pkg> [build failed]` line, or a
  `fail` event with `FailedBuild` from go 1.24 on), or whose binary failed with no failing test
  of its own (a panic in init or TestMain, os.Exit before or after the tests, a leak checker in
  TestMain): one id `<package folder>::<collection>`.

A test reported more than once (`-count`, or a line printed by the test itself) folds as
pytest's: failing if any report fails. What the code under test can forge: test2json reads the
test binary's output, so a test that prints `--- PASS: TestOther` (go 1.20 on: after the \\x16
framing byte) makes a pass event for TestOther. A real failure of TestOther still wins; a pass or
skip of a function no _test.go file of the package declares (one the lap deleted) is not counted,
so the deleted test reads as gone. What remains: a forged pass of a declared test that did not
run, or ran and never ended where the forger's `--- PASS` line stands in for its end.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ralph.facts.junit import ID_MAX
from ralph.facts.pytest_results import COLLECTION, TestResults, fold
from ralph.isolation.files import regular_text, walk

MANIFEST_MAX = 1 << 20  # bytes of a go.mod read
SOURCE_MAX = 8 << 20  # bytes of a _test.go file scanned for its functions
SKIPPED_FOLDERS = ("vendor", "testdata", "node_modules")  # besides `.x` and `_x`, which go skips too
_SETUP_FAILED = re.compile(r"FAIL\s+(\S+) \[(?:build|setup) failed\]")
_MODULE = re.compile(r'^\s*module\s+"?([^"\s]+)"?', re.MULTILINE)
_FUNCTION = re.compile(r"^func\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)
_ENDS = {"pass": "passed", "bench": "passed", "fail": "failure", "skip": "skipped"}


def read(output: str, root: Path) -> TestResults | None:
    """The outcomes in `output`, None when it holds no test2json event and no package that
    failed to build: then go test did not run."""
    run = _Run()
    for line in output.split("\n"):  # never splitlines: a JSON string may hold U+2028 or \x1c
        event = _event(line)
        if event is None:
            run.text(line)
        else:
            run.add(event)
    if not run.packages:
        return None
    return run.results(_Tree(root))


def text(output: str) -> str:
    """What `go test` would have printed for people: each event's Output in order, and every
    line that is not an event as it came (build errors, go's own messages)."""
    shown = []
    lines = output.split("\n")
    for at, line in enumerate(lines):
        event = _event(line)
        if event is None:
            shown.append(line if at == len(lines) - 1 else line + "\n")
        elif event.get("Action") == "output" and isinstance(event.get("Output"), str):
            shown.append(event["Output"])
    return "".join(shown)


def _event(line: str) -> dict | None:
    """The test2json event on `line`, or None for a line that is not one."""
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: a line nested deep on purpose
        return None
    if not isinstance(event, dict) or not isinstance(event.get("Action"), str):
        return None
    return event if isinstance(event.get("Package"), str) and event["Package"] else None


@dataclass
class _Test:
    started: int = 0
    ended: int = 0
    outcomes: set[str] = field(default_factory=set)


@dataclass
class _Run:
    """What the events said, by package and test."""

    tests: dict[tuple[str, str], _Test] = field(default_factory=dict)
    packages: set[str] = field(default_factory=set)  # every package the output spoke of
    failed: set[str] = field(default_factory=set)  # packages whose binary failed
    unbuilt: set[str] = field(default_factory=set)  # packages that failed to build or set up

    def text(self, line: str) -> None:
        found = _SETUP_FAILED.match(line)
        if found:
            self.packages.add(found[1])
            self.unbuilt.add(found[1])

    def add(self, event: dict) -> None:
        package, action, name = event["Package"], event["Action"], event.get("Test")
        self.packages.add(package)
        if action == "output" and isinstance(event.get("Output"), str):
            self.text(event["Output"])  # go 1.24 on: the build-failed line as an event
        elif not isinstance(name, str) or not name:
            if action == "fail":
                self.failed.add(package)
                if event.get("FailedBuild"):
                    self.unbuilt.add(package)
        elif action == "run":
            self.tests.setdefault((package, name), _Test()).started += 1
        elif action in _ENDS:
            test = self.tests.setdefault((package, name), _Test())
            test.ended += 1
            test.outcomes.add(_ENDS[action])

    def results(self, tree: _Tree) -> TestResults:
        outcomes: dict[str, set[str]] = {}
        failing_packages, unended = set(), set()
        for (package, name), test in self.tests.items():
            file = tree.file(package, name)
            found = test.outcomes if file else test.outcomes & {"failure"}  # no such function: forged
            test_id = _id(file or tree.folder(package), name)
            if test.started > test.ended:  # it began and the binary never said how it ended
                unended.add(test_id)
            if "failure" in found or test.started > test.ended:
                failing_packages.add(package)
            if found or test.started > test.ended:
                outcomes.setdefault(test_id, set()).update(found)
        unended -= {test_id for test_id in unended if "failure" in outcomes[test_id]}
        for test_id in unended:
            outcomes[test_id].add("failure")
        for package in self.unbuilt | (self.failed - failing_packages):
            outcomes.setdefault(_id(tree.folder(package), COLLECTION), set()).add("error")
        results = fold(outcomes)
        results.counts.failed -= len(unended)  # failing, counted as pytest counts a test never reached
        results.counts.not_run = len(unended)
        return results


def _id(where: str, name: str) -> str:
    """A test id of text that survives any encoding (a forged line may hold lone surrogates), and
    of bounded length: a long one is cut, never dropped, so a failure is never lost."""
    return f"{where}::{name}".encode(errors="replace").decode()[:ID_MAX]


class _Tree:
    """Where in the work tree a package's folder and a test's file are."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.modules = _modules(root)  # module path: its folder, relative to the top
        self.longest_first = sorted(self.modules, key=len, reverse=True)
        self.folders: dict[str, str | None] = {}  # package: its folder in the tree, as _inside found it
        self.functions: dict[str, dict[str, str]] = {}  # folder: function name: its _test.go file

    def folder(self, package: str) -> str:
        return self._inside(package) or package  # outside the tree: go test all, the standard library

    def file(self, package: str, test: str) -> str | None:
        """The _test.go file that declares the test's function; the package's folder where the
        tree cannot say (a package of no module in it); None where the tree says no such
        function exists: go runs only the functions of a package's _test.go files, so an
        event of another is one the code under test printed."""
        folder = self._inside(package)
        if folder is None:
            return package
        if folder not in self.functions:
            self.functions[folder] = _test_functions(self.root, folder)
        return self.functions[folder].get(test.split("/", 1)[0])

    def _inside(self, package: str) -> str | None:
        if package not in self.folders:
            self.folders[package] = self._find(package)
        return self.folders[package]

    def _find(self, package: str) -> str | None:
        """The package's folder in the tree, None for one of no module of the tree (or a forged
        event's, whose `..` must not lead outside it)."""
        for module in self.longest_first:
            if package == module or package.startswith(module + "/"):
                inside = package[len(module) :].strip("/")
                if ".." in inside.split("/"):
                    return None
                return "/".join(part for part in (self.modules[module], inside) if part not in ("", ".")) or "."
        return None


def _modules(root: Path) -> dict[str, str]:
    """Each module's path by the folder of its go.mod, found without entering the folders go
    itself leaves out."""
    found: dict[str, str] = {}
    for folder, folders, files in walk(root):
        if "go.mod" in files:
            text = regular_text(Path(folder, "go.mod"), MANIFEST_MAX) or ""
            module = _MODULE.search(text)
            if module:
                found.setdefault(module[1], Path(folder).relative_to(root).as_posix())
        folders[:] = [name for name in folders if not name.startswith((".", "_")) and name not in SKIPPED_FOLDERS]
    return found


def _test_functions(root: Path, folder: str) -> dict[str, str]:
    """The functions declared in a folder's _test.go files, each by the file that declares it."""
    functions: dict[str, str] = {}
    try:
        names = sorted(path.name for path in Path(root, folder).iterdir() if path.name.endswith("_test.go"))
    except (OSError, ValueError):
        return functions
    for name in names:
        source = regular_text(Path(root, folder, name), SOURCE_MAX) or ""
        file = name if folder == "." else f"{folder}/{name}"
        for function in _FUNCTION.finditer(source):
            functions.setdefault(function[1], file)
    return functions
