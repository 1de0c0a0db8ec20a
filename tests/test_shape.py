"""The code's shape, as issue 27 set it: packages that name the architecture, no import cycle
(a local import counts: it hides a cycle, it does not remove it), modules and functions that
fit on a screen or two."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ralph

PACKAGE = Path(ralph.__file__).parent
MODULES = {
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
    for path in sorted(PACKAGE.rglob("*.py"))
}
TOP_ENTRIES = 19  # cli, api, errors, __init__, __main__ and the fourteen packages (py.typed is no code)
LONGEST_MODULE = 400  # lines
LONGEST_FUNCTION = 60  # lines


def _imports(name: str, path: Path) -> set[str]:
    """The ralph modules importing `name` runs: every import at any depth (local ones too),
    and the packages above each (importing ralph.records.ledger runs ralph/git/__init__.py) but
    its own."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names)
    ran = {module for module in found if module in MODULES}
    own = {".".join(name.split(".")[:end]) for end in range(1, name.count(".") + 2)}
    for module in list(ran):
        parts = module.split(".")
        ran.update(".".join(parts[:end]) for end in range(1, len(parts)))
    return ran - own  # a module's own packages are already importing when it runs


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph`, as the modules along it, or None."""
    done: set[str] = set()
    for start in graph:
        stack, path, on_path = [(start, iter(sorted(graph[start])))], [start], {start}
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return path[path.index(child) :] + [child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return None


def test_no_module_imports_itself_round_about():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_a_cycle_through_a_local_import():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_top_of_ralph_names_the_architecture():
    entries = [entry.name for entry in PACKAGE.iterdir() if entry.name not in ("__pycache__", "py.typed")]
    assert len(entries) <= TOP_ENTRIES, sorted(entries)


def test_modules_and_functions_fit_on_a_screen_or_two():
    long_modules = {}
    long_functions = {}
    for name, path in MODULES.items():
        text = path.read_text()
        if text.count("\n") > LONGEST_MODULE:
            long_modules[name] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > LONGEST_FUNCTION:
                    long_functions[f"{name}.{node.name}"] = length
    assert (long_modules, long_functions) == ({}, {})


# The packages, bottom first: a module imports only its own package and those below it. A
# top-level module (errors, cli) stands for itself. No exceptions: a climbing import is
# a package in the wrong place (docs/design.md draws the same order).
PACKAGES = (
    "ralph.errors",  # the one place errors become exit codes
    "ralph.todo",  # TODO.md: the checklist and its ticks
    "ralph.show",  # what ralph prints: events, lines, the live view
    "ralph.isolation",  # processes, the jail and the sandbox, toolchains, crash points (git-free)
    "ralph.git",  # the one door to git, ref names, where refs are written
    "ralph.facts",  # what ralph.yaml is checked against: presets, logins, test runners' results
    "ralph.workspace",  # a lap's checkout made with git, ralph's own git beside it
    "ralph.config",  # ralph.yaml
    "ralph.agents",  # the agents and their roles (planner, judge)
    "ralph.verdict",  # what decides a lap: checks, ratchet, guard, hooks' reports, decide.py
    "ralph.records",  # what is stored: laps' notes and the run's record, the state read back
    "ralph.lap",  # one lap's phases
    "ralph.run",  # the run around its laps: the loop, the modes, parallel slots, workers
    "ralph.bench",  # jobs built from sdists, run by the loop
    "ralph.api",  # ralph as a library: the public surface, which the commands call too
    "ralph.commands",  # one module per command
    "ralph.cli",
    "ralph.__main__",
)


def _package(name: str) -> str:
    """The entry of PACKAGES module `name` belongs to (`ralph` itself: the version only)."""
    covering = [entry for entry in PACKAGES if name == entry or name.startswith(entry + ".")]
    assert len(covering) == 1 or name == "ralph", f"{name} is in no package of PACKAGES"
    return covering[0] if covering else "ralph"


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {entry: set() for entry in PACKAGES}
    for name, path in MODULES.items():
        if name != "ralph":
            graph[_package(name)].update(_package(imported) for imported in _imports(name, path) if imported != "ralph")
    return {package: imported - {package} for package, imported in graph.items()}


def test_every_package_and_top_level_module_is_in_the_order():
    tops = {".".join(name.split(".")[:2]) for name in MODULES if name != "ralph"}
    assert tops == set(PACKAGES)


def test_a_package_imports_only_packages_below_it():
    rank = {entry: number for number, entry in enumerate(PACKAGES)}
    climbs = {
        (package, imported)
        for package, imports in _package_graph().items()
        for imported in imports
        if rank[imported] > rank[package]
    }
    assert climbs == set()


def test_no_package_imports_itself_round_about():
    assert _cycle(_package_graph()) is None


def test_the_command_line_starts_without_what_its_commands_load():
    """`ralph --help`, shell completion and the git hooks ralph ships start without rich, pydantic,
    markdown-it, GitPython or openai: each command loads what it uses (issue 41: `ralph status` in
    0.2 s has no time for the rest)."""
    code = "import sys\nfrom ralph.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\nprint(*sys.modules)"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in ran.stdout.split()}
    assert loaded & {"rich", "pydantic", "markdown_it", "git", "openai"} == set()
