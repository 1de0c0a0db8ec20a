"""The agent CLIs the presets run, for the tests that run them for real: installed once per
machine, at pinned versions, into a cache outside any clone (npm's for Claude Code, Codex,
Gemini CLI and opencode; a venv of its own for aider). mini-swe-agent is a dev dependency:
its `mini` is the one next to this Python.

`program("claude")` is the tool's executable, or None where it cannot be installed (no node or
npm, offline): the caller skips with `skip_reason(name)`. The cache is $RALPH_AGENT_CLIS, else
ralph-agent-clis in the user's cache folder ($XDG_CACHE_HOME, else ~/.cache of the account,
not of the isolated HOME the tests set).
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from helpers.node_runners import account_cache

# name: (package, version, the program's path in its folder)
NPM = {
    "claude": ("@anthropic-ai/claude-code", "2.1.332", "node_modules/.bin/claude"),
    "codex": ("@openai/codex", "0.171.0", "node_modules/.bin/codex"),
    "gemini": ("@google/gemini-cli", "0.61.0", "node_modules/.bin/gemini"),
    "opencode": ("opencode-ai", "1.18.33", "node_modules/.bin/opencode"),
}
# The package's own install script, run by hand after `npm install --ignore-scripts` (no dependency's
# script ever runs): without it claude's and opencode's programs are stubs that say "postinstall did
# not run" and exit 1. Each copies the native binary of the platform's optional dependency into place.
POSTINSTALL = {"claude": "install.cjs", "opencode": "postinstall.mjs"}
PYPI = {"aider": ("aider-chat", "0.86.2", "bin/aider")}  # ~690 MB, ~2 minutes
NO_CLI = "needs {needs}, and the registry once, to install {name} into {cache}"
INSTALL_TIMEOUT = 900  # seconds for one install
DONE = ".installed"  # written last into a venv (a venv cannot be renamed into place: its scripts name its path)


def cache_folder() -> Path:
    return account_cache("RALPH_AGENT_CLIS", "ralph-agent-clis")


def skip_reason(name: str) -> str:
    needs = "node and npm" if name in NPM else "pip"
    return NO_CLI.format(needs=needs, name=name, cache=cache_folder())


def version(name: str) -> str:
    return {**NPM, **PYPI}[name][1] if name != "mini" else "dev dependency"


def install_root(name: str) -> Path | None:
    """The folder the tool runs from (what a sandboxed lap must be able to read)."""
    found = program(name)
    if found is None:
        return None
    if name == "mini":
        return Path(sys.prefix)
    return _folder(name)


@functools.cache  # one try per test process: a failed install is not retried by every test
def program(name: str) -> Path | None:
    """The executable of the pinned `name` (claude, codex, gemini, opencode, aider, mini)."""
    if name == "mini":
        found = Path(sys.executable).parent / "mini"
        return found if found.exists() else None
    folder = _folder(name)
    executable = folder / {**NPM, **PYPI}[name][2]
    if _installed(name, folder):
        return executable
    if name in NPM and not (shutil.which("node") and shutil.which("npm")):
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist's workers install one at a time, the first for all
        if not _installed(name, folder) and not (_npm(name, folder) if name in NPM else _venv(name, folder)):
            return None
    return executable


def _folder(name: str) -> Path:
    package, pinned, _ = {**NPM, **PYPI}[name]
    return cache_folder() / f"{name}@{pinned}"


def _installed(name: str, folder: Path) -> bool:
    return (folder / {**NPM, **PYPI}[name][2]).exists() and (name in NPM or (folder / DONE).exists())


def _npm(name: str, folder: Path) -> bool:
    """npm install into a new folder, renamed into place whole: a half install is never found."""
    package, pinned, path = NPM[name]
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
    (staging / "package.json").write_text('{"private": true}\n')
    command = ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--no-save", f"{package}@{pinned}"]
    env = dict(os.environ, npm_config_cache=str(folder.parent / "npm-cache"), npm_config_update_notifier="false")
    installed = _run(command, staging, env)
    if installed and name in POSTINSTALL:
        installed = _run(["node", POSTINSTALL[name]], staging / "node_modules" / package, env)
    if not installed or not _starts(staging / path):
        shutil.rmtree(staging, ignore_errors=True)
        return False
    staging.chmod(0o755)  # mkdtemp made it private; laps run as other users in some sandboxes
    staging.rename(folder)
    return True


def _venv(name: str, folder: Path) -> bool:
    """A venv made in place (its scripts name its path), counted as installed once DONE is written."""
    package, pinned, path = PYPI[name]
    shutil.rmtree(folder, ignore_errors=True)  # a half install of an earlier try
    python = folder / "bin" / "python"
    made = _run([sys.executable, "-m", "venv", str(folder)], folder.parent, dict(os.environ))
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    if not (made and _run([str(python), "-m", "pip", "install", "-q", f"{package}=={pinned}"], folder, env)):
        shutil.rmtree(folder, ignore_errors=True)
        return False
    if not _starts(folder / path):
        shutil.rmtree(folder, ignore_errors=True)
        return False
    (folder / DONE).write_text(f"{package}=={pinned}\n")
    return True


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> bool:
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=INSTALL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _starts(executable: Path) -> bool:
    """The installed tool answers --version (an install that cannot start is no install)."""
    home = tempfile.mkdtemp(prefix="ralph-agent-cli-home-")
    try:
        env = dict(os.environ, HOME=home)
        done = subprocess.run([str(executable), "--version"], env=env, capture_output=True, timeout=120)
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(home, ignore_errors=True)
