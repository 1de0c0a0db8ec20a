"""Node test runners (mocha, jest, vitest) for the tests that run them for real: installed from
npm's registry once per machine, at pinned versions, into a cache outside any clone (so no test
project, and no lap, ever finds them in a node_modules above it).

`node_runner_bin("jest")` is the runner's program, or None where node or npm is missing or the
install failed (offline): the caller skips with `NO_RUNNER`. The cache is
$RALPH_NODE_RUNNERS, else ralph-node-runners in the user's cache folder ($XDG_CACHE_HOME, else
~/.cache of the account, not of the isolated HOME the tests set).
"""

from __future__ import annotations

import fcntl
import functools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

PINNED = {"mocha": "12.0.3", "jest": "30.5.2", "vitest": "4.1.12"}  # each runs on node 20
NO_RUNNER = "needs node and npm, and the registry once, to install {name} into {cache}"
INSTALL_TIMEOUT = 600  # seconds for one npm install


def cache_folder() -> Path:
    return account_cache("RALPH_NODE_RUNNERS", "ralph-node-runners")


def account_cache(variable: str, name: str) -> Path:
    """$variable, else `name` in the user's cache folder ($XDG_CACHE_HOME, else ~/.cache of the
    account, not of the isolated HOME the tests set): where downloads outlive a clone."""
    if os.environ.get(variable):
        return Path(os.environ[variable])
    home = pwd.getpwuid(os.getuid()).pw_dir
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), name)


def skip_reason(name: str) -> str:
    return NO_RUNNER.format(name=name, cache=cache_folder())


@functools.cache  # one try per test process: a failed install is not retried by every test
def node_runner_bin(name: str) -> Path | None:
    """The program of the pinned `name` (a key of PINNED), installed if it is not yet."""
    version = PINNED[name]
    folder = cache_folder() / f"{name}@{version}"
    program = folder / "node_modules" / ".bin" / name
    if program.exists():
        return program
    if not (shutil.which("node") and shutil.which("npm")):
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist's workers install one at a time, the first for all
        if not program.exists() and not _install(name, version, folder):
            return None
    return program


def _install(name: str, version: str, folder: Path) -> bool:
    """npm install into a new folder, renamed into place whole: a half install is never found."""
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
    (staging / "package.json").write_text('{"private": true}\n')
    command = ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--no-save", f"{name}@{version}"]
    env = dict(os.environ, npm_config_cache=str(folder.parent / "npm-cache"), npm_config_update_notifier="false")
    try:
        done = subprocess.run(command, cwd=staging, env=env, capture_output=True, timeout=INSTALL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is None or done.returncode != 0 or not (staging / "node_modules" / ".bin" / name).exists():
        shutil.rmtree(staging, ignore_errors=True)
        return False
    staging.chmod(0o755)  # mkdtemp made it private; runners run as other users in some sandboxes
    staging.rename(folder)
    return True
