"""A lap's own git dir (git/), made anew before every phase: HEAD detached at the lap's start,
the repository's tags, objects borrowed read-only from the repository (alternates), a config
with no credential helper: the only config git reads in a lap (no system or global one, nor
their includes: jail.GIT_CONFIG). The agent's commits, stash, branches, hooks and config land here
and die here; whatever one phase planted (hooks, config, a rewritten .git file) never reaches
the next, nor ralph. (Only what is exactly as ralph made it stays: its two folders of objects
and refs, its config and tags, and the tree's .git file, each untouched since: as_made.py.)
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ralph import git
from ralph.isolation import as_made
from ralph.isolation.files import remove_path
from ralph.isolation.git_syntax import quoted

_LAYOUT = {"objects": ["info"], "objects/info": ["alternates"], "refs": []}  # the folders and what they hold


def make(
    lap_git: Path, tree: Path, head: str, *, common_dir: Path, tags: str, config: str, index: Path, keep_modules: bool
) -> None:
    """Make `lap_git` anew, HEAD detached at `head`, and point `tree`/.git at it; its
    submodules' repositories (modules/) stay with `keep_modules`. `index`: ralph's, copied with
    its mtime, for git's racy check."""
    os.chmod(lap_git, stat.S_IRWXU)  # whatever mode the last phase left it in
    alternates = f"{common_dir / 'objects'}\n"
    folders_kept = _as_made(lap_git, alternates)
    files = {"config": config, **({"packed-refs": tags} if tags else {})}
    kept = {name for name, text in files.items() if _kept(lap_git / name, text)}
    kept |= {"objects", "refs"} if folders_kept else set()
    for entry in os.listdir(lap_git):
        if entry not in kept and (entry != "modules" or not keep_modules):
            remove_path(lap_git / entry)
    if not folders_kept:
        for folder in _LAYOUT:  # git makes refs/heads, refs/tags when it needs them
            (lap_git / folder).mkdir()
        _write(lap_git / "objects/info/alternates", alternates)
        for folder in _LAYOUT:  # (their ctimes as the file written into one left them)
            as_made.record(lap_git / folder)
    (lap_git / "HEAD").write_text(head + "\n")
    for name, text in files.items():
        if name not in kept:
            _write(lap_git / name, text)
    shallow = common_dir / "shallow"
    if shallow.is_file():
        shutil.copyfile(shallow, lap_git / "shallow")
    if index.is_file():
        shutil.copy2(index, lap_git / "index")  # with its mtime, for git's racy check
    pointer = f"gitdir: {lap_git}\n"
    if not _kept(tree / ".git", pointer):
        remove_path(tree / ".git")
        _write(tree / ".git", pointer)


def _kept(path: Path, text: str) -> bool:
    """`path` is a file `_write` wrote, as made since (as_made.py), with one name, and holds `text`:
    it stays (its config, its tags, the tree's .git file are the same every phase)."""
    try:
        return as_made.unchanged(path) and os.lstat(path).st_nlink == 1 and _holds(path, text)
    except OSError:
        return False


def _holds(path: Path, text: str) -> bool:
    """The regular file at `path` (as_made checked its type) holds exactly `text`."""
    data = text.encode()
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as file:
        return file.read(len(data) + 1) == data


def _write(path: Path, text: str) -> None:
    """A new file at `path` (none must be there, nor a link), holding `text`."""
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb") as out:
        out.write(text.encode())
    as_made.record(path)


def _as_made(lap_git: Path, alternates: str) -> bool:
    """objects/ holds only info/alternates, reading `alternates`, and refs/ nothing, each the very
    one `make` made and unchanged since (as_made.py): they stay. Anything else is made anew: a
    link, another entry (an object the agent committed, a ref), an ACL, a second name for the file."""
    try:
        for folder, entries in _LAYOUT.items():
            if not as_made.unchanged(lap_git / folder) or sorted(os.listdir(lap_git / folder)) != entries:
                return False
    except OSError:
        return False
    return _kept(lap_git / "objects/info/alternates", alternates)


def write_excludes(lap_git: Path, patterns: list[str]) -> None:
    """info/exclude made anew holding `patterns` (a line each; none: no file, since making one costs
    more than git reading none). Setup's code runs with git/ writable: a link it left in place
    of info/ or its exclude would lead this write outside the sandbox, so info/ goes first."""
    remove_path(lap_git / "info")
    lines = [pattern for pattern in patterns if "\n" not in pattern]  # no such line
    if lines:
        (lap_git / "info").mkdir()
        (lap_git / "info" / "exclude").write_text("".join(f"{pattern}\n" for pattern in lines))


def config(identity: tuple[str, str], hooks_path: str) -> str:
    """The lap's git config: its user, the repository's hooks, nothing that reaches out."""
    name, email = identity
    return (
        f"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
        f"\thooksPath = {quoted(hooks_path)}\n"
        f"[user]\n\tname = {quoted(name)}\n\temail = {quoted(email)}\n"
        # No credential helper: a lap asks git for nobody's password.
        "[credential]\n\thelper =\n"
        "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n[commit]\n\tgpgSign = false\n"
    )


def submodules(lap_git: Path, tree: Path, common_dir: Path, commit: str) -> dict[str, str]:
    """Empty the submodules' folders of `commit` in `tree` for a fresh `git submodule update`, and point
    each at the repository's own copy of it where there is one (offline, objects shared).
    Returns {path: name}."""
    found = {}
    for path, name in git.submodule_paths(common_dir, commit).items():
        # .gitmodules is the lap's to write: only a path the commit holds as a gitlink, below
        # tree/ through real folders, is touched (an absolute one emptied the user's hooks).
        folder = _gitlink_folder(tree, common_dir, commit, path)
        if folder is None:
            continue
        found[path] = name
        remove_path(folder)
        folder.mkdir(parents=True)
        mine = common_dir / "modules" / name
        if ".." not in Path(name).parts and (mine / "HEAD").is_file():
            with open(lap_git / "config", "a") as config:
                config.write(f"[submodule {quoted(name)}]\n\turl = {quoted(str(mine))}\n")
    return found


def _gitlink_folder(tree: Path, common_dir: Path, commit: str, path: str) -> Path | None:
    parts = Path(path).parts
    if not parts or Path(path).is_absolute() or ".." in parts:
        return None
    entry = git.run(tree, "--git-dir", str(common_dir), "ls-tree", "-z", commit, "--", path, check=False).output
    if not entry.startswith("160000 commit ") or entry.rstrip("\0").split("\t", 1)[-1] != path:
        return None
    for depth in range(1, len(parts)):  # every folder on the way is a real one, no link
        try:
            if not stat.S_ISDIR(os.lstat(tree.joinpath(*parts[:depth])).st_mode):
                return None
        except OSError:
            return None
    return tree / path
