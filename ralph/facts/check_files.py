"""The files that define how a check runs, read off its command (and off the `repo: local` hooks
of a pre-commit it runs): a lap that rewrites them changes the judge rather than the code (a
Makefile that forges the report, a `package.json` script that no longer runs the tests, an
`ignore_errors = true` for mypy), so they are never in a lap's scope (ralph/verdict/scope.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

import yaml

from ralph.isolation.sandbox import words

_MAKE = ["Makefile", "makefile", "GNUmakefile", "*.mk"]
_NODE = [
    # How the package manager runs a script: `script-shell`, `node-options`, a `yarnPath`.
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    "bunfig.toml",
    "package.json#scripts",
    "package.json#jest",
    "package.json#mocha",
    "jest.config.*",
    # jest's default transform reads babel's configuration for every file, the tests' included.
    "babel.config.*",
    ".babelrc",
    ".babelrc.*",
    "package.json#babel",
    "vitest.config.*",
    "vitest.workspace.*",
    "vite.config.*",
    ".mocharc*",
    "playwright.config.*",
]
# Type checkers and linters: every file each reads its settings from (their documentation's
# lists), since one setting can switch a rule off, drop a module's errors or leave a file out.
# mypy takes the first of mypy.ini, .mypy.ini, pyproject.toml with a [tool.mypy], setup.cfg with a
# [mypy] (and its [mypy-module] sections), so a new mypy.ini wins over the others.
_MYPY = ["mypy.ini", ".mypy.ini", "pyproject.toml#tool.mypy", "setup.cfg#mypy*"]
# ruff reads the closest .ruff.toml, ruff.toml or pyproject.toml with a [tool.ruff] to each file
# it checks, a subfolder's included, and leaves out what .ignore and .gitignore files list.
_RUFF = [".ruff.toml", "ruff.toml", "pyproject.toml#tool.ruff", ".ignore"]
# flake8: the first of setup.cfg, tox.ini, .flake8 with a [flake8] or [flake8:local-plugins].
_FLAKE8 = [".flake8", "setup.cfg#flake8*", "tox.ini#flake8*"]
# pyrightconfig.json wins over pyproject.toml; basedpyright reads its own table as well.
_PYRIGHT = ["pyrightconfig.json", "pyproject.toml#tool.pyright", "pyproject.toml#tool.basedpyright"]
_PYLINT = [
    "pylintrc",
    ".pylintrc",
    "pylintrc.toml",
    ".pylintrc.toml",
    "pyproject.toml#tool.pylint",
    "setup.cfg#pylint*",
    "tox.ini#pylint*",
]
# pre-commit's hooks are written in its own (protected) configuration, not in the command: any of them.
_LINTERS = list(dict.fromkeys(_MYPY + _RUFF + _FLAKE8 + _PYRIGHT + _PYLINT))
# A program's name (or the module `python -m` runs): the files that say what it runs.
BY_PROGRAM = {
    "make": _MAKE,
    "gmake": _MAKE,
    "just": ["justfile", "Justfile", ".justfile"],
    "tox": ["tox.ini", "tox.toml", "pyproject.toml#tool.tox"],
    "nox": ["noxfile.py"],
    "hatch": ["hatch.toml", "pyproject.toml#tool.hatch"],
    "poe": ["pyproject.toml#tool.poe"],
    "npm": _NODE,
    "npx": _NODE,
    "yarn": _NODE,
    "pnpm": _NODE,
    "bun": _NODE,
    "node": _NODE,
    "jest": _NODE,
    "vitest": _NODE,
    "mocha": _NODE,
    # cargo runs each test binary through a target's `runner` and builds with `rustflags` and
    # `[env]` from .cargo/config.toml; build.rs runs before the build; Cargo.toml's target tables
    # say which targets are tests at all (`test = false` on a lib whose tests do not build made
    # its failure vanish while other tests passed). A whole new crate's Cargo.toml is free to add.
    "cargo": [
        ".config/nextest.toml",
        ".cargo/config.toml",
        ".cargo/config",
        "**/Cargo.toml#lib",
        "**/Cargo.toml#test",
        "**/Cargo.toml#bench",
        "**/Cargo.toml#package.autotests",
        "**/Cargo.toml#package.autobenches",
        "build.rs",
        "rust-toolchain.toml",
        "rust-toolchain",
    ],
    "phpunit": ["phpunit.xml", "phpunit.xml.dist"],
    "mypy": _MYPY,
    "dmypy": _MYPY,
    "ruff": _RUFF,
    "flake8": _FLAKE8,
    "pyright": _PYRIGHT,
    "basedpyright": _PYRIGHT,
    "pylint": _PYLINT,
    "pre-commit": _LINTERS,
    "pre_commit": _LINTERS,
}
# The names of the files above (a new one can take over from the old: GNUmakefile beside a
# Makefile, mypy.ini beside pyproject.toml), as globs.
FILE_NAMES = tuple(
    sorted({pattern.partition("#")[0] for found in BY_PROGRAM.values() for pattern in found if "/" not in pattern})
)
# Options that name the settings file to read instead, and which parts of a shared file are the
# tool's when they name one (`mypy --config-file pyproject.toml` reads [tool.mypy] only).
_PYRIGHT_TABLES = ("tool.pyright", "tool.basedpyright")
_CONFIG_OPTIONS: dict[str, tuple[set[str], tuple[str, ...], tuple[str, ...]]] = {
    # make -f build/ci.make: the makefile it names, whatever its name.
    "make": ({"-f", "--file", "--makefile"}, (), ()),
    "gmake": ({"-f", "--file", "--makefile"}, (), ()),
    "mypy": ({"--config-file"}, ("tool.mypy",), ("mypy*",)),
    "dmypy": ({"--config-file"}, ("tool.mypy",), ("mypy*",)),
    "ruff": ({"--config"}, ("tool.ruff",), ()),
    "flake8": ({"--config", "--append-config"}, (), ("flake8*",)),
    "pylint": ({"--rcfile"}, ("tool.pylint",), ("pylint*",)),
    "pyright": ({"-p", "--project"}, _PYRIGHT_TABLES, ()),
    "basedpyright": ({"-p", "--project"}, _PYRIGHT_TABLES, ()),
}
# pytest plugins that run a linter inside the tests: `pytest --mypy`, `pytest --ruff`.
_PYTEST_LINTERS = {"--mypy": _MYPY, "--ruff": _RUFF, "--flake8": _FLAKE8, "--pylint": _PYLINT}
_UV_VALUES = frozenset(
    {"--with", "--with-editable", "--with-requirements", "--from", "--python", "-p", "--group", "--only-group"}
    | {"--extra", "--package", "--directory", "--project", "--env-file", "--index"}
)
# Programs that run a later word as the command (`uv run make test`, `timeout 60 ./t.sh`): their
# subcommands, the options of theirs that take a value, and how many words come before the command.
_PREFIXES: dict[str, tuple[tuple[tuple[str, ...], ...], frozenset[str], int]] = {
    "uv": ((("run",), ("tool", "run")), _UV_VALUES, 0),
    "uvx": ((), _UV_VALUES, 0),
    "pipx": ((("run",),), frozenset({"--spec", "--python"}), 0),
    "poetry": ((("run",),), frozenset(), 0),
    "pipenv": ((("run",),), frozenset(), 0),
    "pdm": ((("run",),), frozenset(), 0),
    "env": ((), frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "exec": ((), frozenset({"-a"}), 0),
    "time": ((), frozenset({"-f", "--format", "-o", "--output"}), 0),
    "nice": ((), frozenset({"-n", "--adjustment"}), 0),
    "timeout": ((), frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),  # timeout DURATION COMMAND
}
_INTERPRETERS = re.compile(r"^(sh|bash|dash|zsh|python[0-9.]*|node|ruby|perl)$")
_PYTHON = re.compile(r"^python[0-9.]*$")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
_SCRIPT = re.compile(r"\.(sh|bash|py|js|mjs|cjs|ts|rb|pl)$")
# An interpreter's options that take the next word as their value, not as the script
# (`bash -o pipefail x.sh`, `python -X dev x.py`, `python -W error x.py`).
_VALUED = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file", "-X", "-W", "-r", "--require"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Python's flags that may share a word with -m (`-Im mypy`, `-mmypy`); -X and -W take a value.
_MODULE_FLAG = re.compile(r"^-[bBdEiIOPqRsSuvx]*m(.*)$")


def patterns(commands: list[str]) -> list[str]:
    """`protect` patterns for the files the commands' programs and scripts are defined by."""
    found: list[str] = []
    for command in commands:
        for segment in _segments(command):
            found += _of_segment(segment)
    return list(dict.fromkeys(found))


def _segments(command: str) -> list[list[str]]:
    """The words of each simple command, split at `&&`, `||`, `;`, `|`, `&` and line ends outside
    quotes, so `sh -c 'mypy . && make'` keeps its argument whole."""
    found = []
    for line in command.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split, lexer.commenters = True, ""
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: split anyway, by the text
            found += [words(part) for part in re.split(r"&&|\|\||[;|&]", line)]
            continue
        segment: list[str] = []
        for token in tokens:
            if token and set(token) <= set(";&|"):
                found.append(segment)
                segment = []
            else:
                segment.append(token)
        found.append(segment)
    return found


def _of_segment(words: list[str]) -> list[str]:
    words = _command(words)
    if not words:
        return []
    name = words[0].rsplit("/", 1)[-1]
    module = _module(words) if _PYTHON.match(name) else None
    if name in _SHELLS and "-c" in words[1:-1]:  # sh -c 'make test'
        return patterns([words[words.index("-c") + 1]])
    program = module or name
    found = list(BY_PROGRAM.get(program, []))
    found += _named_settings(program, words)
    if program in ("pytest", "py.test"):
        found += [pattern for word in words if word in _PYTEST_LINTERS for pattern in _PYTEST_LINTERS[word]]
    if _in_tree(words[0]) and "/" in words[0]:  # ./run-tests, scripts/test.sh
        found.append(_anchored(words[0]))
    if _INTERPRETERS.match(name) and module is None:
        script = _script(words[1:])
        # A script by its extension, or by its folder (`sh scripts/test`: none needed).
        if script and (_SCRIPT.search(script) or "/" in script) and _in_tree(script):
            found.append(_anchored(script))
    return found


def _script(arguments: list[str]) -> str | None:
    """The script an interpreter runs: its first word that is neither an option nor an option's value."""
    words = iter(arguments)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif not word.startswith(("-", "+")):
            return word
    return None


def pre_commit_configs(commands: list[str]) -> list[str]:
    """The configuration files of the pre-commit runs the commands make (`-c`/`--config`, else
    .pre-commit-config.yaml): their `repo: local` hooks run scripts of the tree."""
    found: list[str] = []
    for segment in (segment for command in commands for segment in _segments(command)):
        words = _command(segment)
        name = words[0].rsplit("/", 1)[-1] if words else ""
        if name in _SHELLS and "-c" in words[1:-1]:
            found += pre_commit_configs([words[words.index("-c") + 1]])
        elif (_module(words) if _PYTHON.match(name) else name) in ("pre-commit", "pre_commit"):
            named = [words[at + 1] for at, word in enumerate(words[:-1]) if word in ("-c", "--config")]
            named += [word.partition("=")[2] for word in words if word.startswith("--config=")]
            found += [path for path in named if _in_tree(path)] or [".pre-commit-config.yaml"]
    return list(dict.fromkeys(found))


def local_hook_files(config: str | None) -> list[str]:
    """What the `repo: local` hooks of a pre-commit configuration run from the tree, as patterns:
    a `script` hook's file, and what a check's command would (a script it names, a Makefile)."""
    try:
        data = yaml.safe_load(config or "")
    except (yaml.YAMLError, RecursionError):
        return []
    repos = data.get("repos") if isinstance(data, dict) else None
    found: list[str] = []
    for repo in repos if isinstance(repos, list) else []:
        hooks = repo.get("hooks") if isinstance(repo, dict) and repo.get("repo") == "local" else None
        for hook in hooks if isinstance(hooks, list) else []:
            if not isinstance(hook, dict):
                continue
            args = hook["args"] if isinstance(hook.get("args"), list) else []
            command = words(str(hook.get("entry", ""))) + [str(arg) for arg in args]
            if hook.get("language") in ("script", "unsupported_script") and command and _in_tree(command[0]):
                found.append(_anchored(command[0]))
            found += _of_segment(command)
    return list(dict.fromkeys(found))


def _command(words: list[str]) -> list[str]:
    """The words from the program that runs, past variable assignments and the programs that run
    another (`uv run --frozen mypy .` is mypy's)."""
    words = [word for word in words if not _ASSIGNMENT.match(word)]
    while words and words[0].rsplit("/", 1)[-1] in _PREFIXES:
        subcommands, takes_value, before = _PREFIXES[words[0].rsplit("/", 1)[-1]]
        words = words[1:]
        sub = next((sub for sub in subcommands if tuple(words[: len(sub)]) == sub), ())
        words = words[len(sub) :]
        while words and words[0].startswith("-"):
            words = words[2:] if words[0] in takes_value else words[1:]
        words = [word for word in words[before:] if not _ASSIGNMENT.match(word)]
    return words


def _module(words: list[str]) -> str | None:
    """The module `python -m X` runs (`-mX`, `-I -m X`, `-X dev -m X` too); None for a script or `-c`."""
    rest = iter(words[1:])
    for word in rest:
        if word in ("-X", "-W"):
            next(rest, None)
            continue
        match = _MODULE_FLAG.match(word)
        if match:
            return match.group(1) or next(rest, None)
        if not word.startswith("-") or word.startswith("-c"):
            return None
    return None


def _named_settings(program: str, words: list[str]) -> list[str]:
    """The settings file a tool is told to read (`mypy --config-file ci/mypy.ini`), as patterns:
    only the tool's tables or sections of a file other settings share."""
    options, tables, sections = _CONFIG_OPTIONS.get(program, (set(), (), ()))
    found = []
    for index, word in enumerate(words):
        option, equals, value = word.partition("=")
        value = value if equals else (words[index + 1] if index + 1 < len(words) else "")
        # `ruff --config "lint.select = []"` sets a value and names no file.
        if option not in options or not value or value.startswith("-") or "=" in value or not _in_tree(value):
            continue
        path = PurePosixPath(value)
        if path.name == "pyproject.toml" and tables:
            found += [f"{_anchored(value)}#{table}" for table in tables]
        elif path.name in ("setup.cfg", "tox.ini") and sections:
            found += [f"{_anchored(value)}#{section}" for section in sections]
        elif program.endswith("pyright") and not path.suffix:  # the project's folder: the files in it
            found += [_anchored(str(path / name)) + tail for name, tail in (_split(pattern) for pattern in _PYRIGHT)]
        else:
            found.append(_anchored(value))
    return found


def _split(pattern: str) -> tuple[str, str]:
    """`pyproject.toml#tool.ruff` as its file and the `#tool.ruff` after it."""
    name, hash_, table = pattern.partition("#")
    return name, hash_ + table


def _in_tree(word: str) -> bool:
    path = PurePosixPath(word)
    return not path.is_absolute() and not word.startswith(("~", "$")) and ".." not in path.parts and "#" not in word


def _anchored(word: str) -> str:
    """The path as a pattern that matches that file only (gitignore rules: a leading slash
    anchors it to the top; special characters escaped)."""
    return "/" + re.sub(r"([*?\[\]!\\])", r"\\\1", str(PurePosixPath(word)))
