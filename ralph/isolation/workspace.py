"""A run's workspace: the folder outside the repository where its laps work, reused lap after lap.

    <cache>/ralph/workspaces/<run>-<id>/
        tree/      the lap's files; tree/.git names git/
        git/       the lap's own git dir, made anew for every phase: HEAD detached at the lap's
                   start, the repository's tags, objects borrowed read-only from the repository
                   (alternates). The agent's commits, stash, branches, hooks and config land
                   here and die here.
        own.git/   ralph's git dir for its own commands on tree/: a config only ralph writes
        index      ralph's index of tree/ against the repository's object store
        scratch/   a fresh /tmp and HOME for each sandboxed phase

Only tree/, git/ and the scratch folders are writable inside the sandbox. ralph's own git
commands read tree/ as plain files into the repository's object store through own.git: no
system, global or repository config is read, so no filter, textconv or diff driver, fsmonitor,
hook or include exists for a lap's `.gitattributes` to name, and no command of ralph's enters a
submodule (whose git dir the lap writes): a submodule's commit is read from its HEAD as data.
Nothing a lap planted in its tree or its git dirs runs outside the sandbox, and the lap commit
holds exactly the files the checks then judge. The folder sits outside the repository, so no
configuration planted in a parent folder of the repository is found by a tool searching upward
from tree/.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ralph import git
from ralph.errors import RalphError
from ralph.isolation import proc
from ralph.isolation.files import BYTECODE, PATH_MAX, make_usable, remove_bytecode, remove_contents, remove_path, walk
from ralph.isolation.sandbox import Jail
from ralph.run import crashpoint

# ralph's own git on the lap's files reads this config and no other (GIT_CONFIG_NOSYSTEM, an
# empty global one, own.git's own). The stat data in its index is trusted only with ctime, which
# a lap cannot set back; no fsmonitor, sparse patterns or untracked cache (the user's, for their
# checkout); never into a submodule.
_OWN_CONFIG = """[core]
\trepositoryformatversion = {version}
\tbare = false
\tfilemode = true
\tfsmonitor = false
\ttrustctime = true
\tcheckStat = default
\tsparseCheckout = false
\tuntrackedCache = false
{excludes}[submodule]
\trecurse = false
[diff]
\tignoreSubmodules = all
[gc]
\tauto = 0
[maintenance]
\tauto = false
[user]
\tname = {name}
\temail = {email}
{extensions}{lfs}"""
# The one driver ralph's git runs: git-lfs's, as `git lfs install` defines it, when the user has
# it, on the repository's own LFS objects and no server (a lap's `.lfsconfig` gives git-lfs no
# command to run, it reads only a list of safe keys, and this config's lfs.url comes first).
_LFS = """[lfs]
\tstorage = {storage}
\turl = http://127.0.0.1:9/none
[filter "lfs"]
\tclean = git-lfs clean -- %f
\tsmudge = git-lfs smudge -- %f
\tprocess = git-lfs filter-process
\trequired = true
"""


def workspaces_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).resolve() / "ralph" / "workspaces"


def folder_for(common_dir: Path, run: str) -> Path:
    return workspaces_root() / f"{run}-{_repo_id(common_dir)}"


def hook_cache(common_dir: Path) -> Path:
    """pre-commit's cache for the hooks that judge this repository's laps: kept across runs so
    hook environments install once, and never the user's own, which code a lap's hook runs
    could otherwise plant a program in for the user's next commit. Written only by the hooks'
    try-out on a run's base commit, read-only to laps (ralph/verdict/commit_hooks.py); `-2`: the
    folders before it were the laps' to write, and a stub one left there is never run again."""
    return workspaces_root().parent / "pre-commit" / f"{_repo_id(common_dir)}-2"


def _repo_id(common_dir: Path) -> str:
    return hashlib.sha256(str(common_dir).encode()).hexdigest()[:12]


_UNLISTABLE = "could not open directory"  # git's warning for a folder it skips


class SetupFailed(RalphError):
    """A setup command failed: on the base commit the run cannot start; on a lap's, it is red."""

    def __init__(self, message: str, output: str):
        super().__init__(f"{message}; its output ends:\n{output.strip()}" if output.strip() else message)
        self.reason, self.output = message, output


class CopyFailed(RalphError):
    """The commit leaves no room for a file `copy` names (a file where its folder should be)."""


class WorkspaceTampered(RalphError):
    """A folder ralph made was replaced (by a symlink, say): ralph will not touch what it points at."""


@dataclass
class Workspace:
    common_dir: Path  # the user's repository: the object store ralph's commits go to
    root: Path
    identity: tuple[str, str]  # user.name, user.email for commits made inside the lap's git dir
    hooks_path: str  # the repository's hooks folder, as the lap's git dir should find it
    # ralph's index as its last checkout left it, kept in memory: what a lap does to the files
    # shows against it (every file the lap wrote has a new ctime), whatever the lap did to the
    # index file on disk.
    _checked_out: tuple[bytes, int] | None = None  # the bytes and the mtime (ns)
    # Untracked paths that are the user's (`copy`) or setup's (ignored or not): never staged,
    # never cleaned but by `empty`.
    copied: tuple[str, ...] = ()
    setup_made: tuple[str, ...] = ()
    # For `strict`: the untracked files setup made, each by its stat data; before the checks
    # every other untracked file is deleted.
    trusted: dict[str, tuple[int, ...]] = field(default_factory=dict)
    setup_at: str | None = None  # the commit setup last ran on; None: not since the tree was emptied
    setup_for_lap: bool = False  # ... before a lap's checks, and that lap has not become the green commit
    _made: dict[Path, tuple[int, int]] = field(default_factory=dict)  # folder → (device, inode)
    # The repository's tags as packed-refs lines: versions that setuptools-scm, hatch-vcs and
    # versioneer read with `git describe` in setup and checks.
    tags: str = ""
    # Code of a lap's may have run in tree/ since ralph last made it safe for its own git.
    unchecked: bool = True

    @property
    def kept(self) -> tuple[str, ...]:
        return (*self.copied, *self.setup_made)

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    @property
    def lap_git(self) -> Path:
        return self.root / "git"

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def own_git(self) -> Path:
        return self.root / "own.git"

    # --- lifetime ---------------------------------------------------------------------

    @classmethod
    def create(cls, top: Path, common_dir: Path, run: str) -> Workspace:
        """A new, empty workspace for `run` (whatever an earlier ralph left there is removed)."""
        root = folder_for(common_dir, run)
        remove_path(root)
        workspace = cls(common_dir, root, _identity(top), _hooks_path(top, common_dir))
        root.parent.mkdir(parents=True, exist_ok=True)
        for folder in (root, workspace.tree, workspace.lap_git, root / "scratch"):
            workspace._mkdir(folder)
        workspace._make_own_git(top)
        workspace.tags = "".join(f"{sha} {ref}\n" for ref, sha in sorted(git.refs(top, "refs/tags/").items()))
        return workspace

    def _make_own_git(self, top: Path) -> None:
        """own.git: the config above; the user's ignore rules (their excludes file, the
        repository's info/exclude) copied, since they decide what a commit of the user's holds."""
        own = self.own_git
        for folder in ("info", "refs", "objects"):
            (own / folder).mkdir(parents=True)
        (own / "HEAD").write_text("ref: refs/heads/none\n")
        exclude = self.common_dir / "info" / "exclude"
        if exclude.is_file():
            shutil.copyfile(exclude, own / "info" / "exclude")
        excludes = git.run(top, "config", "--path", "--get", "core.excludesFile", check=False).output.strip()
        object_format = git.run(top, "config", "--get", "extensions.objectFormat", check=False).output.strip()
        lfs = git.run(top, "config", "--get", "filter.lfs.process", check=False).output.startswith("git-lfs ")
        name, email = self.identity
        (own / "config").write_text(
            _OWN_CONFIG.format(
                version=1 if object_format else 0,
                excludes=f"\texcludesFile = {_quoted(excludes)}\n" if excludes else "",
                name=_quoted(name),
                email=_quoted(email),
                extensions=f"[extensions]\n\tobjectFormat = {_quoted(object_format)}\n" if object_format else "",
                lfs=_LFS.format(storage=_quoted(str(self.common_dir / "lfs"))) if lfs else "",
            )
        )

    def remove(self) -> None:
        remove_path(self.root)

    def _mkdir(self, folder: Path) -> None:
        folder.mkdir()
        info = os.lstat(folder)
        self._made[folder] = (info.st_dev, info.st_ino)

    def verify(self) -> None:
        """The folders ralph made are still those folders: not replaced by a link or another folder."""
        for folder, made in self._made.items():
            try:
                info = os.lstat(folder)
            except OSError:
                info = None
            if (
                info is None
                or not stat.S_ISDIR(info.st_mode)
                or (info.st_dev, info.st_ino) != made
                or folder.resolve() != folder
            ):
                raise WorkspaceTampered(
                    f"the lap replaced ralph's workspace folder {folder} — ralph stopped "
                    "without touching it; `ralph clean` removes the workspace"
                )

    # --- ralph's own git on the lap's files -------------------------------------------------

    def git(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float | None = 600
    ) -> proc.Completed:
        """ralph's own git on tree/: own.git's config and no other, objects into the repository's store."""
        self.verify()
        if self.unchecked:
            self._make_safe_for_git()
        env = proc.clean_env(
            extra={
                "GIT_INDEX_FILE": str(self.index),
                "GIT_OBJECT_DIRECTORY": str(self.common_dir / "objects"),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
            }
        )
        return git.run(
            self.tree,
            "--git-dir",
            str(self.own_git),
            "--work-tree",
            str(self.tree),
            *args,
            input=input,
            check=check,
            timeout=timeout,
            env=env,
        )

    def checkout(self, commit: str, bytecode: bool = True) -> list[str]:
        """Make tree/'s tracked files exactly what `commit` holds: every file that differs from
        the last checkout or that anything wrote since is written anew from its blob (so no
        encoding, ident or eol trick leaves bytes the commit does not hold); untracked files
        removed but ignored ones and `kept`, and, with `bytecode`, the bytecode Python could run
        in place of a source. Costs in proportion to what changed. Returns what was deleted."""
        self._index_as_checked_out()
        (self.own_git / "HEAD").write_text(commit + "\n")  # what `changed` compares the index with
        if not self.git("read-tree", "-u", "--reset", commit, check=False).ok:
            make_usable(self.tree)  # a folder a lap made read-only
            self.git("read-tree", "-u", "--reset", commit)
        self._checked_out = (self.index.read_bytes(), os.stat(self.index).st_mtime_ns)
        cleaned = self._git_usable("clean", "-ffd", *_excluded(self.kept)).output
        if bytecode:  # left after the clean (ignored, or setup's): it must not run in place of a source
            remove_bytecode(self.tree, self._untracked_listed("--", *BYTECODE))
        return [line.removeprefix("Removing ") for line in cleaned.splitlines() if line.startswith("Removing ")]

    def _untracked_listed(self, *args: str) -> list[str]:
        """`git ls-files -o ARGS`, names read back byte for byte (quoted by git, no UTF-8 needed)."""
        listing = self.git("-c", "core.quotePath=true", "ls-files", "-o", *args).output
        return [_unquoted(line) for line in listing.splitlines() if line]

    def has_hooks(self) -> bool:
        """Whether the hooks folder the lap's git dir uses holds any hook (not a `.sample`)."""
        folder = Path(self.hooks_path) if os.path.isabs(self.hooks_path) else self.tree / self.hooks_path
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return False
        except OSError:  # a folder it cannot read may hold hooks: the hook phase decides, as git would
            return True
        return any(not entry.name.endswith(".sample") and os.access(entry.path, os.X_OK) for entry in entries)

    def empty(self) -> None:
        """Every untracked file gone, ignored ones too: nothing setup or a lap made is trusted."""
        self._git_usable("clean", "-ffdxq")
        self.trusted, self.setup_at, self.setup_made = {}, None, ()

    def delete_the_laps_files(self) -> None:
        """Everything a lap can write here (tree/, git/, the phases' /tmp and HOME), which the
        next lap's checkout and setup make anew: on a disk it filled, git could not even write
        its index. Setup's files are then known to be gone: it runs again."""
        self.verify()  # its own folders, not links a lap put in their place
        for folder in (self.tree, self.lap_git, self.root / "scratch"):
            remove_contents(folder)
        self.trusted, self.setup_at, self.setup_made = {}, None, ()

    def _git_usable(self, *args: str) -> proc.Completed:
        """ralph's git on tree/, once more after making every folder usable if git could not list
        or change one (a lap's chmod would hide a file from staging and cleaning, or stop them)."""
        done = self.git(*args, check=False)
        if not done.ok or _UNLISTABLE in done.stderr:
            make_usable(self.tree)
            done = self.git(*args)
        return done

    def untracked(self) -> dict[str, tuple[int, ...]]:
        """Every file and folder in tree/ that the last checkout did not write (ignored, `kept`,
        a lap's), with the stat data that shows a file's change: ctime, which no lap can set
        back (a folder: what it is, not its times, which any file made in it changes)."""
        found: dict[str, tuple[int, ...]] = {}
        for entry in self._untracked_listed("--directory"):
            top = os.path.join(self.tree, entry.rstrip("/"))
            walked = walk(Path(top)) if entry.endswith("/") else [(os.path.dirname(top), [], [os.path.basename(top)])]
            if entry.endswith("/"):
                found[entry.rstrip("/")] = _identity_of(top, folder=True)
            for folder, folders, files in walked:
                for name in folders:
                    path = os.path.join(folder, name)
                    found[os.path.relpath(path, self.tree)] = _identity_of(path, folder=not os.path.islink(path))
                for name in files:
                    path = os.path.join(folder, name)
                    found[os.path.relpath(path, self.tree)] = _identity_of(path, folder=False)
        return found

    def remove_untrusted(self) -> tuple[list[str], list[str]]:
        """Delete the untracked files and folders setup did not make; returns them (a folder,
        not also what was in it), and those setup made that were changed or deleted since
        (which cannot be put back: the caller empties the tree and sets it up again), as names
        fit to show (bytes that are no UTF-8 replaced)."""
        now = {path: info for path, info in self.untracked().items() if not _under(path, self.copied)}
        untrusted = sorted(path for path in now if path not in self.trusted)
        for path in untrusted:
            remove_path(self.tree / path)
        changed = sorted(
            path for path, info in self.trusted.items() if now.get(path) != info and not _under(path, self.copied)
        )
        found = set(untrusted)
        tops = [path for path in untrusted if os.path.dirname(path) not in found]
        return [_shown(path) for path in tops], [_shown(path) for path in changed]

    def _index_as_checked_out(self) -> None:
        """Its mtime too: git trusts a file's stat data only when the file is older than the
        index (racy git), and a lap may write a file in the same clock tick as the checkout."""
        if self._checked_out is not None:
            data, mtime = self._checked_out
            remove_path(self.index)
            self.index.write_bytes(data)
            os.utime(self.index, ns=(mtime, mtime))

    def changed(self) -> bool:
        """Does tree/ differ from the commit last checked out (a file the tree's ignore rules do
        not ignore, added, changed or deleted)? Read by ralph's own index; nothing is staged."""
        self._index_as_checked_out()
        done = self.git("status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all", check=False)
        return not done.ok or bool(done.output.strip())

    def stage(self, parent: str, timeout: float) -> tuple[str, str | None]:
        """Every file in tree/ as a tree object; returns it and, when some files could not be
        staged, why (the tree is then `parent`'s: nothing of the lap is trusted, it is red)."""
        self._index_as_checked_out()
        self._make_safe_for_git()
        self._remove_what_its_own_rules_hide()
        submodules = self._submodule_heads()
        spared = [*self._unignored(self.kept), *submodules]
        excluded = [f":(exclude,literal){path}" for path in spared]
        staged = self.git(*git.DURABLE, "add", "-A", "--", ".", *excluded, timeout=timeout, check=False)
        crashpoint.reached("add")
        refusal = None
        if not staged.ok or _UNLISTABLE in staged.stderr:  # (git skips a folder it cannot list)
            refusal = (staged.stderr or staged.output).strip() or f"exit {staged.exit_code}"
            self.git("read-tree", parent)
        else:
            moved = "".join(f"160000 {head}\t{path}\n" for path, head in submodules.items() if head)
            self.git("update-index", "--index-info", input=moved)
        return self.git(*git.DURABLE, "write-tree").output.strip(), refusal

    def _submodule_heads(self) -> dict[str, str | None]:
        """The submodules checked out in tree/ (gitlinks of ralph's index with a folder there),
        each with the commit its HEAD names now (None: none can be read; the gitlink stays).

        `git add` would ask each submodule's own git whether it changed (`git status` there),
        which reads the submodule's git dir: the lap's to write (a clean filter, an fsmonitor
        command, an include there would run outside the sandbox). So ralph's `add` leaves
        submodules out and reads their HEAD itself, as data."""
        listing = self.git("ls-files", "-s", "-z").output
        found = {}
        for entry in listing.split("\0"):
            if entry.startswith("160000 "):
                path = entry.split("\t", 1)[1]
                if _is_folder(self.tree / path):
                    found[path] = _repository_head(self.tree / path, (self.tree, self.lap_git))
        return found

    def _make_safe_for_git(self) -> None:
        """What a lap's code may have left in tree/ that ralph's git must not meet, deleted:
        - a folder named `.git` below the top that is no repository: git never lists, stages or
          cleans what is in one, so a module there would reach the checks in no commit;
        - the `.git` of a repository (a submodule's, one the lap made) that leads outside tree/
          and git/, or through a file that is no regular one: git, reading its HEAD or refs,
          would wait on a FIFO for ever (the folder is then plain files to git, or, for a
          submodule, one not checked out: its gitlink stays);
        - a `.gitignore`, `.gitattributes` or `.gitmodules` that is no file (a FIFO), likewise;
        - whatever lies deeper than a path can name (PATH_MAX), which ralph cannot look into.
        A repository that stays is staged as a gitlink (the lap is red for one it made)."""
        self.unchecked = False
        top, within = str(self.tree), (self.tree, self.lap_git)
        for folder, folders, files in walk(self.tree):
            # What ralph cannot name it cannot look at (git, from the top, may reach it): gone.
            beyond = {name for name in (*folders, *files) if len(os.fsencode(os.path.join(folder, name))) >= PATH_MAX}
            for name in beyond:
                remove_path(Path(folder, name))
            folders[:] = [name for name in folders if name not in beyond]
            if folder != top and (".git" in folders or ".git" in files):
                found = Path(folder, ".git")
                layout = not found.is_dir() or all((found / name).exists() for name in ("HEAD", "objects", "refs"))
                if not layout or _repository_head(Path(folder), within) is None:
                    remove_path(found)
            for name in _GIT_READS.intersection(files):
                if not os.path.islink(os.path.join(folder, name)) and not os.path.isfile(os.path.join(folder, name)):
                    remove_path(Path(folder, name))
            folders[:] = [name for name in folders if name != ".git"]

    def _remove_what_its_own_rules_hide(self) -> None:
        """Delete what the lap's own ignore rules (a new .gitignore, a line added to one) hide and
        the checked-out commit's do not: a module its code imports, a venv or a build it made, a
        tool's cache that ignores itself (pytest's, mypy's). Such files would be in no commit, yet
        the checks would find them in the tree; the rules themselves are committed."""
        rules = self._lap_rules()
        if not rules:
            return
        seen_by_lap = set(self._untracked_listed("--exclude-standard"))
        aside = self.root / "rules-aside"
        remove_path(aside)
        aside.mkdir()
        for number, path in enumerate(rules):
            if os.path.lexists(self.tree / path):
                os.rename(self.tree / path, aside / str(number))
        tracked = [path for path in rules if self.git("ls-files", "--", f":(literal){path}").output]
        try:
            if tracked:
                self.git("--literal-pathspecs", "checkout", "-f", "--", *tracked)
            seen_by_commit = set(self._untracked_listed("--exclude-standard"))
        finally:
            for number, path in enumerate(rules):
                remove_path(self.tree / path)
                if os.path.lexists(aside / str(number)):
                    os.rename(aside / str(number), self.tree / path)
            remove_path(aside)
        for path in sorted(seen_by_commit - seen_by_lap):
            if not _under(path, self.kept):
                remove_path(self.tree / path)

    def _lap_rules(self) -> list[str]:
        """The `.gitignore` files the lap added, changed or deleted: plain files (or gone) in plain
        folders, none of setup's (a venv's own)."""
        added = self._untracked_listed("--", ":(glob)**/.gitignore")
        listing = self.git(
            "-c", "core.quotePath=true", "diff", "--name-only", "--ignore-submodules=all", "--", ":(glob)**/.gitignore"
        ).output
        changed = [_unquoted(line) for line in listing.splitlines() if line]
        return [path for path in dict.fromkeys([*added, *changed]) if not _under(path, self.kept) and self._plain(path)]

    def _plain(self, path: str) -> bool:
        """A regular file, or nothing, under folders none of which is a link (a lap's link to a
        folder elsewhere: ralph, unsandboxed, must not move files there)."""
        folder = self.tree
        for part in Path(path).parts[:-1]:
            folder = folder / part
            if not folder.is_dir() or folder.is_symlink():
                return False
        target = self.tree / path
        return not os.path.lexists(target) or (target.is_file() and not target.is_symlink())

    def _ignored(self, paths: list[str]) -> list[str]:
        """Those of `paths` the tree's ignore rules, as they are now, ignore."""
        if not paths:
            return []
        done = self.git("check-ignore", "-z", "--stdin", input="".join(f"{path}\0" for path in paths), check=False)
        if done.exit_code not in (0, 1):
            raise git.GitFailed(["check-ignore"], done)
        return [path for path in done.output.split("\0") if path]

    def _unignored(self, paths: tuple[str, ...]) -> list[str]:
        """Those of `paths` that the tree's ignore rules do not ignore: an ignored one named in
        `git add` fails it, an unignored one not excluded would be staged."""
        ignored = set(self._ignored(list(paths)))
        return [path for path in paths if path not in ignored]

    def commit_tree(self, tree: str, parent: str, message: str) -> str:
        return self.git(
            *git.DURABLE, "-c", "commit.gpgSign=false", "commit-tree", tree, "-p", parent, "-F", "-", input=message
        ).output.strip()

    # --- what the lap's tree holds beyond the commit -------------------------------------

    def copy_in(self, top: Path, paths: list[str]) -> None:
        """The user's untracked files named by `copy`, copied anew (whatever a lap did to them);
        never written through a link a lap left, nor outside tree/."""
        for path in paths:
            source, target = top / path, self.tree / path
            if not os.path.exists(source):
                raise RalphError(f"copy: {path} is not in your work tree ({top}) — create it or remove it from copy")
            if not _real_folders(self.tree, Path(path).parent):
                raise CopyFailed(f"copy: {path} cannot be copied in: a folder on its way is a file or a link")
            remove_path(target)
            if os.path.isdir(source):
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target)
        self.copied = tuple(paths)

    def needs_setup(self, commit: str, inputs: list[str], for_checks: bool) -> bool:
        """Whether setup must run for `commit`: never run in this tree; at a lap's start, last run
        for a lap that did not become this commit (a red lap's own environment); or a file it
        installs from differs from the commit it last ran on."""
        if self.setup_at is None:
            return True
        if self.setup_at == commit:
            self.setup_for_lap = self.setup_for_lap and for_checks  # at a lap's start: it is green's
            return False
        if self.setup_for_lap and not for_checks:
            return True
        specs = [_input_spec(pattern) for pattern in inputs]
        if not specs:
            return False
        return bool(self.git("diff", "--name-only", "--no-renames", self.setup_at, commit, "--", *specs).output.strip())

    def set_up(
        self,
        commands: list[str],
        commit: str,
        *,
        env: dict[str, str],
        timeout: float,
        log_dir: Path,
        jail: Jail | None,
        for_lap: bool = False,
        remember: bool = False,
    ) -> tuple[str, list[str]]:
        """Run the setup commands in tree/, in order (`for_lap`: on a lap's commit, before its
        checks); returns their output and the tracked files they changed. What they leave
        untracked is kept out of lap commits and cleans; with `remember`, it is all noted as
        setup's, by its stat data (strict). Raises SetupFailed."""
        self.setup_at = None
        spared = [f"--exclude={pattern}" for pattern in _patterns(self.copied)]
        before = set(self._untracked_listed("--directory", *spared))  # a lap's own: not setup's
        outputs = []
        for index, command in enumerate(commands, 1):
            log = log_dir / f"setup-{index}.log"
            done = proc.run(command, self.tree, env=env, timeout=timeout, spill=log, jail=jail)
            outputs.append(done.output)
            if not done.ok:
                why = f"timed out after {timeout:g}s" if done.timed_out else f"exit {done.exit_code}"
                raise SetupFailed(f"setup `{command}` failed ({why})", done.tail(2000))
        self.unchecked = True  # (the commands ran in a jail made before the listing above)
        made = [path.rstrip("/") for path in self._untracked_listed("--directory", *spared) if path not in before]
        self.setup_made = tuple(dict.fromkeys([*self.setup_made, *made]))
        self.setup_at, self.setup_for_lap = commit, for_lap
        if remember:
            self.trusted = self.untracked()
        # Written anew counts, even if the same bytes.
        rewrote = self.git("diff-files", "--name-only", "--ignore-submodules=all", "-z").output
        return "\n".join(outputs), [path for path in rewrote.split("\0") if path]

    def write_excludes(self) -> None:
        """The lap's git dir ignores the user's copied files and what setup made: no part of any
        commit, the agent's own included (nor seen by the hooks, which would judge a .env)."""
        patterns = [pattern for pattern in _patterns(self.kept) if "\n" not in pattern]  # no such line
        (self.lap_git / "info" / "exclude").write_text("".join(f"{pattern}\n" for pattern in patterns))

    # --- the lap's own git dir ----------------------------------------------------------

    def fresh_lap_git(self, head: str, keep_modules: bool = True) -> None:
        """Make git/ anew, HEAD detached at `head`, and point tree/.git at it.

        Called before every phase, so whatever one phase planted there (hooks, config,
        a rewritten .git file) never reaches the next, nor ralph. Submodules' repositories
        (modules/) stay unless `keep_modules` is False, as before `submodules` makes their
        checkouts anew: the lap's commit records their HEADs."""
        self.verify()
        lap_git = self.lap_git
        os.chmod(lap_git, stat.S_IRWXU)  # whatever mode the last phase left it in
        for entry in os.listdir(lap_git):
            if entry != "modules" or not keep_modules:
                remove_path(lap_git / entry)
        for folder in ("objects/info", "refs/heads", "refs/tags", "info"):
            (lap_git / folder).mkdir(parents=True)
        (lap_git / "HEAD").write_text(head + "\n")
        (lap_git / "objects/info/alternates").write_text(f"{self.common_dir / 'objects'}\n")
        (lap_git / "packed-refs").write_text(self.tags)
        (lap_git / "config").write_text(self._lap_config())
        self.write_excludes()
        shallow = self.common_dir / "shallow"
        if shallow.is_file():
            shutil.copyfile(shallow, lap_git / "shallow")
        if self.index.is_file():
            shutil.copy2(self.index, lap_git / "index")  # with its mtime, for git's racy check
        dot_git = self.tree / ".git"
        remove_path(dot_git)
        with open(os.open(dot_git, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "w") as out:
            out.write(f"gitdir: {lap_git}\n")

    def submodules(self, commit: str) -> dict[str, str]:
        """Empty the submodules' folders of `commit` for a fresh `git submodule update`, and point
        each at the repository's own copy of it where there is one (offline, objects shared).
        Returns {path: name}."""
        found = {}
        for path, name in git.submodule_paths(self.common_dir, commit).items():
            # .gitmodules is the lap's to write: only a path the commit holds as a gitlink, below
            # tree/ through real folders, is touched (an absolute one emptied the user's hooks).
            folder = self._gitlink_folder(commit, path)
            if folder is None:
                continue
            found[path] = name
            remove_path(folder)
            folder.mkdir(parents=True)
            mine = self.common_dir / "modules" / name
            if ".." not in Path(name).parts and (mine / "HEAD").is_file():
                with open(self.lap_git / "config", "a") as config:
                    config.write(f"[submodule {_quoted(name)}]\n\turl = {_quoted(str(mine))}\n")
        return found

    def _gitlink_folder(self, commit: str, path: str) -> Path | None:
        parts = Path(path).parts
        if not parts or Path(path).is_absolute() or ".." in parts:
            return None
        entry = git.run(
            self.tree, "--git-dir", str(self.common_dir), "ls-tree", "-z", commit, "--", path, check=False
        ).output
        if not entry.startswith("160000 commit ") or entry.rstrip("\0").split("\t", 1)[-1] != path:
            return None
        for depth in range(1, len(parts)):  # every folder on the way is a real one, no link
            try:
                if not stat.S_ISDIR(os.lstat(self.tree.joinpath(*parts[:depth])).st_mode):
                    return None
            except OSError:
                return None
        return self.tree / path

    def _lap_config(self) -> str:
        name, email = self.identity
        return (
            f"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
            f"\thooksPath = {_quoted(self.hooks_path)}\n"
            f"[user]\n\tname = {_quoted(name)}\n\temail = {_quoted(email)}\n"
            # No credential helper: a lap asks git for nobody's password.
            "[credential]\n\thelper =\n"
            "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n[commit]\n\tgpgSign = false\n"
        )

    def jail(
        self,
        phase: str,
        *,
        network: bool = True,
        writable: tuple[Path, ...] | list[Path] = (),
        home: Path | None = None,
        keep: tuple[Path, ...] = (),
        hide: tuple[Path, ...] = (),
    ) -> Jail:
        """A sandbox for one phase, with a /tmp and HOME no earlier phase has written to (unless
        `home` names a HOME of the user's choosing, which stays read-only but for `writable`)."""
        self.verify()
        self.unchecked = True
        scratch = self.root / "scratch" / phase
        remove_path(scratch)
        (scratch / "tmp").mkdir(parents=True)
        (scratch / "home").mkdir()
        (scratch / "blank").touch()
        private_home = () if home else (scratch / "home",)
        return Jail(
            (self.tree, self.lap_git, *private_home, *writable),
            scratch / "tmp",
            home or scratch / "home",
            network=network,
            chdir=self.tree,
            keep=keep,
            hide=hide,
            blank=scratch / "blank",
        )


def _patterns(paths: tuple[str, ...]) -> list[str]:
    """Exclude patterns for exactly these paths: anchored, every pattern character escaped."""
    return ["/" + "".join("\\" + char if char in "*?[]\\!# " else char for char in path) for path in paths]


def _excluded(paths: tuple[str, ...]) -> list[str]:
    """`git clean` options that spare these paths."""
    return [option for pattern in _patterns(paths) for option in ("-e", pattern)]


def _identity_of(path: str, folder: bool) -> tuple[int, ...]:
    try:
        info = os.lstat(path)
    except OSError:
        return ()
    if folder:
        return (info.st_mode, info.st_ino)
    return (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquoted(name: str) -> str:
    """A path as git prints it with core.quotePath (C-quoted, bytes as octal escapes), as the
    file system's name (undecodable bytes kept as Python keeps them: surrogate escapes)."""
    if not (len(name) > 1 and name.startswith('"') and name.endswith('"')):
        return name
    body, raw, index = name[1:-1], bytearray(), 0
    while index < len(body):
        if body[index] == "\\" and index + 1 < len(body):
            if body[index + 1] in "01234567":
                raw.append(int(body[index + 1 : index + 4], 8))
                index += 4
            else:
                raw.append(_ESCAPES.get(body[index + 1], ord(body[index + 1])))
                index += 2
        else:
            raw += body[index].encode()
            index += 1
    return os.fsdecode(bytes(raw))


def _input_spec(pattern: str) -> str:
    """A `setup_inputs` glob as a pathspec: `/x` and `a/x` from the top, `x` at any depth."""
    if pattern.startswith("/"):
        return f":(glob){pattern.lstrip('/')}"
    return f":(glob){pattern}" if "/" in pattern else f":(glob)**/{pattern}"


def _shown(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "replace")


_GIT_READS = frozenset({".gitignore", ".gitattributes", ".gitmodules"})  # files git opens in the work tree


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == folder or path.startswith(folder + "/") for folder in folders)


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def _repository_head(folder: Path, within: tuple[Path, ...]) -> str | None:
    """The commit `folder`'s repository has checked out, read from its files as git would (a
    `.git` file naming the git dir, HEAD, a symbolic ref through loose refs or packed-refs),
    executing nothing. None when that leads nowhere, outside `within`, or through a file git
    would open that is no regular file (on a FIFO git, and ralph, would wait for ever)."""
    dot_git = folder / ".git"
    if os.path.isdir(dot_git):
        git_dir = Path(os.path.realpath(dot_git))
    else:
        named = _regular_text(dot_git)
        if named is None or not named.startswith("gitdir:"):
            return None
        git_dir = Path(os.path.realpath(folder / named.removeprefix("gitdir:").strip()))
    if not any(git_dir == top or top in git_dir.parents for top in within) or os.path.lexists(git_dir / "commondir"):
        return None
    read = {name: _regular_text(git_dir / name) for name in ("HEAD", "config", "packed-refs")}
    if any(text is None and os.path.lexists(git_dir / name) for name, text in read.items()):
        return None
    value = (read["HEAD"] or "").strip()
    for _ in range(5):  # git follows symbolic refs as deep
        if _OBJECT_ID.fullmatch(value):
            return value
        ref = value.removeprefix("ref:").strip()
        if not ref.startswith("refs/") or ".." in ref.split("/"):
            return None
        if os.path.lexists(git_dir / ref):
            value = (_regular_text(git_dir / ref) or "").strip()
        else:
            lines = (read["packed-refs"] or "").splitlines()
            value = next((line.split(" ", 1)[0] for line in lines if line.endswith(" " + ref)), "")
    return None


def _regular_text(path: Path, most: int = 64 << 20) -> str | None:
    """A regular file's text (its first `most` bytes); None for anything else, or nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return file.read(most).decode(errors="replace")


def _real_folders(root: Path, relative: Path) -> bool:
    """Make the folders of `relative` below `root`; False if one on the way is a link or a file."""
    folder = root
    for part in relative.parts:
        folder = folder / part
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return False
        except FileNotFoundError:
            folder.mkdir()
    return True


def _identity(top: Path) -> tuple[str, str]:
    ident = git.out(top, "var", "GIT_COMMITTER_IDENT")
    name, _, rest = ident.partition(" <")
    return name, rest.partition(">")[0]


def _hooks_path(top: Path, common_dir: Path) -> str:
    """core.hooksPath as the user set it (a relative one is found in each lap's tree), else the
    repository's hooks folder."""
    configured = git.hooks_path(top)
    return os.path.expanduser(configured) if configured else str(common_dir / "hooks")


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
