"""Where a lap's code runs: inside bubblewrap, which makes the user's repository unreachable.

Everything on the machine stays readable; what is writable is exactly the lap's work
tree, its own git dir, a private /tmp and HOME, and what the user lists. A private PID
namespace hides every process outside it (ralph's /proc included) and takes every
process inside it down when its first one ends or when ralph dies. Capabilities are
dropped, so root inside cannot remount what is read-only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ralph.errors import RalphError

BWRAP = "bwrap"
# /proc and /dev are fresh per sandbox; the PID namespace makes /proc show only its own.
_BASE = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-ipc",
         "--unshare-uts", "--new-session", "--die-with-parent", "--cap-drop", "ALL"]


@dataclass(frozen=True)
class Jail:
    """One sandboxed phase of a lap (agent, commit hooks or checks)."""

    writable: tuple[Path, ...]  # bound read-write at the same path
    tmp: Path  # the phase's /tmp and TMPDIR
    home: Path  # the phase's HOME (writable only if it is among `writable`)
    network: bool = True
    chdir: Path | None = None

    def argv(self, command: str | list[str]) -> list[str]:
        """`command` (a shell string or an argv) wrapped to run inside the sandbox."""
        inner = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        args = [_bwrap(), *_BASE]
        if not self.network:
            args.append("--unshare-net")
        # A private /tmp, in which what the host's /tmp holds (a repository, a virtualenv, a
        # script) stays readable: each of its folders and files is bound back, read-only.
        args += ["--bind", str(self.tmp), "/tmp"]
        for entry in _host_tmp_entries():
            args += ["--ro-bind", entry, entry]
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        args += ["--setenv", "TMPDIR", "/tmp", "--setenv", "HOME", str(self.home)]
        args += ["--unsetenv", "SSH_AUTH_SOCK"]
        if self.chdir is not None:
            args += ["--chdir", str(self.chdir)]
        return [*args, "--", *inner]


def _host_tmp_entries() -> list[str]:
    try:
        entries = list(os.scandir("/tmp"))
    except OSError:
        return []
    return sorted(entry.path for entry in entries
                  if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False))


def _bwrap() -> str:
    return shutil.which(BWRAP) or BWRAP


@cache
def why_unavailable() -> str | None:
    """None when bubblewrap works on this machine, else what is missing (one line)."""
    if shutil.which(BWRAP) is None:
        return "bubblewrap (`bwrap`) is not installed — apt/dnf install bubblewrap"
    try:
        done = subprocess.run([_bwrap(), *_BASE, "--", "/bin/true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap did not start: {exc}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"bubblewrap cannot make a sandbox here: {said} (unprivileged user namespaces may be off)"
    return None


def decide(mode: str) -> bool:
    """Whether laps run sandboxed, for a `sandbox.mode`; `required` without bubblewrap is an error."""
    if mode == "off":
        return False
    missing = why_unavailable()
    if missing is None:
        return True
    if mode == "required":
        raise RalphError(f"sandbox: required, but {missing}")
    return False


def refuse_unsafe_writable(paths: list[Path], protected: list[Path]) -> None:
    """A writable path must exist, and may not hold (or be inside) what the sandbox protects."""
    for path in paths:
        if not os.path.lexists(path):
            raise RalphError(f"sandbox.writable: {path} does not exist — create it first (a file or a folder)")
        for guarded in protected:
            if path == guarded or path in guarded.parents or guarded in path.parents:
                raise RalphError(f"sandbox.writable: {path} would make {guarded} writable to laps — "
                                 "list a folder that holds neither the repository nor ralph's workspace")
