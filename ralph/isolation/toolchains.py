"""The toolchains a lap needs from where the user installed them: read-only, found by name.

The sandbox shows the system and what it is told to (ralph/isolation/jail.py), and gives each
phase a private HOME: a toolchain under HOME, /opt, /tmp or /run is not there unless named here
(an agent CLI in an npm prefix passed the start check and was "not found" inside), and its
launcher looks for its home under the private HOME (rustup's proxies: "could not choose a version
of cargo to run"). So this module names, as an allow-list, what to bind read-only: the
folders on PATH as written and resolved, the programs the commands start (their real file, the
interpreter of their `#!` line, the prefix, virtualenv or node_modules they belong to) and each tool's
home, from its variable or its documented default under HOME, which is then set inside so the
launcher finds it. Never HOME as a whole, and never a private folder as a whole. Files in them that
hold a registry login read as empty.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

# A tool's home: its variable, and where the tool looks when it is unset (relative to HOME, or to
# XDG_DATA_HOME / XDG_CONFIG_HOME where the tool follows them; an absolute one as it is).
HOMES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("RUSTUP_HOME", (".rustup",)),  # rustup's proxies read settings.toml and toolchains/ there
    ("CARGO_HOME", (".cargo",)),
    ("NVM_DIR", (".nvm",)),
    ("FNM_DIR", ("$XDG_DATA_HOME/fnm", ".fnm")),
    ("VOLTA_HOME", (".volta",)),  # volta's shims
    ("PYENV_ROOT", (".pyenv",)),  # pyenv's shims, and its global `version` file
    ("ASDF_DIR", (".asdf",)),
    ("ASDF_DATA_DIR", (".asdf",)),  # asdf's shims and installs
    ("MISE_DATA_DIR", ("$XDG_DATA_HOME/mise",)),  # mise's shims and installs
    ("MISE_CONFIG_DIR", ("$XDG_CONFIG_HOME/mise",)),  # mise's global tool versions
    ("SDKMAN_DIR", (".sdkman",)),
    ("UV_PYTHON_INSTALL_DIR", ("$XDG_DATA_HOME/uv/python",)),  # where uv finds the Pythons it installed
    ("BUN_INSTALL", (".bun",)),
    ("GOENV", ("$XDG_CONFIG_HOME/go/env",)),  # what `go env -w` set: GOPROXY, GOFLAGS, GOPRIVATE
    ("HOMEBREW_PREFIX", ("/home/linuxbrew/.linuxbrew", ".linuxbrew")),
)
# Named by the user only: no default under HOME to set (GOPATH's ~/go is read through GOPROXY below).
NAMED = ("GOROOT", "GOPATH", "GOMODCACHE", "NPM_CONFIG_PREFIX", "JAVA_HOME", "VIRTUAL_ENV")
GO_DEFAULT_PROXY = "https://proxy.golang.org,direct"
# The variables a lap is given of the user's, for its toolchains to find themselves (proc.lap_env).
VARIABLES = (
    *(variable for variable, _ in HOMES),
    # The user's activated virtualenv is not the lap's: uv warns in every check that VIRTUAL_ENV does
    # not match the project's .venv, and a tool that trusts it installs into (or reads) the user's
    # own. Its bin/ stays on PATH, read-only: a `pytest` check finds what the user's shell finds.
    *(variable for variable in NAMED if variable != "VIRTUAL_ENV"),
    *("GOFLAGS", "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOTOOLCHAIN"),
    *("RUSTUP_TOOLCHAIN", "PYENV_VERSION"),
)
NEVER_WHOLE = (Path("/"), Path("/tmp"), Path("/var/tmp"), Path("/run"))  # what holds everyone's files and sockets
GO_MODULES_INSIDE = "/tmp/go/pkg/mod"  # the phase's own module cache: /tmp is private and writable
# An npmrc or yarnrc line that holds a login (a token, a password, a client key).
_LOGIN = re.compile(r"^\s*[^#;\s]*(_auth|_authToken|_password|certfile|keyfile|npmAuthToken|npmAuthIdent)\s*[=:]", re.M)
# A cargo config's registry token (cargo still reads `token` there), or any URL with a user in it
# (a GOPROXY that `go env -w` wrote with its login).
_CARGO_TOKEN = re.compile(r"^\s*token\s*=", re.M)
_URL_WITH_USER = re.compile(r"://[^/@\s]+@")


def home_of(variable: str, env: Mapping[str, str]) -> Path | None:
    """Where a tool's home is: its variable, else the first of its defaults that exists."""
    if env.get(variable):
        return Path(env[variable]).expanduser()
    defaults = dict(HOMES).get(variable, ())
    found = (_default(default, env) for default in defaults)
    return next((path for path in found if path is not None and os.path.exists(path)), None)


def _default(default: str, env: Mapping[str, str]) -> Path | None:
    home = env.get("HOME")
    if default.startswith("/"):
        return Path(default)
    if home is None:
        return None
    xdg = {"$XDG_DATA_HOME": ".local/share", "$XDG_CONFIG_HOME": ".config"}
    for name, fallback in xdg.items():
        if default.startswith(name):
            base = env.get(name[1:]) or os.path.join(home, fallback)
            return Path(base + default[len(name) :])
    return Path(home) / default


def readable(env: Mapping[str, str], commands: Iterable[str] = ()) -> tuple[Path, ...]:
    """What a lap must read of the toolchains: each PATH entry as written and resolved (with its
    install prefix), each program the commands start, each tool home that exists and Go's downloads."""
    entries = _path_entries(env)
    homes = [home_of(variable, env) for variable, _ in HOMES]
    named = [Path(env[variable]) for variable in NAMED if env.get(variable, "").startswith("/")]
    gopath = [Path(entry) for entry in env.get("GOPATH", "").split(os.pathsep) if entry.startswith("/")]
    programs = [path for command in commands for path in program_needs(command, env)]
    modules = _go_module_cache(env)  # the first GOPROXY of a phase's own module cache (go_modules)
    downloads = [modules / "cache" / "download"] if modules is not None else []
    found = [*_with_prefixes(entries), *[home for home in homes if home is not None], *named, *gopath, *programs]
    found += [path for path in downloads if path.is_dir()]
    return tuple(dict.fromkeys(path for path in found if _may_bind(path, env)))


def _with_prefixes(entries: Iterable[Path]) -> list[Path]:
    """Each folder as written and resolved, and the install prefix a `bin` folder lies in (an
    npm prefix's bin/ links into ../lib/node_modules; a virtualenv's python needs ../pyvenv.cfg)."""
    found = []
    for entry in entries:
        real = Path(os.path.realpath(entry))
        found += [entry, real, *(_prefix(folder) for folder in (entry, real))]
    return [path for path in found if path is not None]


def _prefix(folder: Path) -> Path | None:
    """A virtualenv whole; of another prefix, its lib/ (an npm prefix's node_modules, pip --user's
    site-packages): a prefix in HOME, ~/.local, also holds the user's data (~/.local/share: an
    agent CLI's login)."""
    parent = folder.parent
    if folder.name not in ("bin", "sbin") or parent in NEVER_WHOLE:
        return None
    if (parent / "pyvenv.cfg").exists():
        return parent
    return parent / "lib" if (parent / "lib").is_dir() else None


def _may_bind(path: Path, env: Mapping[str, str]) -> bool:
    """Not HOME or a folder holding it, not /tmp, /var/tmp or /run as a whole, not `/`."""
    home = Path(os.path.realpath(env.get("HOME", "/")))
    real = Path(os.path.realpath(path))
    return path.is_absolute() and real != home and real not in home.parents and real not in NEVER_WHOLE


def program_needs(command: str, env: Mapping[str, str]) -> list[Path]:
    """What the program `command` starts needs to be there: its path, its real file, the
    interpreter its `#!` line names (found the same way), and the prefix or node_modules of each."""
    program = first_program(command)
    found = shutil.which(program, path=env.get("PATH")) if program else None
    needs: list[Path] = []
    seen: set[Path] = set()
    while found is not None and Path(found) not in seen:
        path = Path(found)
        seen.add(path)
        real = Path(os.path.realpath(path))
        needs += [path, real, *(p for p in (_prefix(path.parent), _prefix(real.parent), _package(real)) if p)]
        interpreter = _interpreter(real)
        found = shutil.which(interpreter, path=env.get("PATH")) if interpreter else None
    return list(dict.fromkeys(needs))


def first_program(command: str) -> str | None:
    """The program a shell command starts: its first word past `VAR=value` assignments, `env`,
    `exec` and a leading `cd FOLDER &&`."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if words[:1] == ["cd"] and words[2:3] == ["&&"]:
        words = words[3:]
    for word in words:
        if re.match(r"[A-Za-z_]\w*=", word):
            continue
        if word in ("env", "exec", "command", "nice", "nohup"):
            continue
        return word if re.fullmatch(r"[\w./+@-]+", word) else None
    return None


def _interpreter(program: Path) -> str | None:
    """The program a script's `#!` line starts (`#!/usr/bin/env node`: node)."""
    try:
        with open(program, "rb") as script:
            line = script.readline(256)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [word for word in words[1:] if not word.startswith("-")]
    return words[0] if words else None


def _package(real: Path) -> Path | None:
    """The node_modules folder a program's real file lies in (a global install's bin/ links into
    it), the outermost: the package needs its dependencies, which npm hoists beside it."""
    parts = real.parts
    if "node_modules" not in parts:
        return None
    return Path(*parts[: parts.index("node_modules") + 1])


def variables(env: Mapping[str, str]) -> dict[str, str]:
    """Set inside the sandbox, whose HOME is another: each tool home found at its default under
    the user's HOME, and Go's module cache (below)."""
    homes = {variable: home_of(variable, env) for variable, _ in HOMES if not env.get(variable)}
    return {variable: str(home) for variable, home in homes.items() if home is not None} | go_modules(env)


def go_modules(env: Mapping[str, str]) -> dict[str, str]:
    """The user's Go module cache, read-only, offered as the first GOPROXY of a module cache of the
    phase's own: `go test` downloads into its module cache (a read-only one fails it), and a lap
    that adds a module must still get it; what the user has already downloaded comes from there,
    offline, checked against go.sum as any proxy's."""
    cache = _go_module_cache(env)
    proxy = env.get("GOPROXY") or _go_env_file(env).get("GOPROXY") or GO_DEFAULT_PROXY
    if cache is None or not (cache / "cache" / "download").is_dir() or "@" in proxy:  # a proxy's login stays out
        return {}
    return {"GOMODCACHE": GO_MODULES_INSIDE, "GOPROXY": f"file://{cache}/cache/download,{proxy}"}


def _go_module_cache(env: Mapping[str, str]) -> Path | None:
    if env.get("GOMODCACHE"):
        return Path(env["GOMODCACHE"])
    gopath = env.get("GOPATH", "").split(os.pathsep)[0] or _go_env_file(env).get("GOPATH", "")
    if gopath:
        return Path(gopath) / "pkg" / "mod"
    return Path(env["HOME"]) / "go" / "pkg" / "mod" if env.get("HOME") else None


def _go_env_file(env: Mapping[str, str]) -> dict[str, str]:
    """What `go env -w` wrote (GOENV's file)."""
    path = home_of("GOENV", env)
    try:
        text = path.read_text(errors="replace") if path else ""
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def logins(env: Mapping[str, str]) -> tuple[Path, ...]:
    """Files of the toolchains that hold a registry login: made to read as empty. cargo's
    credentials always, and its config when it holds a token; an npmrc or yarnrc (yours, or an
    npm prefix's own) when it holds one; Go's env file when a URL in it carries a user."""
    cargo = home_of("CARGO_HOME", env)
    home = Path(env["HOME"]) if env.get("HOME") else None
    always = [cargo / "credentials.toml", cargo / "credentials"] if cargo else []
    configs = [cargo / "config.toml", cargo / "config"] if cargo else []
    goenv = home_of("GOENV", env)
    rc = [Path(env[name]) for name in ("NPM_CONFIG_USERCONFIG", "NPM_CONFIG_GLOBALCONFIG") if env.get(name)]
    rc += [home / name for name in (".npmrc", ".yarnrc", ".yarnrc.yml")] if home else []
    prefixes = [Path(env["NPM_CONFIG_PREFIX"])] if env.get("NPM_CONFIG_PREFIX") else []
    bins = [folder for entry in _path_entries(env) for folder in (entry, Path(os.path.realpath(entry)))]
    prefixes += [folder.parent for folder in bins if (folder.parent / "lib" / "node_modules").is_dir()]
    rc += [prefix / "etc" / "npmrc" for prefix in prefixes]
    found = [path for path in always if path.is_file()] + [path for path in rc if _holds(path, _LOGIN)]
    found += [path for path in configs if _holds(path, _CARGO_TOKEN)]
    found += [goenv] if goenv is not None and _holds(goenv, _URL_WITH_USER) else []
    return tuple(dict.fromkeys(found))


def _path_entries(env: Mapping[str, str]) -> list[Path]:
    return [Path(entry) for entry in env.get("PATH", "").split(os.pathsep) if entry.startswith("/")]


def _holds(path: Path, login: re.Pattern[str]) -> bool:
    """Does the regular file at `path` hold what `login` finds (a FIFO is never waited on)?"""
    if not path.is_file():
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as settings:
            return bool(login.search(settings.read(1 << 20)))
    except OSError:
        return False
