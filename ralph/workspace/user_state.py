"""The repository's shared state, watched and put back when laps run without a sandbox.

Sandboxed, a lap cannot write the repository at all and none of this runs. Without a
sandbox the lap's code runs as the user: ralph snapshots the git dir before the agent and,
after the checks, puts back what changed (refs by compare-and-swap), failing the lap. The
snapshot is also kept on disk, outside the repository and the workspace, for a resume after
`kill -9`; what it names is checked against the watched set before anything is written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ralph import git
from ralph.git import layout
from ralph.isolation.files import remove_path
from ralph.show import ui
from ralph.workspace.places import folder_for

_REF_NAME = re.compile(r"^refs/[A-Za-z0-9._/@+-]+$")
_FILE_CAP = 1 << 20  # bytes kept of a watched file (hooks, config); a larger one is watched by its hash
_NO_HOOKS = ["-c", "core.hooksPath=/dev/null"]  # a hook the lap planted may not veto the restore
# A snapshot entry is a marker, then: a link's target; a file's permission bits and bytes; or,
# for a file over _FILE_CAP, its bits and hash (seen, not put back).
_LINK = b"\0symlink\0"
_FILE = re.compile(rb"^\0file ([0-7]{3,4})\0")
_LARGE = b"\0large"
_SPECIAL = b"\0special "  # a FIFO, socket or device: seen (and a new one removed), never read
_VALUE = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64}|ref: refs/[A-Za-z0-9._/@+-]+)$")


@dataclass(frozen=True)
class UserState:
    refs: dict[str, str]  # every ref, ralph's own included: its object, or "ref: <target>" if symbolic
    files: dict[str, bytes]  # relative to the common git dir

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        files = {name: base64.b64encode(data).decode() for name, data in self.files.items()}
        path.write_text(json.dumps({"refs": self.refs, "files": files}))

    @classmethod
    def load(cls, path: Path) -> UserState | None:
        """The snapshot a crash left, or None; one that names anything outside the watched set
        (a rewritten snapshot) is refused whole."""
        try:
            data = json.loads(path.read_text())
            refs = {str(name): str(sha) for name, sha in data["refs"].items()}
            files = {str(name): base64.b64decode(text) for name, text in data["files"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        bad = [
            name for name, value in refs.items() if not _REF_NAME.match(name) or ".." in name or not _VALUE.match(value)
        ]
        bad += [
            name
            for name, data in files.items()
            if not is_watched(name) or not (data.startswith((_LINK, _LARGE, _SPECIAL)) or _FILE.match(data))
        ]
        if bad:
            raise SnapshotRefused(
                f"{path} names what ralph never watches ({', '.join(sorted(bad)[:3])}); "
                "it was not applied — check your repository by hand"
            )
        return cls(refs, files)


class SnapshotRefused(ValueError):
    pass


def snapshot(top: Path, common_dir: Path) -> UserState:
    return UserState(_refs(top), dict(_watched_files(common_dir)))


def _refs(top: Path) -> dict[str, str]:
    """Every ref: a symbolic one by its target, so a branch turned into a link to ralph's green
    line (which would move the user's branch with it) is seen although both name one commit."""
    listing = git.out(top, "for-each-ref", "--format=%(refname) %(objectname) %(symref)")
    refs = {}
    for line in listing.splitlines():
        name, sha, target = (line.split(" ") + ["", ""])[:3]
        refs[name] = f"ref: {target}" if target else sha
    return refs


def saved_at(common_dir: Path, run: str) -> Path:
    """Where a lap's snapshot waits while the lap runs: beside the run's workspace, outside
    both the repository and the workspace."""
    workspace = folder_for(common_dir, run)
    return workspace.with_name(workspace.name + ".snapshot.json")


def put_back(top: Path, common_dir: Path, before: UserState, who: str) -> list[str]:
    """Restore, tell the user what happened (and, loudly, what could not be put back), and
    return all of it for the lap's reason."""
    changed, left = restore(top, common_dir, before)
    if changed:
        ui.warn(f"{who} changed your repository ({', '.join(changed)}); ralph put it back")
    if left:
        ui.warn(f"{who} changed your repository and ralph did NOT put back: {'; '.join(left)}")
    return changed + left


def restore(top: Path, common_dir: Path, before: UserState) -> tuple[list[str], list[str]]:
    """Put back what differs from `before`. Returns what was put back and what was not (a ref
    someone else may have made, which is left in place, or a write that failed)."""
    changed, left = _restore_files(common_dir, before), []
    after = _refs(top)
    for ref in sorted(before.refs.keys() | after.keys()):
        old, new = before.refs.get(ref), after.get(ref)
        if old == new:
            continue
        if old is None and not ref.startswith(layout.OURS):  # ralph's own, made by the lap: deleted
            left.append(f"{ref} created during the lap (left in place: it may be yours)")
            continue
        what = f"{ref} {'created' if old is None else 'deleted' if new is None else 'moved'}"
        (changed if _put_ref(top, ref, old, new) else left).append(what)
    return changed, left + _still_different(top, common_dir, before)


def _put_ref(top: Path, ref: str, old: str | None, new: str | None) -> bool:
    """`ref` back to `old` (None: deleted), with hooks off; by compare-and-swap unless either
    side is symbolic (then --no-deref replaces the link itself)."""
    if old is None:
        args = ["update-ref", "--no-deref", "-d", ref]
    elif old.startswith("ref: "):
        args = ["symbolic-ref", ref, old.removeprefix("ref: ")]
    elif new is None or new.startswith("ref: "):
        args = ["update-ref", "--no-deref", ref, old]
    else:
        args = ["update-ref", ref, old, new]
    return git.run(top, *_NO_HOOKS, *args, check=False).ok


def _restore_files(common_dir: Path, before: UserState) -> list[str]:
    changed = []
    now = dict(_watched_files(common_dir))
    for name in sorted(before.files.keys() | now.keys()):
        old, current = before.files.get(name), now.get(name)
        if old == current or (old or b"").startswith((_LARGE, _SPECIAL)):
            continue  # a large or special file that changed cannot be put back: _still_different names it
        path = common_dir / name
        try:
            remove_path(path)  # a file, or a folder planted where a file was, or a link: never its target
            if old is not None:
                _real_folder(common_dir, path.parent).mkdir(parents=True, exist_ok=True)
                if old.startswith(_LINK):
                    os.symlink(old[len(_LINK) :].decode(), path)
                else:
                    mode = _FILE.match(old)
                    assert mode is not None  # _read wrote it so
                    path.write_bytes(old[mode.end() :])
                    os.chmod(path, int(mode.group(1), 8))
        except OSError:
            continue  # reported by _still_different
        changed.append(f"{name} {'added' if old is None else 'deleted' if current is None else 'changed'}")
    return changed


def _real_folder(common_dir: Path, folder: Path) -> Path:
    """`folder` with no link on the way from the git dir (a link planted there is removed)."""
    for parent in [*reversed(folder.relative_to(common_dir).parents), folder.relative_to(common_dir)]:
        if (common_dir / parent).is_symlink():
            remove_path(common_dir / parent)
    return folder


def _still_different(top: Path, common_dir: Path, before: UserState) -> list[str]:
    """Checked, not assumed: what differs from `before` after the restore."""
    after = snapshot(top, common_dir)
    refs = [f"{ref} still differs" for ref in sorted(before.refs) if after.refs.get(ref) != before.refs[ref]]
    return refs + [
        f"{name} still differs"
        for name in sorted(before.files.keys() | after.files.keys())
        if before.files.get(name) != after.files.get(name)
    ]


def is_watched(name: str) -> bool:
    """The whole git dir but object data, indexes, logs, refs (watched as refs), locks and ralph's folder."""
    parts = Path(name).parts
    if not parts or name.startswith("/") or ".." in parts or parts[0] in (layout.FOLDER, "refs", "logs"):
        return False
    if parts[-1] in ("index", "packed-refs", "FETCH_HEAD", "ORIG_HEAD") or parts[-1].endswith(".lock"):
        return False
    if "logs" in parts:
        return False
    for at, part in enumerate(parts):  # objects/ of the repository or of a submodule's: only info/
        if part == "objects" and parts[at + 1 : at + 2] != ("info",):
            return False
    return True


def _watched_files(common_dir: Path) -> Iterator[tuple[str, bytes]]:
    """(name, content) of every watched file. A link's content is its target, marked, so a planted
    link is seen (and removed), never followed. Folders never watched are not even walked."""
    for folder, dirs, files in os.walk(common_dir):
        here = Path(folder)
        dirs[:] = [d for d in dirs if _walk_into(str((here / d).relative_to(common_dir)))]
        links = [d for d in dirs if (here / d).is_symlink()]
        for entry in sorted([*files, *links]):
            path = here / entry
            name = str(path.relative_to(common_dir))
            if not is_watched(name):
                continue
            try:
                yield name, _entry(path)
            except OSError:
                continue


def _entry(path: Path) -> bytes:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return _LINK + os.readlink(path).encode()
    if not stat.S_ISREG(info.st_mode):  # a FIFO (never opened: it would wait), a socket, a device
        return _SPECIAL + f"{info.st_mode:o}".encode()
    bits = f"{stat.S_IMODE(info.st_mode):o}".encode()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the lstat (a lap's code racing it)
        os.close(fd)
        return _SPECIAL + f"{info.st_mode:o}".encode()
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    if len(data) <= _FILE_CAP:
        return b"\0file " + bits + b"\0" + data
    return _LARGE + b" " + bits + b" " + hashlib.sha256(data).hexdigest().encode()


def _walk_into(name: str) -> bool:
    parts = Path(name).parts
    if parts[0] in (layout.FOLDER, "refs") or "logs" in parts:
        return False
    return all(part != "objects" or parts[at + 1] == "info" for at, part in enumerate(parts[:-1]))
