"""Where a lap's code runs: inside bubblewrap, which makes the user's repository unreachable.

Everything on the machine stays readable but /tmp, /var/tmp and /run, where sockets live
(only what the lap needs is bound back there, the toolchains of ralph/isolation/toolchains.py
among it), and what `hide` names (git's credentials, and every other socket of the user's:
ralph/isolation/sockets.py); what is writable is exactly the lap's work tree, its own git
dir, a private /tmp and HOME, and what the user lists. A private PID namespace hides every
process outside it (ralph's /proc included) and takes every process inside it down when its
first one ends or when ralph dies. Capabilities are dropped, so root inside cannot remount
what is read-only.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

BWRAP = "bwrap"
PRIVATE = (Path("/tmp"), Path("/var/tmp"), Path("/run"))  # empty in the sandbox but for what a lap needs
FRESH = (Path("/dev"), Path("/proc"))  # made anew in the sandbox: nothing of the machine's shows there
# /proc and /dev are fresh per sandbox; the PID namespace makes /proc show only its own.
BASE = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--new-session",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
]


@dataclass(frozen=True)
class Jail:
    """One sandboxed phase of a lap (agent, commit hooks or checks)."""

    writable: tuple[Path, ...]  # bound read-write at the same path
    tmp: Path  # the phase's /tmp and TMPDIR
    home: Path  # the phase's HOME (writable only if it is among `writable`)
    network: bool = True
    chdir: Path | None = None
    keep: tuple[Path, ...] = ()  # paths that stay readable though in a private folder: the repository, a script
    hide: tuple[Path, ...] = ()  # paths made empty: git's credentials, the user's sockets (or their folders)
    blank: Path | None = None  # an empty file, read-only here: what a hidden file reads as
    setenv: tuple[tuple[str, str], ...] = ()  # set inside: the toolchains' homes (ralph/isolation/toolchains.py)

    def argv(self, command: str | list[str]) -> list[str]:
        """`command` (a shell string or an argv) wrapped to run inside the sandbox."""
        inner = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        args = [bwrap(), *BASE]
        if not self.network:
            args.append("--unshare-net")
        # Private /tmp, /var/tmp and /run: where sockets live (an ssh- or gpg-agent's, the user's
        # D-Bus, docker's), and a socket on a read-only mount still takes connections. What the
        # lap needs from them (the repository, the workspace, a virtualenv, a script its commands
        # name, the DNS configuration) is bound back read-only: from /tmp the top folder holding
        # it (a script beside the repository), from /var/tmp and /run that path alone.
        for private in _private_folders():
            args += ["--bind", str(self.tmp), "/tmp"] if private == Path("/tmp") else ["--tmpfs", str(private)]
            for entry in _tops(private, (*self.keep, _dns_config())):
                args += ["--ro-bind-try", entry, entry]
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        for path in self.hide:
            # A link's target (bubblewrap cannot mount over a link: ~/.ssh linked to a dotfiles
            # folder); a stale one is nothing to hide, and no mount point can be made for it.
            real = Path(os.path.realpath(path))
            if real.exists():
                # A file reads as empty (not as /dev/null, which cannot be opened here: git fails on it).
                blank = str(self.blank or "/dev/null")
                args += ["--tmpfs", str(real)] if real.is_dir() else ["--ro-bind", blank, str(real)]
        for name, value in self.setenv:
            args += ["--setenv", name, value]
        args += ["--setenv", "TMPDIR", "/tmp", "--setenv", "HOME", str(self.home)]
        args += ["--unsetenv", "SSH_AUTH_SOCK"]
        if self.chdir is not None:
            args += ["--chdir", str(self.chdir)]
        return [*args, "--", *inner]


def _private_folders() -> list[Path]:
    return [private for private in PRIVATE if private.is_dir() and not private.is_symlink()]


def shown_of_private(keep: tuple[Path, ...]) -> list[Path]:
    """What the sandbox binds back of its private folders for a lap that needs `keep`."""
    return [Path(entry) for private in _private_folders() for entry in _tops(private, (*keep, _dns_config()))]


def _tops(private: Path, paths: tuple[Path, ...]) -> list[str]:
    """What to bind back of `private` for `paths`: in /tmp the top folder holding each, elsewhere
    each path itself (a folder on PATH under /run/user must not bring back the user's D-Bus),
    but none inside another: bound with it already (binding a venv's `bin/python3`, a link,
    again inside the venv's folder makes bubblewrap fail)."""
    inside = {path for path in paths if private in path.parents}
    if private == Path("/tmp"):
        inside = {private / path.relative_to(private).parts[0] for path in inside}
    return sorted(str(path) for path in inside if not any(other in path.parents for other in inside))


def _dns_config() -> Path:
    """Where /etc/resolv.conf really is (often under /run): agents need their API's address."""
    return Path(os.path.realpath("/etc/resolv.conf"))


def bwrap() -> str:
    return shutil.which(BWRAP) or BWRAP
