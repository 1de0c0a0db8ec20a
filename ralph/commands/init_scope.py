"""The scope `ralph init` proposes (issue 38): what laps of an honest job change, read off the
layout, as globs from the repository's root. The package's source folders (Python's `src/<pkg>/`
or `<pkg>/`, its modules at the root; Node's `src/`, `lib/`, its entry files; each Go package's
folder; each Rust crate's `src/`, `tests/`, `benches/`, `examples/`), the test folders (new
files: the test files there are `protect`ed), the docs, the readmes and change logs. TODO.md and
PROGRESS.md are in every scope without being listed. Only folders and files that are there are
proposed: a repository with none of them gets no scope (every path but the never-in-scope ones).
"""

from __future__ import annotations

import os
from pathlib import Path

from ralph.commands.init_sources import json_mapping

ALWAYS = ("README*", "CHANGELOG*")
NOTES = ("README", "CHANGELOG", "CHANGES", "HISTORY", "NEWS")  # the root files people keep notes in
DOCS = ("docs", "doc")
TESTS = ("tests", "test", "testing", "spec", "__tests__")
NOT_SOURCES = {*TESTS, *DOCS, "src", "vendor", "node_modules", "build", "dist", "target", "venv", "testdata"}
# Root files that are the build's or a runner's, not the package's: never what a `*.py` means.
PYTHON_TOOLS = {"setup.py", "conftest.py", "noxfile.py"}
RUST_PARTS = ("src", "tests", "benches", "examples")
MAX_FOLDERS = 2000  # folders looked through for Go files: a huge tree costs nothing more


def proposed(top: Path) -> list[str]:
    """The scope for this layout, [] where no source folder is found."""
    sources = _python(top) + _node(top) + _go(top) + _rust(top)
    if not sources:
        return []
    tests = [f"{name}/" for name in TESTS if _is_dir(top / name)]
    docs = [f"{name}/" for name in DOCS if _is_dir(top / name)]
    return list(dict.fromkeys(sources + tests + docs + list(ALWAYS) + _notes(top)))


def _notes(top: Path) -> list[str]:
    """The root's readmes and change logs that ALWAYS's globs miss (`Readme.md`, `CHANGES.rst`):
    a glob is case-sensitive, as git's are."""
    names = sorted(name for name in _names(top) if name.upper().startswith(NOTES) and (top / name).is_file())
    return [name for name in names if not name.startswith(("README", "CHANGELOG"))]


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink()
    except OSError:
        return False


def _folders(folder: Path) -> list[Path]:
    """The folders in `folder` (not hidden, no links), in name order."""
    try:
        return sorted(path for path in folder.iterdir() if not path.name.startswith(".") and _is_dir(path))
    except OSError:
        return []


def _python_files(folder: Path) -> list[str]:
    try:
        return sorted(path.name for path in folder.glob("*.py") if path.is_file())
    except OSError:
        return []


def _python(top: Path) -> list[str]:
    """Packages under src/ and at the root (a folder with __init__.py), modules beside them."""
    src = top / "src"
    found = [f"src/{path.name}/" for path in _folders(src) if _python_files(path) and "." not in path.name]
    found += ["src/*.py"] if _python_files(src) else []
    packages = [path for path in _folders(top) if path.name not in NOT_SOURCES and (path / "__init__.py").is_file()]
    found += [f"{path.name}/" for path in packages]
    modules = set(_python_files(top)) - PYTHON_TOOLS
    return found + (["*.py"] if modules else [])


def _node(top: Path) -> list[str]:
    """src/ and lib/, and the entry files package.json names (main, module, types): the file at
    the root, or the top folder it is in."""
    if not (top / "package.json").is_file():
        return []
    found = [f"{name}/" for name in ("src", "lib") if _is_dir(top / name)]
    package = json_mapping(top / "package.json")
    named = [package.get(key) for key in ("main", "module", "types", "typings")]
    entries = [entry.removeprefix("./") for entry in named if isinstance(entry, str)]
    entries += [f"index.{kind}" for kind in ("js", "mjs", "cjs", "ts", "d.ts")]
    for entry in entries:
        first, slash, _ = entry.partition("/")
        if slash and first not in NOT_SOURCES and not first.startswith(".") and _is_dir(top / first):
            found.append(f"{first}/")
        elif not slash and (top / entry).is_file():
            found.append(entry)
    return found


def _go(top: Path) -> list[str]:
    """The root package's files, and each top folder holding a Go package at any depth."""
    if not (top / "go.mod").is_file():
        return []
    found = ["*.go"] if any(name.endswith(".go") for name in _names(top)) else []
    found += [f"{path.name}/" for path in _folders(top) if path.name not in NOT_SOURCES and _holds_go(path)]
    return found + (["testdata/"] if _is_dir(top / "testdata") else [])


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _holds_go(folder: Path) -> bool:
    for seen, (_, _, files) in enumerate(os.walk(folder)):
        if seen >= MAX_FOLDERS:
            return False
        if any(name.endswith(".go") for name in files):
            return True
    return False


def _rust(top: Path) -> list[str]:
    """Each crate's own folders: the root's and its workspace's (one or two folders down)."""
    if not (top / "Cargo.toml").is_file():
        return []
    crates = [Path(".")] + sorted(
        manifest.parent.relative_to(top)
        for pattern in ("*/Cargo.toml", "*/*/Cargo.toml")
        for manifest in _glob(top, pattern)
        if not manifest.parent.relative_to(top).parts[0].startswith(".")
        and manifest.parent.relative_to(top).parts[0] not in ("target", "vendor")
    )
    return [f"{(crate / part).as_posix()}/" for crate in crates for part in RUST_PARTS if _is_dir(top / crate / part)]


def _glob(top: Path, pattern: str) -> list[Path]:
    try:
        return [path for path in top.glob(pattern) if path.is_file()]
    except OSError:
        return []


def yaml_lines(scope: list[str]) -> str:
    """ralph.yaml's `scope:` section and what it means, or the same commented out when none is proposed."""
    said = [
        "# scope: what laps may add, change or delete (globs from the repository's root), proposed from the",
        "# layout; TODO.md and PROGRESS.md always. The test folders take new files: the tests there are",
        "# protected (protect:). A lap that changes a path outside it is red. To let one item change more,",
        '# end the item in TODO.md with "(may change: PATH, PATH)" (paths from the root; your committed',
        "# TODO.md's items only), or widen scope here. Some paths are never in scope by a glob: the",
        "# files a runtime or a tool runs by name, dependency manifests, CI (docs/trust.md).",
    ]
    if not scope:
        said += ["# No source folder found: none proposed, so every path but those never in scope.", "# scope:"]
        return "\n".join(said + ['#   - "src/"']) + "\n"
    return "\n".join(said + ["scope:"] + [f'  - "{glob}"' for glob in scope]) + "\n"
