"""New modules that would run before, or instead of, what the checks mean to import.

Python imports the first `name.py` or `name/__init__.py` it finds along sys.path, and pytest
puts the folder of every test module (above its packages) in front of it. So a lap that adds
`tests/calc.py` next to `tests/test_calc.py` gets its file imported as the project's `calc`;
`pytest.py` at the root replaces pytest under `python -m pytest`; a `.pth` file or a
`sitecustomize.py` runs at interpreter start, and a `*.dist-info` folder on the path can name
a pytest plugin, before any plugin of ralph's could look; compiled bytecode is run in place of
its source. These are read from the commit itself, as paths: nothing here runs the lap's code.
(ralph's pytest plugin reports, besides, any module of the tree that was imported in front of
another of its name: an installed package's, or one on a `pythonpath` the configuration adds.)
"""

from __future__ import annotations

import sys
from pathlib import PurePosixPath

RUNNER = frozenset(
    {
        "pytest",
        "_pytest",
        "pluggy",
        "py",
        "xdist",
        "execnet",
        "_ralph_pytest",
        "sitecustomize",
        "usercustomize",
        "iniconfig",
        "packaging",
        "pygments",
        "colorama",
        "exceptiongroup",
        "tomli",
    }
)
PLUGIN_HOSTS = frozenset({"coverage", "hypothesis", "anyio", "faker", "typeguard", "syrupy", "trio"})
MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")  # what Python imports from a folder on its path
SOURCE_ROOTS = ("", "src")  # where a project's own packages live, besides the tests' folders


def _runs_with_pytest(name: str) -> bool:
    """pytest, what it imports, and what is named like one of its plugins (pytest_cov, the
    plugins' usual hosts): a module of the tree by that name would be loaded as the plugin."""
    return (
        name in RUNNER
        or name in PLUGIN_HOSTS
        or name.startswith("pytest_")
        or name.endswith(("_pytest", "pytestplugin"))
    )


def candidates(added: list[str], links: set[str]) -> list[str]:
    """The added paths worth a look: modules, startup files, bytecode, links (a link to a
    folder, named like a package, is that package)."""
    return [path for path in added if path in links or path.endswith(MODULE_SUFFIXES) or _startup(path)]


def shadowing(added: list[str], links: set[str], files_before: list[str], files_now: list[str]) -> list[str]:
    """`added` paths that put a module, by its top-level name, in front of pytest, the standard
    library or a package of the project (as `files_before` had it), and startup files or
    bytecode anywhere; each as `path (why)`."""
    found = [f"{path} ({_startup(path)})" for path in added if _startup(path)]
    roots_now, roots_before = import_roots(files_now), import_roots(files_before)
    project = {
        name for path in files_before if not _is_test(path) for name in [module_name(path, roots_before)] if name
    }
    for path in added:
        name = module_name(path, roots_now, is_link=path in links)
        if (
            name
            and not _startup(path)
            and (_runs_with_pytest(name) or name in sys.stdlib_module_names or name in project)
        ):
            found.append(f"{path} ({name})")
    return found


def _startup(path: str) -> str:
    """What makes the path run at start-up or in place of a source: '' when nothing does."""
    if path.endswith(".pth"):
        return ".pth"
    if path.endswith((".pyc", ".pyo")) or "__pycache__" in path.split("/"):
        return "bytecode"
    if any(folder.endswith((".dist-info", ".egg-info")) for folder in path.split("/")[:-1]):
        return "package metadata"
    return ""


def import_roots(files: list[str]) -> set[str]:
    """The folders on the import path: the root, src/, and the folder pytest inserts for each
    test module (the first one above it that is not a package)."""
    packages = {str(PurePosixPath(path).parent) for path in files if path.endswith("/__init__.py")}
    roots = set(SOURCE_ROOTS)
    for path in files:
        if _is_test(path):
            folder = str(PurePosixPath(path).parent)
            while folder in packages:
                folder = str(PurePosixPath(folder).parent)
            roots.add("" if folder == "." else folder)
    return roots


def module_name(path: str, roots: set[str], *, is_link: bool = False) -> str | None:
    """The top-level name a file is imported by, when it sits directly in an import root as a
    module (`calc.py`, an extension `calc.cpython-311-x86_64-linux-gnu.so`), a package's
    `__init__` (of any of those kinds), or a link (to a folder: the package itself)."""
    pure = PurePosixPath(path)
    if pure.name.split(".")[0] == "__init__" and pure.suffix in MODULE_SUFFIXES:
        pure = pure.parent
        name = pure.name
    elif pure.suffix in MODULE_SUFFIXES or is_link:
        name = pure.name.split(".")[0]
    else:
        return None
    folder = str(pure.parent)
    return name if ("" if folder == "." else folder) in roots and name.isidentifier() else None


def _is_test(path: str) -> bool:
    name = PurePosixPath(path).name
    return name == "conftest.py" or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))
