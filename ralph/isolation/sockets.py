"""The unix sockets a lap must not reach. A socket on a read-only mount still takes connections:
through one a gpg-agent signs with the user's key, an ssh-agent hands out logins and Docker
starts a privileged container with / mounted. Only a mount over the socket, or over its folder,
puts it out of reach; the sandbox makes one for each socket found here when a phase starts.

Hidden: every socket under HOME, the user's runtime dir and GnuPG's home (wherever they are),
the paths laps may write and what the sandbox binds back of its private /tmp, /var/tmp and /run;
and every socket the environment names (SSH_AUTH_SOCK, DOCKER_HOST, a D-Bus address) or ssh's
configuration names (IdentityAgent, ControlPath, LocalForward), wherever it is. Those folders
are not read whole (a HOME can hold millions of files): the kernel lists every socket bound in
ralph's network namespace, at any depth, and a look on disk SCAN_DEPTH levels deep finds those
bound elsewhere (a container's, shared into a folder of the user's). The user lets some through
(`sandbox.sockets`).
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import stat
import time
from collections import deque
from functools import cache
from pathlib import Path

from ralph.isolation.jail import FRESH, PRIVATE, shown_of_private
from ralph.isolation.sandbox import words
from ralph.show import ui

SCAN_DEPTH = 4  # levels below each folder the look on disk reads (~/.lima/<vm>/sock/<name> is 4)
SCAN_BUDGET = 200_000  # entries it reads at most (0.1 s to 0.3 s): in a bigger tree, the shallowest
LOOK_AGAIN = 300  # seconds a look on disk is trusted
KERNELS_LIST = Path("/proc/net/unix")  # every socket bound in this network namespace, with its path
_SHARED = (Path("/"), Path("/tmp"), Path("/var/tmp"), Path("/run"), Path("/var/run"))  # never hidden whole
_SSH_SOCKETS = ("identityagent", "controlpath", "localforward")  # ssh options whose value is a local socket
_PATH_IN_VALUE = re.compile(r"/[^\s:;,=\"']+")  # unix:///run/docker.sock, unix:path=/run/user/1000/bus


def unreachable(
    keep: tuple[Path, ...], writable: tuple[Path, ...], allowed: tuple[Path, ...], skip: tuple[Path, ...]
) -> tuple[Path, ...]:
    """What to mount over (a socket, or a folder of sockets) so that no socket of the user's is
    reachable from a lap that needs `keep` and writes `writable`, but those `allowed` (a socket,
    or a folder whose sockets all are). `skip`: folders not looked into (ralph's own, and those
    hidden whole anyway)."""
    shown = shown_of_private(keep)
    allowed, skip, writable = _real(allowed), _real(skip), _real(writable)
    roots = _roots(writable, shown)
    bound = [path for path in _bound() if _inside(path, tuple(roots)) and _is_socket(str(path))]
    # What laps write is theirs to bind a socket in again: one no process here listens on (left
    # by a lap's agent CLI) stays, and does not stop the next lap's from binding it anew.
    on_disk = [path for path in _on_disk_lately(roots, skip, shown) if path in bound or not _inside(path, writable)]
    found = [*bound, *on_disk, *_named()]
    needs = (*_real(keep), *writable, *allowed)
    covers = {
        _cover(socket, needs, writable)
        for socket in found
        if _visible(socket, shown) and not _inside(socket, allowed) and not _inside(socket, skip)
    }
    return tuple(sorted(path for path in covers if not any(other in path.parents for other in covers)))


def _cover(socket: Path, needs: tuple[Path, ...], writable: tuple[Path, ...]) -> Path:
    """The socket's folder when that folder is the socket's own (not a shared one, holding nothing
    the lap needs, not inside what it writes): a socket made there again later (a restarted
    agent's) is then out of reach too. Otherwise the socket alone."""
    folder = socket.parent
    shared = folder in _SHARED or len(folder.parts) < 3
    holds = any(folder == need or folder in need.parents for need in needs)
    return socket if shared or holds or _inside(folder, writable) else folder


def _roots(writable: tuple[Path, ...], shown: list[Path]) -> list[Path]:
    """Where to look: HOME, the runtime dir, GnuPG's home, what laps write, what the sandbox shows
    of its private folders; each as it really is, none the sandbox hides, nor / (a HOME of /, a
    service's, is not the whole machine)."""
    named = [os.environ.get(name, "") for name in ("XDG_RUNTIME_DIR", "GNUPGHOME")]
    candidates = [Path.home(), *(Path(path) for path in named if os.path.isabs(path)), *writable, *shown]
    real = _real(tuple(candidates))
    return sorted({path for path in real if path not in _SHARED and path.is_dir() and _visible(path, shown)})


def _bound() -> list[Path]:
    """The kernel's list: every socket bound to a path in ralph's network namespace, whoever bound
    it and however deep (a socket bound by a path relative to its process's folder has only its
    name there, and is not found)."""
    try:
        lines = KERNELS_LIST.read_text(errors="replace").splitlines()[1:]
    except OSError:
        return []
    paths = {fields[7] for fields in (line.split(None, 7) for line in lines) if len(fields) == 8}
    return [Path(os.path.realpath(path)) for path in paths if path.startswith("/")]


_LOOKED: dict[tuple, tuple[float, list[Path]]] = {}  # what a look on disk found, and when


def _on_disk_lately(roots: list[Path], skip: tuple[Path, ...], shown: list[Path]) -> list[Path]:
    """`_on_disk`, looked again once LOOK_AGAIN seconds have passed: a phase starts every few
    seconds, and sockets another network namespace binds (the only ones the kernel's list, read
    every phase, does not give) seldom come and go."""
    key, now = (tuple(roots), skip, tuple(shown)), time.monotonic()
    if key not in _LOOKED or now - _LOOKED[key][0] > LOOK_AGAIN:
        _LOOKED[key] = (now, _on_disk(roots, skip, shown))
    return _LOOKED[key][1]


def _on_disk(roots: list[Path], skip: tuple[Path, ...], shown: list[Path]) -> list[Path]:
    """The sockets SCAN_DEPTH levels deep under each of `roots` (HOME's levels counted from HOME
    though it lies in another; at most SCAN_BUDGET entries, shallowest first), by real path
    (bubblewrap cannot mount over a link): links are followed to sockets, and to folders outside
    the trees read."""
    queue, read = deque((str(root), 1) for root in roots), list(roots)
    seen = {str(path) for path in (*roots, *skip)}  # read already, or never
    found: list[Path] = []
    budget = SCAN_BUDGET
    while queue and budget > 0:
        folder, depth = queue.popleft()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    budget -= 1
                    if entry.is_dir(follow_symlinks=False):
                        if depth < SCAN_DEPTH and entry.path not in seen:
                            queue.append((entry.path, depth + 1))
                    elif not entry.is_file(follow_symlinks=False):  # a socket, a link, a FIFO, a device
                        socket, target = _what_it_leads_to(entry.path, read, shown)
                        found += [socket] if socket else []
                        if target and depth < SCAN_DEPTH and str(target) not in seen:
                            queue.append((str(target), depth + 1))
                            read.append(target)
                            seen.add(str(target))
        except OSError:  # gone, or not ours to list: nothing of it is reachable through a lap either
            continue
    if queue:
        _warn_unread(queue[0][0])
    return found


def _what_it_leads_to(path: str, read: list[Path], shown: list[Path]) -> tuple[Path | None, Path | None]:
    """(the socket `path` is or links to, the folder it links to that no tree read so far holds)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None, None
    if not (stat.S_ISSOCK(mode) or stat.S_ISDIR(mode)):
        return None, None
    real = Path(os.path.realpath(path))
    if stat.S_ISSOCK(mode):
        return real, None
    # Not a folder that holds what is read anyway (a link to / or to HOME's parent would have
    # all of the machine read), nor one inside it.
    holds = any(real in path.parents for path in read) or real in _SHARED
    unread = not holds and not _inside(real, tuple(read)) and _visible(real, shown)
    return None, real if unread else None


@cache
def _warn_unread(folder: str) -> None:
    ui.warn(
        f"sandbox: looked on disk for unix sockets in {SCAN_BUDGET:,} entries and stopped at {folder}: "
        "a socket below it that no process of this machine's network namespace listens on (a container's) "
        "is reachable from laps"
    )


def _named() -> list[Path]:
    """The sockets the environment names, and the agents and connections ssh's configuration (and
    SSH_AUTH_SOCK) names, those whether they are there yet or not (their folder is hidden when it
    can be, so that an agent started during the run is out of reach too)."""
    in_values = [path for value in os.environ.values() for path in _PATH_IN_VALUE.findall(value)]
    agent = os.environ.get("SSH_AUTH_SOCK", "")
    agents = [*_ssh_sockets(), *([agent] if os.path.isabs(agent) else [])]
    sockets = [Path(os.path.realpath(path)) for path in in_values if _is_socket(path)]
    return sockets + [Path(os.path.realpath(path)) for path in agents if _is_socket(path) or not os.path.lexists(path)]


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _ssh_sockets() -> list[str]:
    """The local sockets ssh's configuration names (ssh reads the passwd entry's home, not HOME:
    both are read), a token that names a connection (%h, %C) matching any (a glob's *)."""
    homes = dict.fromkeys([str(Path.home()), _passwd().pw_dir])
    files = [(Path(home, ".ssh", "config"), Path(home, ".ssh"), home) for home in homes]
    files.append((Path("/etc/ssh/ssh_config"), Path("/etc/ssh"), str(Path.home())))
    found = []
    for config, folder, home in files:
        for keyword, value in _ssh_settings(config, folder):
            if keyword in _SSH_SOCKETS and (words(value) or [""])[0] not in ("", "none", "SSH_AUTH_SOCK"):
                pattern = _ssh_path(words(value)[0], home)
                found += [pattern, *glob.glob(pattern)] if "/" in pattern else []
    return found


def _ssh_settings(config: Path, folder: Path, depth: int = 0) -> list[tuple[str, str]]:
    """(keyword, value) of every line of an ssh config file, whatever Host or Match block it is
    in, with the files it includes (relative to `folder`, as ssh reads them; 16 deep at most)."""
    try:
        lines = config.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        keyword, _, value = re.sub(r"^\s*(\S+?)\s*(=|\s)\s*", r"\1 ", line).partition(" ")
        if keyword.lower() != "include" or depth >= 16:
            found.append((keyword.lower(), value.strip()))
            continue
        for pattern in words(value):
            for included in sorted(glob.glob(os.path.join(folder, os.path.expanduser(pattern)))):
                found += _ssh_settings(Path(included), folder, depth + 1)
    return found


def _ssh_path(value: str, home: str) -> str:
    """A path as ssh expands it: ~, ${VAR} (or $VAR alone), %d, %u, %i and %%; other tokens name
    a connection and become a glob's *."""
    if value.startswith("$") and "/" not in value:
        return os.environ.get(value.strip("${}"), "")
    value = home + value[1:] if value == "~" or value.startswith("~/") else os.path.expanduser(value)
    value = re.sub(r"\$\{(\w+)\}", lambda match: os.environ.get(match[1], ""), value)
    tokens = {"%": "%", "d": home, "u": _passwd().pw_name, "i": str(os.getuid())}
    return re.sub(r"%(.)", lambda match: tokens.get(match[1], "*"), value)


def _passwd() -> pwd.struct_passwd:
    """This user's passwd entry, where ssh finds HOME and the user's name; a uid without one
    (a container's) has HOME and USER."""
    try:
        return pwd.getpwuid(os.getuid())
    except KeyError:
        home, name = str(Path.home()), os.environ.get("USER", "")
        return pwd.struct_passwd((name, "x", os.getuid(), os.getgid(), "", home, "/bin/sh"))


def _visible(path: Path, shown: list[Path]) -> bool:
    """Whether the sandbox shows `path` (a real path) as it is here: outside the folders it makes
    private or anew, or in what it binds back of them."""
    return not _inside(path, (*PRIVATE, *FRESH)) or _inside(path, tuple(shown))


def _inside(path: Path, tops: tuple[Path, ...]) -> bool:
    return any(top == path or top in path.parents for top in tops)


def _real(paths: tuple[Path, ...]) -> tuple[Path, ...]:
    return tuple(Path(os.path.realpath(path)) for path in paths)
