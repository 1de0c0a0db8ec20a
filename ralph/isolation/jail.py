"""Where a lap's code runs: inside bubblewrap, which shows it an allow-list of the machine.

Read-only: the system (SYSTEM: /usr, /bin, /lib*, /etc with its secrets read as empty or
absent) and what a phase is to `keep` (the repository and its git dir, the toolchains of
ralph/isolation/toolchains.py, ralph's own package and Python's prefixes, `sandbox.readable`);
read-write: the lap's work tree, its own git dir, a private /tmp and HOME, and what the user
lists. Nothing else of the machine is there: not the user's HOME, other homes, /root, /srv,
/mnt, /media, /run (but the DNS configuration) nor /var (but an empty /var/tmp), so neither
are their files nor their sockets (an ssh- or gpg-agent's, the user's D-Bus, docker's). A
private PID namespace hides every process outside it (ralph's /proc included) and takes every
process inside it down when its first one ends or when ralph dies. Capabilities are dropped,
so root inside cannot remount what is read-only.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

BWRAP = "bwrap"
# The system, read-only: /nix holds a NixOS machine's every program.
SYSTEM = tuple(map(Path, ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/nix")))
# What of /etc reads as empty or absent: logins' hashes, sudo's rules, ssh's host keys.
ETC_SECRETS = ("/etc/shadow*", "/etc/gshadow*", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh/*_key", "/etc/security")
PRIVATE = (Path("/tmp"), Path("/var/tmp"))  # the phase's own, empty at its start
_SYSTEM_TEXTS = frozenset(map(str, SYSTEM))
_NEVER_BOUND = frozenset({"/", *map(str, PRIVATE)})  # whole, as a path to keep
# /proc and /dev are fresh per sandbox; the PID namespace makes /proc show only its own.
BASE = [
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
# Git inside reads no config of the user's, whatever the environment or the HOME: only the lap's own.
GIT_CONFIG = (("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", os.devnull))


@dataclass(frozen=True)
class Jail:
    """One sandboxed phase of a lap (agent, commit hooks or checks)."""

    writable: tuple[Path, ...]  # bound read-write at the same path
    tmp: Path  # the phase's /tmp and TMPDIR
    home: Path  # the phase's HOME (writable only if it is among `writable`)
    network: bool = True
    chdir: Path | None = None
    keep: tuple[Path, ...] = ()  # bound read-only at the same path: the repository, the toolchains, a script
    hide: tuple[Path, ...] = ()  # paths in what is bound made empty: git's credentials
    blank: Path | None = None  # an empty file, read-only here: what a hidden file reads as
    setenv: tuple[tuple[str, str], ...] = ()  # set inside: the toolchains' homes (ralph/isolation/toolchains.py)
    sockets: tuple[Path, ...] = ()  # sockets (or folders of them) the user lets laps connect to

    def argv(self, command: str | list[str]) -> list[str]:
        """`command` (a shell string or an argv) wrapped to run inside the sandbox."""
        inner = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        args = [bwrap(), *system(), "--bind", str(self.tmp), "/tmp", "--tmpfs", "/var/tmp"]
        if not self.network:
            args.append("--unshare-net")
        keep = _outermost((*self.keep, *self.sockets, _dns_config()))
        for path in keep:
            args += ["--ro-bind-try", str(path), str(path)]
        for path in sorted(self.writable, key=lambda path: len(path.parts)):
            args += ["--bind", str(path), str(path)]
        bound = (*SYSTEM, *keep, *self.writable)
        for path in (*self.hide, *_sockets_inside(bound, self.sockets)):
            # A link's target (bubblewrap cannot mount over a link: ~/.ssh linked to a dotfiles
            # folder); one outside what is bound is not there to hide.
            real = Path(os.path.realpath(path))
            if _inside(real, bound) and os.path.lexists(real):
                # A file reads as empty (not as /dev/null, which cannot be opened through a bind: git fails on it).
                args += (
                    ["--tmpfs", str(real)] if real.is_dir() else ["--ro-bind", str(self.blank or os.devnull), str(real)]
                )
        for name, value in (*self.setenv, *GIT_CONFIG, ("TMPDIR", "/tmp"), ("HOME", str(self.home))):
            args += ["--setenv", name, value]
        args += ["--remount-ro", "/"]  # the root bubblewrap made: no file a lap writes outside what it may
        if self.chdir is not None:
            args += ["--chdir", str(self.chdir)]
        return [*args, "--", *inner]


def plain(path: Path | str) -> Path:
    """`path` absolute and normal. POSIX lets a path start with exactly two slashes and keeps
    them (`os.path.abspath("//")` is "//"): a `//` in a command would name the root while
    comparing unequal to it."""
    return Path("/" + os.path.abspath(path).lstrip("/"))


def system() -> list[str]:
    """bubblewrap's arguments for the system part of every sandbox: its namespaces, a fresh /dev
    and /proc, the system folders read-only (a link such as /bin -> usr/bin made as a link) and
    /etc's secrets read as absent. Found anew when an entry of /, /etc or /etc/ssh has come
    or gone since they were last found (it sets that folder's ctime)."""
    key = tuple(_changed(folder) for folder in ("/", "/etc", "/etc/ssh"))
    if key not in _SYSTEM_FOUND:
        _SYSTEM_FOUND.clear()
        _SYSTEM_FOUND[key] = _system()
    return list(_SYSTEM_FOUND[key])


_SYSTEM_FOUND: dict[tuple[int | None, ...], list[str]] = {}


def _changed(folder: str) -> int | None:
    try:
        return os.stat(folder).st_ctime_ns
    except OSError:
        return None


def _system() -> list[str]:
    args = list(BASE)
    for top in SYSTEM:
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    for secret in sorted({path for pattern in ETC_SECRETS for path in glob.glob(pattern)}):
        args += ["--tmpfs", secret] if os.path.isdir(secret) else ["--ro-bind", os.devnull, secret]
    return args


def _outermost(paths: tuple[Path, ...]) -> list[Path]:
    """Each path not bound already (by the system or by another of `paths`), parents first;
    never one that is / (`//`, `/proc/self/root`, a link to it) nor /tmp or /var/tmp whole (the
    phase's own)."""
    never = {_identity(text) for text in _NEVER_BOUND} - {None}
    given = {str(plain(path)) for path in paths if path.is_absolute()}
    given = {text for text in given if text not in _NEVER_BOUND and _identity(text) not in never}
    bound = given | _SYSTEM_TEXTS
    return sorted(Path(text) for text in given if text not in _SYSTEM_TEXTS and not _below(text, bound))


def _identity(path: str) -> tuple[int, int] | None:
    """The folder or file `path` leads to (links followed), as device and inode."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _below(text: str, tops: set[str]) -> bool:
    """Whether the path `text` lies below one of `tops` (as text: one of its parents is there)."""
    cut = text.rfind("/")
    while cut > 0:
        text = text[:cut]
        if text in tops:
            return True
        cut = text.rfind("/")
    return False


def _sockets_inside(bound: tuple[Path, ...], allowed: tuple[Path, ...]) -> list[Path]:
    """The sockets bound on this machine (the kernel's list, whoever bound them) that lie in what
    the sandbox binds, but those the user lets through: a socket on a read-only mount still
    takes connections (a socket in a folder on PATH, in a folder the user lists)."""
    try:
        lines = Path("/proc/net/unix").read_text(errors="replace").splitlines()[1:]
    except OSError:
        return []
    named = {fields[7] for fields in (line.split(None, 7) for line in lines) if len(fields) == 8}
    real = [Path(os.path.realpath(path)) for path in named if path.startswith("/")]
    allowed = tuple(Path(os.path.realpath(path)) for path in allowed)
    return [path for path in real if _inside(path, bound) and not _inside(path, allowed)]


def _inside(path: Path, tops: tuple[Path, ...] | list[Path]) -> bool:
    """Whether `path` is one of `tops` or below one, by their parts (as Path.parents would say,
    read as text: a sandbox is made twice a lap, for every socket on the machine)."""
    text = str(path)
    return any(text == str(top) or text.startswith(str(top).rstrip("/") + "/") for top in tops)


def _dns_config() -> Path:
    """Where /etc/resolv.conf really is (often under /run): agents need their API's address."""
    return Path(os.path.realpath("/etc/resolv.conf"))


def bwrap() -> str:
    return shutil.which(BWRAP) or BWRAP
