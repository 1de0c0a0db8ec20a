"""The code's shape, as issue 27 set it: packages that name the architecture, no import cycle
(a local import counts: it hides a cycle, it does not remove it), modules and functions that
fit on a screen or two."""

from __future__ import annotations

import ast
from pathlib import Path

import ralph

PACKAGE = Path(ralph.__file__).parent
MODULES = {
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
    for path in sorted(PACKAGE.rglob("*.py"))
}
TOP_ENTRIES = 14  # cli, errors, config, todo, __init__, __main__ and the eight packages
LONGEST_MODULE = 400  # lines
LONGEST_FUNCTION = 60  # lines


def _imports(name: str, path: Path) -> set[str]:
    """The ralph modules importing `name` runs: every import at any depth (local ones too),
    and the packages above each (importing ralph.git.ledger runs ralph/git/__init__.py) but
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
    entries = [entry.name for entry in PACKAGE.iterdir() if entry.name != "__pycache__"]
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


# The layers, bottom first: a module may import its own layer and those below, never one above.
# A name is a package or a module; a module belongs to the longest name that covers it, so a
# package can sit in one layer while a few of its modules sit in another (docs/design.md says why).
LAYERS = (
    ("ralph.errors", "ralph.show", "ralph.todo"),  # the words: errors, what ralph prints, TODO.md
    ("ralph.isolation",),  # processes, jails, the sandbox, the crash points
    ("ralph.git",),  # the one door to git and the git model (layout, store, remote)
    (  # a lap's workspace: a checkout made with git, ralph's own git beside it
        "ralph.isolation.workspace",
        "ralph.isolation.own_git",
        "ralph.isolation.lap_git_dir",
        "ralph.isolation.lap_rules",
        "ralph.isolation.provision",
        "ralph.isolation.user_state",
    ),
    (
        "ralph.agents.presets",
        "ralph.agents.logins",
        "ralph.verdict.check_files",
        "ralph.verdict.junit",
        "ralph.verdict.pytest_results",
    ),
    ("ralph.config",),  # ralph.yaml, checked against the facts of the layer below
    ("ralph.agents",),
    ("ralph.verdict",),
    ("ralph.git.records", "ralph.git.ledger"),  # what is stored: laps' agents, checks and verdicts
    ("ralph.run",),
    ("ralph.bench",),  # jobs built from sdists, run in both modes by the loop above
    ("ralph.commands",),
    ("ralph.cli", "ralph.__main__"),
)
# Edges that still climb, each named with why it is left; the rule holds for every other module.
CLIMBS = {
    # Type-only: a commit's hooks run with the whole RunContext (its workspace, jail, env, config).
    ("ralph.verdict.commit_hooks", "ralph.run.context"),
}


def _layer(name: str) -> int:
    """The layer of module `name`: that of the longest name in LAYERS covering it."""
    covering = [
        (len(entry), number)
        for number, entries in enumerate(LAYERS)
        for entry in entries
        if name == entry or name.startswith(entry + ".")
    ]
    assert covering, f"{name} is in no layer of LAYERS"
    return max(covering)[1]


def _only_a_docstring(name: str) -> bool:
    """Whether importing `name` runs nothing but a docstring: a package's __init__ that only
    says what the package holds is no step up for a module that imports one of its modules."""
    body = ast.parse(MODULES[name].read_text()).body
    return MODULES[name].name == "__init__.py" and all(
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body
    )


def test_no_module_imports_a_layer_above_its_own():
    climbs = {
        (name, imported)
        for name, path in MODULES.items()
        for imported in _imports(name, path)
        if not _only_a_docstring(imported) and _layer(imported) > _layer(name)
    }
    assert climbs == CLIMBS


def test_every_layer_name_is_a_module():
    assert {entry for entries in LAYERS for entry in entries} <= set(MODULES)


def test_a_module_is_in_the_layer_of_the_longest_name_covering_it():
    one_of_each = [
        *("ralph.show.ui", "ralph.isolation.proc", "ralph.git.layout", "ralph.isolation.workspace"),
        *("ralph.agents.presets", "ralph.config.agent", "ralph.agents.openai", "ralph.verdict.ratchet"),
        *("ralph.git.records", "ralph.run.lap", "ralph.bench.jobs", "ralph.commands.log", "ralph.cli"),
    ]
    assert [_layer(name) for name in one_of_each] == list(range(len(LAYERS)))
