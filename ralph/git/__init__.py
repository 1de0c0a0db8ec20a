"""The one door to git: small typed functions that take the directory to run in.

Its package holds the rest of the git model: every ref name and run folder (layout.py), where
refs are written (store.py: this repository, or a remote first: remote.py), the credentials
git finds (credentials.py), GitHub's pull requests (github.py). What ralph stores in git is
ralph.records'.

Every git command goes through `proc.run` with `proc.clean_env()`, so GIT_DIR and
friends from a calling hook cannot redirect it and the repository's hooks never see
secrets. GitPython is used only to find and describe a repository (it reads files;
no long-lived `Repo`, no `cat-file` processes left behind). Files at commits are read through
one `git cat-file --batch` of ralph's own a repository (blobs.py), which ends with ralph.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ralph.errors import RalphError
from ralph.git import blobs
from ralph.git.layout import NOTES
from ralph.isolation import proc
from ralph.isolation.jail import Jail
from ralph.show.ui import one_line

WHOLE = 1 << 62  # "no cap": what ralph parses is never cut (a TODO.md of 17 MiB, a huge listing)
# Durable ref and object writes: a green line must not point at a commit lost in a crash.
DURABLE = ["-c", "core.fsync=committed", "-c", "core.fsyncMethod=fsync"]
# A commit or a note may start `git gc --auto` in the background; ralph ends whatever its
# commands leave running, and a gc ended mid-way leaves packed-refs.lock, after which no ref
# can be deleted until a person removes it. ralph's own git commands never start one.
NO_AUTO_GC = ["-c", "gc.auto=0", "-c", "maintenance.auto=false"]


class GitFailed(RalphError):
    def __init__(self, args: list[str], result: proc.Completed):
        said = (result.stderr or result.output)[-600:].strip()
        super().__init__(f"git {' '.join(args)} failed ({result.exit_code}): {said}")
        self.result = result


def run(
    cwd: Path,
    *args: str,
    input: str | None = None,
    timeout: float | None = 300,
    check: bool = True,
    hooks: bool = False,
    env: dict[str, str] | None = None,
    jail: Jail | None = None,
    cap: int | None = None,
    spill: Path | None = None,
) -> proc.Completed:
    """Run git, stdout and stderr apart; raise GitFailed on a non-zero exit when `check`.

    `hooks` marks commands that run the repository's own code, so stray processes
    they leave are swept like any check's; give those the run's `env` (no secrets) and,
    when laps are sandboxed, the `jail` they run in. Their output is for people, capped;
    git's own output is what ralph parses, kept whole (unless `cap` says how much is shown);
    `spill` keeps a hook's whole output in a file, for what ralph reads of it.
    """
    cap = cap or (proc.OUTPUT_CAP if hooks else WHOLE)
    result = proc.run(
        ["git", *NO_AUTO_GC, *args],
        cwd,
        env=env or proc.clean_env(),
        input=input,
        timeout=timeout,
        cap=cap,
        stderr_apart=not hooks,
        sweep=hooks,
        jail=jail,
        spill=spill,
    )
    if check and not result.ok:
        raise GitFailed(list(args), result)
    return result


def out(cwd: Path, *args: str, input: str | None = None) -> str:
    """Run git for its (machine-readable) standard output."""
    return run(cwd, *args, input=input).output.strip()


@dataclass(frozen=True)
class RepoInfo:
    top: Path  # the user's work tree root
    common_dir: Path  # shared by every worktree: where ralph keeps its state
    branch: str | None  # the user's current branch, None when detached
    head: str  # the user's HEAD commit


def open_repo(path: Path) -> RepoInfo:
    """Describe the repository at `path`, or say clearly why ralph cannot work there.

    GitPython only finds the repository and reads HEAD's file, once a command; it is imported
    here, not at start-up (about 65 ms), and runs with the GIT_* variables a calling hook may
    have left pointing at another repository set aside. The commit is resolved by git.
    """
    import git as gitpython

    try:
        with _without_git_variables():
            repo = gitpython.Repo(path, search_parent_directories=True)
    except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
        raise RalphError(f"not a git repository: {path} — run ralph inside a git repository") from None
    try:
        if repo.bare:
            raise RalphError(f"{repo.git_dir} is a bare repository — ralph needs a work tree; clone it first")
        assert repo.working_tree_dir is not None  # not bare
        top, common_dir = Path(repo.working_tree_dir), Path(repo.common_dir).resolve()
        branch = None if repo.head.is_detached else repo.head.ref.name
    finally:
        repo.close()
    head = rev(top, "HEAD")
    if head is None:
        raise RalphError("the repository has no commits yet — commit something first (git commit)")
    return RepoInfo(top, common_dir, branch, head)


@contextmanager
def _without_git_variables() -> Iterator[None]:
    saved = {name: os.environ.pop(name) for name in proc.GIT_LOCAL_VARS if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def rev(cwd: Path, name: str) -> str | None:
    """The commit (or object) a name points at, None when it does not exist."""
    result = run(cwd, "rev-parse", "-q", "--verify", name, check=False)
    return result.output.strip() if result.ok else None


def refs(cwd: Path, prefix: str) -> dict[str, str]:
    """Every ref under `prefix`, mapped to the object it points at."""
    listing = out(cwd, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in listing.splitlines() if line)


def common_dir(cwd: Path) -> Path:
    """The git dir every worktree of the repository shares: where ralph keeps its state (asked
    of git once a folder: a lap's note asks for it)."""
    if cwd not in _COMMON_DIRS:
        _COMMON_DIRS[cwd] = Path(cwd, out(cwd, "rev-parse", "--git-common-dir"))
    return _COMMON_DIRS[cwd]


_COMMON_DIRS: dict[Path, Path] = {}


def write_blob(cwd: Path, text: str) -> str:
    return out(cwd, *DURABLE, "hash-object", "-w", "--stdin", input=text)


def read_blob(cwd: Path, sha: str) -> str:
    """A blob's text, stripped (asked of the batch reader, as blob_text's); GitFailed when there is none."""
    text = blob_text(cwd, sha)
    return text.strip() if text is not None else out(cwd, "cat-file", "blob", sha)


_SHOWN: dict[tuple[Path, str, str], str | None] = {}  # (repository, object id, path): a lap reads each a few times
_SHOWN_ENTRIES = 64
_SHOWN_LARGEST = 1 << 20  # characters: a larger text is read again when asked for


def show_file(cwd: Path, commit: str, path: str, env: dict[str, str] | None = None) -> str | None:
    """A file's text at a commit (`""`: the index), None when no file is there. What a full
    object id holds never changes: those reads are kept (a few, none large)."""
    key = (cwd, commit, path)
    if key in _SHOWN:
        return _SHOWN[key]
    # A blob only: a folder (or a submodule) there is no file, whatever its listing would read as.
    name = f"{commit}:{path}"
    read = blobs.read(cwd, ["git", *NO_AUTO_GC, "cat-file", "--batch"], name) if env is None else None
    if isinstance(read, bytes):
        text, known = read.decode("utf-8", "replace"), True
    elif read is None and env is None:  # no blob there (not kept: it may be of a commit yet to be fetched)
        text, known = None, False
    else:  # an environment of the caller's, or no answer from the batch reader: one process, as before
        result = run(cwd, "cat-file", "blob", name, check=False, env=env)
        text = result.output if result.ok else None
        # Kept: a text, or that no file is there; never a failure of another kind (a timeout).
        known = result.ok or "does not exist" in result.stderr or "bad file" in result.stderr
    immutable = len(commit) == 40 and all(char in "0123456789abcdef" for char in commit)
    if known and immutable and len(text or "") <= _SHOWN_LARGEST:
        if len(_SHOWN) >= _SHOWN_ENTRIES:
            del _SHOWN[next(iter(_SHOWN))]
        _SHOWN[key] = text
    return text


def files_at(cwd: Path, commit: str) -> list[str]:
    """Every path a commit holds (submodules as one path each)."""
    return [path for path in out(cwd, "ls-tree", "-r", "-z", "--name-only", commit, "--").split("\0") if path]


def changes(cwd: Path, old: str, new: str) -> dict[str, tuple[str, str]]:
    """Changed paths between two commits: {path: (status letter A/M/D/T, mode in `new`)}, the
    mode telling links (120000) and gitlinks (160000) apart; a deleted path's mode is 000000."""
    fields = out(cwd, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", old, new, "--").split("\0")
    found = {}
    for record, path in zip(fields[::2], fields[1::2], strict=False):
        parts = record.split(" ")  # ":old-mode new-mode old-sha new-sha status"
        if path and len(parts) == 5:
            found[path] = (parts[4][0], parts[1])
    return found


def diffstat(cwd: Path, old: str, new: str) -> str:
    return run(cwd, "diff", "--stat=100", old, new, "--").output.rstrip()


def diff(cwd: Path, old: str, new: str) -> str:
    """The patch from `old` to `new`, as `git diff` prints it (binary files named, not shown)."""
    return out(cwd, "diff", "--no-color", "--no-ext-diff", "--no-textconv", old, new, "--")


def is_dirty(cwd: Path) -> bool:
    # --no-optional-locks: a plain status may rewrite the user's index to refresh it.
    return bool(out(cwd, "--no-optional-locks", "status", "--porcelain", "--untracked-files=normal"))


# --- work trees ------------------------------------------------------------------------


class SubmodulesFailed(RalphError):
    """`git submodule update` failed: the environment's fault at the start, the lap's afterwards."""


def init_submodules(workspace: Path, timeout: float, env: dict[str, str], jail: Jail | None) -> None:
    """A fresh checkout has empty submodule folders; fill them as a fresh clone would.

    protocol.file.allow: submodules given as local paths (common in monorepos and tests)
    are refused by git >= 2.38.1 otherwise; they are the user's own repositories.
    """
    result = run(
        workspace,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "update",
        "--init",
        "--recursive",
        timeout=timeout,
        check=False,
        hooks=True,
        env=env,
        jail=jail,
    )
    if not result.ok:
        raise SubmodulesFailed(
            f"cannot check out the submodules in the lap's workspace: {one_line(result.tail(400))} — "
            "make `git submodule update --init` work offline (e.g. local mirrors)"
        )


def submodule_paths(cwd: Path, commit: str) -> dict[str, str]:
    """{path: name} of the submodules the commit's .gitmodules declares."""
    listing = run(
        cwd, "config", "--blob", f"{commit}:.gitmodules", "-z", "--get-regexp", r"^submodule\..*\.path$", check=False
    ).output
    found = {}
    for entry in filter(None, listing.split("\0")):
        key, _, path = entry.partition("\n")
        found[path] = key.removeprefix("submodule.").removesuffix(".path")
    return found


def settings(cwd: Path, *keys: str) -> dict[str, str]:
    """What git's configuration sets for each of `keys` (lower case, as git lists them; the last
    value of a key is the one git uses), read by one git process. Unset keys are not in it."""
    pattern = "^(" + "|".join(key.replace(".", "\\.") for key in keys) + ")$"
    listing = run(cwd, "config", "-z", "--get-regexp", pattern, check=False).output
    found = {}
    for entry in filter(None, listing.split("\0")):
        key, _, value = entry.partition("\n")
        found[key] = value
    return found


def hooks_path(cwd: Path) -> str | None:
    """core.hooksPath as the user set it (None: the repository's hooks folder)."""
    return settings(cwd, "core.hookspath").get("core.hookspath", "").strip() or None


def uses_lfs(cwd: Path, commit: str) -> bool:
    attributes = show_file(cwd, commit, ".gitattributes") or ""
    return "filter=lfs" in attributes


def worktree_branches(cwd: Path) -> dict[str, Path]:
    """Branches checked out in any worktree, mapped to where."""
    listing = out(cwd, "worktree", "list", "--porcelain")
    found, path = {}, None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree ") :])
        elif line.startswith("branch ") and path is not None:
            found[line[len("branch ") :]] = path
    return found


# --- commits and notes -----------------------------------------------------------------


def with_files(cwd: Path, tree: str, files: Mapping[str, str | None]) -> str:
    """`tree` with these paths holding these texts (as regular files; None: no such file),
    through an index of its own: four git processes, whatever the number of files."""
    with tempfile.TemporaryDirectory(prefix="ralph-index-") as folder:
        env = proc.clean_env(extra={"GIT_INDEX_FILE": str(Path(folder) / "index")})
        texts = [text for text in files.values() if text is not None]
        for number, text in enumerate(texts):  # as write_blob hands git a text: its UTF-8 bytes
            Path(folder, str(number)).write_bytes(text.encode())
        listing = "".join(f"{folder}/{number}\n" for number in range(len(texts)))
        if "\n" in folder or not texts:  # (a TMPDIR git's listing cannot carry)
            blobs = iter([write_blob(cwd, text) for text in texts])
        else:
            blobs = iter(
                out(cwd, *DURABLE, "hash-object", "-w", "--no-filters", "--stdin-paths", input=listing).split()
            )
        entries = "".join(
            f"0 {'0' * 40}\t{path}\0" if text is None else f"100644 {next(blobs)}\t{path}\0"
            for path, text in files.items()
        )
        run(cwd, "read-tree", tree, env=env)
        run(cwd, "update-index", "-z", "--index-info", input=entries, env=env)
        return run(cwd, *DURABLE, "write-tree", env=env).output.strip()


def commit_tree(cwd: Path, tree: str, parent: str, message: str) -> str:
    return out(cwd, *DURABLE, "-c", "commit.gpgSign=false", "commit-tree", tree, "-p", parent, "-F", "-", input=message)


def message_of(cwd: Path, commit: str) -> str:
    """A commit's message as it was given to commit_tree (asked of the repository's `cat-file
    --batch`; of a process of its own when that cannot say)."""
    read = blobs.read(cwd, ["git", *NO_AUTO_GC, "cat-file", "--batch"], commit, b"commit")
    if isinstance(read, bytes):
        return read.partition(b"\n\n")[2].decode("utf-8", "replace")
    return run(cwd, "cat-file", "commit", commit).output.partition("\n\n")[2]


def is_ancestor(cwd: Path, ancestor: str, commit: str) -> bool:
    return run(cwd, "merge-base", "--is-ancestor", ancestor, commit, check=False).ok


def notes(cwd: Path, commits: list[str]) -> dict[str, str]:
    """The ralph notes of many commits, read by one git process whatever their number. The
    caller saw the notes ref (a listing of refs): one without it would only say it has none."""
    if not commits:
        return {}
    listing = run(cwd, "log", "--no-walk=unsorted", f"--notes={NOTES}", "--format=%H%x00%N%x1e", *commits).output
    found = {}
    for record in listing.split("\x1e"):
        commit, _, note = record.strip("\n").partition("\0")
        if note.strip():
            found[commit] = note.strip()
    return found


# --- what `ralph status`, `log` and `show` ask, in a few git processes ------------------------


def find_repo(path: Path) -> RepoInfo:
    """open_repo's answer from one `git rev-parse`, without GitPython (its import and the two
    `git version`s it starts cost a reading command more than all else it does). Anything but a
    work tree with a commit is open_repo's to say, in its words."""
    asked = ["--is-bare-repository", "--show-toplevel", "--git-common-dir", "HEAD", "--symbolic-full-name", "HEAD"]
    said = run(path, "rev-parse", *asked, check=False) if path.is_dir() else None
    lines = said.output.splitlines() if said is not None and said.ok else []
    if len(lines) != 5 or lines[0] != "false":
        return open_repo(path)
    branch = lines[4].removeprefix("refs/heads/") if lines[4].startswith("refs/heads/") else None
    return RepoInfo(Path(lines[1]), Path(path, lines[2]).resolve(), branch, lines[3])


def refs_under(cwd: Path, prefixes: list[str]) -> dict[str, str]:
    """Every ref under any of `prefixes` (or named by one), mapped to the object it points at:
    one `git for-each-ref`."""
    listing = out(cwd, "for-each-ref", "--format=%(refname) %(objectname)", *prefixes)
    return dict(line.split(" ", 1) for line in listing.splitlines() if line)


def blob_text(cwd: Path, name: str) -> str | None:
    """The text of the blob `name` (an object id, or `commit:path`), asked of the repository's one
    `git cat-file --batch` (blobs.py) as show_file's are; None where no blob is (no object, a folder,
    a submodule). When the reader cannot say, a process of its own reads it."""
    read = blobs.read(cwd, ["git", *NO_AUTO_GC, "cat-file", "--batch"], name)
    if isinstance(read, Exception):
        result = run(cwd, "cat-file", "blob", name, check=False)
        return result.output if result.ok else None
    return None if read is None else read.decode("utf-8", "replace")
