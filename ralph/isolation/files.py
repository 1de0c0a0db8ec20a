"""Deleting what ralph made, safely: never through a link, never stopped by a read-only folder,
nor by one nested deeper than Python recurses or than a path can name (PATH_MAX), and off the
user's time where it can be (a trash folder emptied in the background); and writing a file of
ralph's without following a link planted where it goes."""

from __future__ import annotations

import errno
import itertools
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

PATH_MAX = 4096  # bytes in a path the kernel takes, its NUL included: Linux's, and git's own limit
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TRASH: list[Path] = []  # the trash folder use_trash set, if any
_TRASHED = threading.Condition()  # notified when a folder is moved into the trash
_NAMES = itertools.count()


def regular_text(path: Path, cap: int, *, follow: bool = False) -> str | None:
    """A file a lap's code may have written, as text: None unless it is a regular file of at most
    `cap` bytes (a link is followed only when asked: `follow`; a folder, a FIFO or /dev/zero is
    never opened as a file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        regular = stat.S_ISREG(info.st_mode) and info.st_size <= cap  # os.fdopen would refuse a folder
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as file:
        try:
            return file.read(cap + 1)[:cap].decode(errors="replace")
        except OSError:  # a file that reads as an error (/proc/self/mem reads EIO)
            return None


def use_trash(trash: Path) -> None:
    """From now on, a folder remove_path deletes below `trash`'s parent (ralph's cache: the
    workspaces) is moved into `trash` at once and deleted there by a thread of this process, off
    the user's time: on a disk whose discards are slow every emptied folder costs milliseconds
    (3.6 ms an rmdir on the machine bench/RESULTS.md measures), a lap's few dozen of them a
    tenth of a second, a workspace of 100,000 files tens of seconds. The thread first deletes
    what earlier processes left there (killed, or ended before it was done), so the trash holds
    at most what one run discards; `ralph clean` empties it too."""
    trash.mkdir(parents=True, exist_ok=True)
    with _TRASHED:
        started = bool(_TRASH)
        _TRASH[:] = [trash.resolve()]
        _TRASHED.notify()
    if not started:
        threading.Thread(target=_empty_trash, name="ralph-trash", daemon=True).start()


def _after_fork() -> None:
    """In a forked child (a slot of a parallel run): no thread empties the trash until it is
    used again, and a lock the fork may have caught held is made anew."""
    global _TRASHED
    _TRASHED = threading.Condition()
    _TRASH.clear()


os.register_at_fork(after_in_child=_after_fork)


def empty_trash(trash: Path) -> int:
    """Delete everything in `trash` now; how many entries there were."""
    try:
        names = os.listdir(trash)
    except FileNotFoundError:
        return 0
    for name in names:
        try:
            remove_path(trash / name)
        except OSError:  # another process's thread deleting it too, or a folder it cannot enter
            continue
    return len(names)


def _empty_trash() -> None:
    while True:
        with _TRASHED:
            trash = _TRASH[0]
        empty_trash(trash)
        with _TRASHED:
            if not os.listdir(trash):  # (one moved in meanwhile: emptied at once)
                _TRASHED.wait()


def _into_trash(path: Path, parent: int, name: str) -> bool:
    """Move the folder `path` (`name` in the open folder `parent`) into the trash, if there is one
    it may go to; whether it went."""
    with _TRASHED:
        trash = _TRASH[0] if _TRASH else None
    if trash is None:
        return False
    absolute = Path(os.path.abspath(path))
    if trash.parent not in absolute.parents or trash == absolute or trash in absolute.parents:
        return False
    try:
        os.rename(name, trash / f"{os.getpid()}-{next(_NAMES)}", src_dir_fd=parent)
    except OSError:  # another file system, a folder it may not move: deleted here and now
        return False
    with _TRASHED:
        _TRASHED.notify()
    return True


def remove_path(path: Path) -> None:
    """Delete a file or folder ralph made, never following a link: a link is removed, not its
    target; a folder however deep (a lap's, on purpose), and one left read-only (Go's module
    cache, a lap's chmod -R a-w) made writable, never a link's target. A folder in ralph's cache
    goes to the trash, when this process has one (use_trash): gone from where it was at once."""
    try:
        parent, name = _open_parent(path)
    except (FileNotFoundError, NotADirectoryError):  # no folder that could hold it
        return
    try:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            if not _into_trash(path, parent, name):
                _remove_folder(parent, name)
        else:
            _in_writable(parent, os.unlink, name)
    finally:
        os.close(parent)


def remove_contents(folder: Path) -> None:
    """Everything in `folder` deleted as remove_path deletes, the folder itself kept (ralph knows
    the folders it made by what they are, not only by their paths)."""
    parent, name = _open_parent(folder)
    try:
        fd = _open_folder(parent, name)
    finally:
        os.close(parent)
    try:
        for inner in _files_deleted(fd):
            _remove_folder(fd, inner)
    finally:
        os.close(fd)


def _open_parent(path: Path) -> tuple[int, str]:
    """The folder holding `path`, open, and the name in it. A path too long to name whole is
    opened part by part, none of the parts past the PATH_MAX mark a link."""
    text = os.fsencode(os.path.abspath(path))
    folder, _, name = text.rpartition(b"/")
    head = folder or b"/"
    rest: list[bytes] = []  # the parts past the mark, the last first
    while len(head) >= PATH_MAX:
        head, _, part = head.rpartition(b"/")
        rest.append(part)
    fd = os.open(head or b"/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in reversed(rest):
        try:
            inner = os.open(part, _FOLDER, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd, os.fsdecode(name)


@dataclass
class _Level:
    """A folder open on the way down: its name in the one above, what it is, the folders in it
    still to delete."""

    name: str
    identity: tuple[int, int]
    folders: list[str]


def _remove_folder(parent: int, name: str) -> None:
    """rmtree of `name` in the folder open as `parent`, by folder descriptors: at any depth,
    without recursion and without paths, never through a link. Two descriptors at a time: a
    folder is opened again from the one below it by "..", and must be the folder it was (a
    folder moved meanwhile stops it: it would lead elsewhere)."""
    fd = _open_folder(parent, name)
    chain = [_Level(name, _identity(fd), _files_deleted(fd))]
    try:
        while chain:
            level = chain[-1]
            if level.folders:
                child = level.folders.pop()
                try:
                    inner = _open_folder(fd, child)
                except OSError as error:  # swapped for a file or a link, or gone: not a folder to enter
                    if error.errno not in (errno.ENOTDIR, errno.ELOOP, errno.ENOENT):
                        raise
                    _in_writable(fd, _unlink_if_there, child)
                    continue
                os.close(fd)
                fd = inner
                chain.append(_Level(child, _identity(fd), _files_deleted(fd)))
                continue
            chain.pop()
            up = os.open("..", _FOLDER, dir_fd=fd) if chain else os.dup(parent)
            os.close(fd)
            fd = up
            if chain and _identity(fd) != chain[-1].identity:
                raise OSError(errno.ESTALE, "a folder was moved while ralph deleted it", level.name)
            _in_writable(fd, os.rmdir, level.name)
    finally:
        os.close(fd)


def _open_folder(parent: int, name: str) -> int:
    try:
        return os.open(name, _FOLDER, dir_fd=parent)
    except PermissionError:  # a folder it cannot list: made so by its owner, who may undo it
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)
        return os.open(name, _FOLDER, dir_fd=parent)


def _files_deleted(fd: int) -> list[str]:
    """Delete everything in the open folder but folders (made writable first); their names."""
    mode = os.fstat(fd).st_mode
    if mode & stat.S_IRWXU != stat.S_IRWXU:
        os.fchmod(fd, mode | stat.S_IRWXU)
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                _unlink_if_there(entry.name, fd)
    return folders


def _unlink_if_there(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _in_writable(fd: int, delete: Callable[..., None], name: str) -> None:
    """`delete(name)` in the open folder, once more after making it writable if it was not."""
    try:
        delete(name, dir_fd=fd)
    except PermissionError:
        os.fchmod(fd, os.fstat(fd).st_mode | stat.S_IRWXU)
        delete(name, dir_fd=fd)


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def walk(top: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk, top-down, links not followed, without recursion (a tree may be nested deeper than
    Python recurses), and making each folder it cannot list readable to its owner (a lap's chmod).
    A folder whose path is too long to name (PATH_MAX) is listed, never entered."""
    stack = [str(top)]
    while stack:
        folder = stack.pop()
        listed = listing(folder)
        if listed is None:
            continue
        folders, files = listed
        yield folder, folders, files
        stack.extend(os.path.join(folder, name) for name in reversed(folders))


def listing(folder: str) -> tuple[list[str], list[str]] | None:
    """A folder's subfolders and its other entries (links among them), the folder made readable
    to its owner first if a lap's chmod hid them; None if it cannot be listed."""
    try:
        entries = list(os.scandir(folder))
    except PermissionError:
        os.chmod(folder, stat.S_IRWXU)
        entries = list(os.scandir(folder))
    except OSError:
        return None
    folders: list[str] = []
    files: list[str] = []
    for entry in entries:  # (each entry asked once: a lap's tree is walked twice a lap)
        (folders if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
    return folders, files


def make_usable(top: Path) -> None:
    """Every folder under `top` readable, writable and searchable by its owner, and nothing
    deeper than a path can name: a lap's chmod must not hide files from git's staging and
    cleaning, nor stop them, and git can neither stage nor clean what lies past PATH_MAX (so no
    commit holds it: only a lap's own folders reach there), which is deleted."""
    for folder, folders, files in walk(top):
        mode = os.lstat(folder).st_mode
        if mode & stat.S_IRWXU != stat.S_IRWXU:
            os.chmod(folder, mode | stat.S_IRWXU)
        beyond = [name for name in (*folders, *files) if len(os.fsencode(os.path.join(folder, name))) >= PATH_MAX]
        for name in beyond:
            remove_path(Path(folder, name))
        folders[:] = [name for name in folders if name not in beyond]


BYTECODE = (":(glob)**/*.py[co]", ":(glob)**/__pycache__/**")  # pathspecs of what Python may run in place of a source


def remove_bytecode(root: Path, untracked: list[str], made: Callable[[str], bool]) -> None:
    """Delete bytecode files (`untracked`: relative to `root`, found with BYTECODE) but those in
    virtualenvs (a folder with a pyvenv.cfg above them), node_modules and .git that no commit
    holds (`made`: whether a path, relative to `root`, is untracked; a committed pyvenv.cfg is
    a lap's to write): a lap could leave bytecode that Python (and pytest, for rewritten test
    modules) would run in place of a source it trusts as current. Committed bytecode is no lap's
    to leave: it is not untracked."""
    spared: dict[Path, bool] = {}

    def environment(folder: Path) -> bool:
        if folder.name == ".git":
            return True
        if folder.name == "node_modules":
            return made(os.path.relpath(folder, root))
        return _is_file(folder / "pyvenv.cfg") and made(os.path.relpath(folder / "pyvenv.cfg", root))

    def in_environment(folder: Path) -> bool:
        """Looked up from the folder to `root` (without recursion: paths may be deep), each
        folder on the way remembered."""
        on_the_way = []
        while folder not in spared:
            if folder == root or folder == folder.parent:
                spared[folder] = False
            elif environment(folder):
                spared[folder] = True
            else:
                on_the_way.append(folder)
                folder = folder.parent
        for below in on_the_way:
            spared[below] = spared[folder]
        return spared[on_the_way[0]] if on_the_way else spared[folder]

    for path in untracked:
        if not in_environment((root / path).parent):
            remove_path(root / path)


def _is_file(path: Path) -> bool:
    """Path.is_file, False too for a path too long to name."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def replace_with(target: Path, text: str) -> None:
    """`target` made a file holding `text`: written beside it, then moved over it, so a link
    planted where it goes is replaced, never followed to overwrite whatever it points at."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(partial, "x", encoding="utf-8") as out:
            out.write(text)
        os.replace(partial, target)
    except OSError:
        partial.unlink(missing_ok=True)
        raise
