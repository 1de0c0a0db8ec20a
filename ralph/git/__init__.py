"""The one door to git: small typed functions that take the directory to run in.

Every git command goes through `proc.run` with `proc.clean_env()`, so GIT_DIR and
friends from a calling hook cannot redirect it and the repository's hooks never see
secrets. GitPython is used only to find and describe a repository (it reads files;
no long-lived `Repo`, no `cat-file` processes left behind).
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ralph.errors import RalphError
from ralph.isolation import proc
from ralph.isolation.sandbox import Jail
from ralph.show.ui import one_line

NOTES_REF = "refs/notes/ralph"
ZERO = "0" * 40
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


def update_ref(cwd: Path, ref: str, new: str, old: str | None) -> bool:
    """Compare-and-swap `ref` from `old` (None: must not exist) to `new`; False if it lost."""
    return update_refs(cwd, {ref: (new, old)})


def update_refs(cwd: Path, changes: Mapping[str, tuple[str | None, str | None]]) -> bool:
    """Compare-and-swap each ref from its old value (None: must not exist; for a deletion:
    whatever it is) to its new one (None: deleted), all or none; False if any lost. A ref
    kept on a remote (`kept_on`) is swapped there first. A Ctrl-C waits for it: git killed
    mid-update leaves the ref's lock, and no one can move the ref again until a person
    deletes the lock by hand."""
    remote = _remote_for(changes)
    if remote is not None and not remote.push(cwd, changes):
        remote.sync(cwd)  # another clone's write came first: what it wrote, here
        return False
    # This repository's copy of a remote's ref follows it, whatever it held.
    lines = "".join(
        f"delete {ref}{'' if remote or old is None else ' ' + old}\n"
        if new is None
        else f"update {ref} {new}{'' if remote else ' ' + (old or ZERO)}\n"
        for ref, (new, old) in changes.items()
    )
    with proc.signals_held():
        copied = run(cwd, *DURABLE, "update-ref", "-m", "ralph", "--stdin", input=lines, check=False).ok
    if remote is not None and not copied:  # the swap won there: this clone's copy follows by a fetch
        remote.sync(cwd)
        return True
    return copied


def delete_ref(cwd: Path, ref: str, old: str | None = None, check: bool = True) -> bool:
    """Delete `ref` (only while it points at `old`, when given); a Ctrl-C waits for it too."""
    remote = _remote_for([ref])
    if remote is not None and not remote.push(cwd, {ref: (None, old)}):
        remote.sync(cwd)
        if check:
            raise RalphError(f"{ref} on {remote.name} is no longer {old}: another worker moved it")
        return False
    with proc.signals_held():
        return run(cwd, "update-ref", "-d", ref, *([old] if old and not remote else []), check=check).ok


def refs(cwd: Path, prefix: str) -> dict[str, str]:
    """Every ref under `prefix`, mapped to the object it points at."""
    listing = out(cwd, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in listing.splitlines() if line)


def write_blob(cwd: Path, text: str) -> str:
    return out(cwd, *DURABLE, "hash-object", "-w", "--stdin", input=text)


def read_blob(cwd: Path, sha: str) -> str:
    return out(cwd, "cat-file", "blob", sha)


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
    result = run(cwd, "cat-file", "blob", f"{commit}:{path}", check=False, env=env)
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


def is_dirty(cwd: Path) -> bool:
    # --no-optional-locks: a plain status may rewrite the user's index to refresh it.
    return bool(out(cwd, "--no-optional-locks", "status", "--porcelain", "--untracked-files=normal"))


# --- work trees ------------------------------------------------------------------------


class SubmodulesFailed(RalphError):
    """`git submodule update` failed: the environment's fault at the start, the lap's afterwards."""


def init_submodules(worktree: Path, timeout: float, env: dict[str, str], jail: Jail | None) -> None:
    """A fresh checkout has empty submodule folders; fill them as a fresh clone would.

    protocol.file.allow: submodules given as local paths (common in monorepos and tests)
    are refused by git >= 2.38.1 otherwise; they are the user's own repositories.
    """
    result = run(
        worktree,
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


def changes_beyond_whitespace(cwd: Path, old: str, new: str, leaving_out: list[str]) -> bool:
    """Whether anything but whitespace and blank lines changed, outside `leaving_out`."""
    result = run(
        cwd,
        "diff",
        "--quiet",
        "--no-renames",
        "-w",
        "--ignore-blank-lines",
        old,
        new,
        "--",
        ".",
        *(f":(exclude,literal){path}" for path in leaving_out),
        check=False,
    )
    if result.exit_code not in (0, 1):
        raise GitFailed(["diff", "--quiet", old, new], result)
    return result.exit_code == 1


def hooks_path(cwd: Path) -> str | None:
    """core.hooksPath as the user set it (None: the repository's hooks folder)."""
    configured = run(cwd, "config", "--get", "core.hooksPath", check=False).output.strip()
    return configured or None


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


def merge_trees(cwd: Path, onto: str, commit: str) -> tuple[str | None, list[str]]:
    """`commit` replayed onto `onto` as a tree (a three-way merge with their merge base, as a
    cherry-pick does, without a work tree); None and the conflicting paths when they conflict."""
    merged = run(cwd, "merge-tree", "--write-tree", "--name-only", "--no-messages", onto, commit, check=False)
    lines = merged.output.splitlines()
    if merged.exit_code == 0:
        return lines[0], []
    if merged.exit_code == 1:
        return None, sorted({line for line in lines[1:] if line})
    raise GitFailed(["merge-tree", onto, commit], merged)


def with_files(cwd: Path, tree: str, files: Mapping[str, str | None]) -> str:
    """`tree` with these paths holding these texts (as regular files; None: no such file),
    through an index of its own."""
    with tempfile.TemporaryDirectory(prefix="ralph-index-") as folder:
        env = proc.clean_env(extra={"GIT_INDEX_FILE": str(Path(folder) / "index")})
        run(cwd, "read-tree", tree, env=env)
        for path, text in files.items():
            if text is None:
                run(cwd, "update-index", "--force-remove", "--", path, env=env)
                continue
            blob = write_blob(cwd, text)
            run(cwd, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        return run(cwd, *DURABLE, "write-tree", env=env).output.strip()


def commit_tree(cwd: Path, tree: str, parent: str, message: str) -> str:
    return out(cwd, *DURABLE, "-c", "commit.gpgSign=false", "commit-tree", tree, "-p", parent, "-F", "-", input=message)


def is_ancestor(cwd: Path, ancestor: str, commit: str) -> bool:
    return run(cwd, "merge-base", "--is-ancestor", ancestor, commit, check=False).ok


def add_note(cwd: Path, commit: str, text: str) -> None:
    """Notes of every run share one ref, which `git notes` moves without compare-and-swap: two
    writers at once (the slots of a parallel run, two runs) would lose a note. A lock of
    ralph's own in the git dir makes them take turns. When the notes are kept on a remote,
    they go there too, merged with what other workers wrote."""
    folder = Path(cwd, out(cwd, "rev-parse", "--git-common-dir"), "ralph")
    folder.mkdir(exist_ok=True)
    with open(folder / "notes.lock", "w") as lock, proc.signals_held():  # as update_ref: never cut short
        fcntl.flock(lock, fcntl.LOCK_EX)
        run(cwd, *DURABLE, "notes", "--ref", NOTES_REF, "add", "-f", "-F", "-", commit, input=text)
        if _remote is not None:
            _remote.push_notes(cwd)


def notes(cwd: Path, commits: list[str]) -> dict[str, str]:
    """The ralph notes of many commits, read by one git process whatever their number."""
    if not commits or not rev(cwd, NOTES_REF):
        return {}
    listing = run(cwd, "log", "--no-walk=unsorted", f"--notes={NOTES_REF}", "--format=%H%x00%N%x1e", *commits).output
    found = {}
    for record in listing.split("\x1e"):
        commit, _, note = record.strip("\n").partition("\0")
        if note.strip():
            found[commit] = note.strip()
    return found


def remove_note(cwd: Path, commit: str) -> None:
    run(cwd, "notes", "--ref", NOTES_REF, "remove", "--ignore-missing", commit)


def credential_files(cwd: Path) -> tuple[Path, ...]:
    """Where git finds credentials for this repository's remotes: the config files that set a
    helper, an askpass program, an http header (actions/checkout's token) or a URL with a user
    in it (a token as the user, or a password: `url.<with-token>.insteadOf` and a proxy's
    included), the file or socket a `store` or `cache` helper names, the files `http.cookieFile`,
    `http.sslKey`, `http.sslCert` and `core.sshCommand -i` name, and the usual places (~/.git-credentials,
    ~/.ssh, the cache helper's socket, the GitHub CLI's). Every config file of the repository
    counts, not only those git reads here: its submodules' (which actions/checkout gives the
    token too) and its worktrees' (`config.worktree`)."""
    keys = (
        r"^(credential\..*|core\.askpass|core\.sshcommand|http\..*(extraheader|cookiefile|sslkey|sslcert|proxy)"
        r"|remote\..*\.(push)?url|remote\..*\.proxy|url\..*\.(push)?insteadof)$"
    )
    listing = run(cwd, "config", "--show-origin", "--get-regexp", keys, check=False).output
    common = Path(cwd, out(cwd, "rev-parse", "--git-common-dir"))
    for config in _config_files(common):
        reading = ("config", "--file", str(config), "--includes", "--show-origin", "--get-regexp", keys)
        listing += run(cwd, *reading, check=False).output
    found: set[Path] = set()
    for line in listing.splitlines():
        origin, _, setting = line.partition("\t")
        key, _, value = setting.partition(" ")
        if ("url" in key or "proxy" in key) and not re.search(r"://[^/@\s]+@", setting):  # no user in it
            continue
        if key.endswith(("cookiefile", "sslkey", "sslcert", "sshcommand")):  # it names the secret: a file
            named = re.search(r"-i\s*(\S+)", value) if key == "core.sshcommand" else None
            if named or key != "core.sshcommand":
                found.add(Path(cwd, os.path.expanduser(named[1] if named else value)))
            continue
        if origin.startswith("file:"):
            found.add(Path(cwd, origin.removeprefix("file:")))
        named = re.search(r"--(?:file|socket)[= ]?(\S+)", value) if key.startswith("credential.") else None
        if named:  # a `store` helper's file, a `cache` helper's socket
            found.add(Path(cwd, os.path.expanduser(named[1])))
    home = Path.home()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache")
    found |= {home / ".git-credentials", home / ".ssh", config / "git" / "credentials", config / "gh"}
    found |= {cache / "git" / "credential", home / ".git-credential-cache"}  # the cache helper's socket
    return tuple(sorted({Path(os.path.abspath(path)) for path in found}))


def _config_files(git_dir: Path) -> list[Path]:
    """The config files of a git dir, its worktrees' and its submodules' (modules/<name>, a name
    may hold slashes; a submodule's own submodules are in its modules/), at any depth."""
    found = [git_dir / "config", git_dir / "config.worktree", *git_dir.glob("worktrees/*/config.worktree")]
    folders = [git_dir / "modules"]
    while folders:
        folder = folders.pop()
        for entry in folder.iterdir() if folder.is_dir() and not folder.is_symlink() else ():
            if entry.is_symlink():  # git makes none here; one could lead back up, for ever
                continue
            if (entry / "HEAD").is_file():
                found += _config_files(entry)
            elif entry.is_dir():
                folders.append(entry)
    return [path for path in found if path.is_file()]


# --- refs kept on a remote (`ralph run --remote`) -----------------------------------------

NETWORK_TIMEOUT = 300  # seconds for one fetch or push
FETCHED_NOTES = "refs/ralph-remote/notes"  # the remote's notes as last fetched, to merge with ours
NOTES_RETRIES = 20  # pushes of the notes another worker's push beat
PUSH_TRIES = 4  # a push rejected while the remote's refs are as it expected: a lock race, or a refusal


@dataclass(frozen=True)
class Remote:
    """A git remote that holds refs for many clones (the workers of a run): a write to one of
    them is a compare-and-swap there first (`push --atomic --force-with-lease`), then copied
    here; `sync` brings the remote's values here. The notes go there merged, never replaced."""

    name: str
    kept: tuple[str, ...]  # refs, and folders of refs (ending in /), kept on the remote
    local: tuple[str, ...] = ()  # refs in those folders that are this clone's own

    def holds(self, ref: str) -> bool:
        if ref in self.local:
            return False
        return any(ref == kept or (kept.endswith("/") and ref.startswith(kept)) for kept in self.kept)

    def push(self, cwd: Path, changes: Mapping[str, tuple[str | None, str | None]]) -> bool:
        """Each ref from old (None: none, or for a deletion: whatever it is) to new (None:
        deleted) on the remote, all or none; False when another clone's write came first.
        The host's words for a lost race vary (`stale info`, `cannot lock ref`, `atomic
        transaction failed`): a rejected push is a lost race when a ref is no longer what it
        expected, and a refusal (a hook, a protected branch) when it stays rejected."""
        args = ["push", "--porcelain", "--atomic", "--no-verify", "--recurse-submodules=no", self.name]
        for ref, (new, old) in changes.items():
            if new is not None or old is not None:
                args.append(f"--force-with-lease={ref}:{old or ''}")
            args.append(f"{new or ''}:{ref}")
        for attempt in range(PUSH_TRIES):
            pushed = run(cwd, *args, check=False, timeout=NETWORK_TIMEOUT)
            if pushed.ok:
                return True
            if not any(line.startswith("!") for line in pushed.output.splitlines()):
                break  # not rejected: the remote could not be reached, or the push not made
            if self._moved(cwd, changes):
                return False
            time.sleep(0.1 * (attempt + 1))  # two pushes can both fail on each other's lock: again
        raise RalphError(f"cannot push to the remote {self.name}: {one_line(pushed.stderr or pushed.output, 400)}")

    def _moved(self, cwd: Path, changes: Mapping[str, tuple[str | None, str | None]]) -> bool:
        listing = run(cwd, "ls-remote", self.name, *changes, check=False, timeout=NETWORK_TIMEOUT)
        now = {ref: sha for sha, _, ref in (line.partition("\t") for line in listing.output.splitlines())}
        return any(now.get(ref) != old for ref, (new, old) in changes.items() if new is not None or old is not None)

    def sync(self, cwd: Path) -> None:
        """This clone's copies of the kept refs made the remote's (those it lacks deleted), and
        the remote's notes merged into ours (a note both wrote: ours)."""
        wanted = [f"+{ref}*:{ref}*" if ref.endswith("/") else f"+{ref}:{ref}" for ref in self.kept]
        wanted += [f"^{ref}" for ref in self.local] + [f"+{NOTES_REF}:{FETCHED_NOTES}"]
        while True:
            fetched = run(
                cwd, "fetch", "--prune", "--no-tags", "--no-write-fetch-head", "--recurse-submodules=no",
                "--quiet", self.name, *wanted, check=False, timeout=NETWORK_TIMEOUT,
            )  # fmt: skip
            said = fetched.stderr
            missing = [spec for spec in wanted if f"couldn't find remote ref {spec[1:].split(':')[0]}" in said]
            if fetched.ok or not missing:
                break
            wanted = [spec for spec in wanted if spec not in missing]  # a run not started yet; no notes yet
        if not fetched.ok:
            raise RalphError(f"cannot fetch from the remote {self.name}: {one_line(fetched.stderr, 400)}")
        if rev(cwd, FETCHED_NOTES) and not is_ancestor(cwd, FETCHED_NOTES, NOTES_REF):
            run(cwd, "notes", "--ref", NOTES_REF, "merge", "--quiet", "--strategy=ours", FETCHED_NOTES)

    def push_notes(self, cwd: Path) -> None:
        """Our notes onto the remote's, as a fast-forward of what we last fetched and merged."""
        for _ in range(NOTES_RETRIES):
            ours = out(cwd, "rev-parse", NOTES_REF)
            if self.push(cwd, {NOTES_REF: (ours, rev(cwd, FETCHED_NOTES))}):
                run(cwd, "update-ref", FETCHED_NOTES, ours)
                return
            self.sync(cwd)  # theirs merged into ours: again
        raise RalphError(f"could not push the notes to {self.name}: other workers' pushes kept coming first")


_remote: Remote | None = None


@contextmanager
def kept_on(remote: Remote) -> Iterator[None]:
    """Meanwhile, the refs `remote` keeps are written there first, and notes go there too."""
    global _remote
    _remote = remote
    try:
        yield
    finally:
        _remote = None


def _remote_for(refs: Iterable[str]) -> Remote | None:
    """The remote that keeps these refs (all of them, or none: a mix would not be atomic)."""
    kept = [_remote is not None and _remote.holds(ref) for ref in refs]
    if _remote is None or not any(kept):
        return None
    assert all(kept), "refs updated together are kept in one place"
    return _remote
