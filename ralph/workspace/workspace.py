"""A run's workspace: the folder outside the repository where its laps work, reused lap after lap.

    <cache>/ralph/workspaces/<run>-<id>/
        tree/      the lap's files; tree/.git names git/
        git/       the lap's own git dir, made anew for every phase (lap_git_dir.py)
        own.git/   ralph's git dir for its own commands on tree/: a config only ralph writes
        index      ralph's index of tree/ against the repository's object store (own_git.py)
        scratch/   a fresh /tmp and HOME for each sandboxed phase
        kept       once released: the commit tree/ holds and the sha256 of index

At a run's end the workspace is released (moved to workspaces/idle/<id>/, the newest KEEP_IDLE
kept), and the next run of the repository takes it over: its tracked files are then what the
last checkout wrote, known by the index that `kept` vouches for, so the first checkout writes
only what differs; its untracked files are all deleted, and setup runs again.

Only tree/, git/ and the scratch folders are writable inside the sandbox. ralph's own git reads
tree/ as plain files, after making it safe to (safe_tree.py), into the repository's object
store; what a lap's own ignore rules would hide from its commit is deleted (lap_rules.py), and
what the user's `copy` and setup put in the tree is in no commit (provision.py). Nothing a lap planted in
its tree or its git dirs runs outside the sandbox, and the lap commit holds exactly the files
the checks then judge. The folder sits outside the repository, so no configuration planted in
a parent folder of the repository is found by a tool searching upward from tree/.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ralph import git
from ralph.errors import RalphError
from ralph.isolation import crashpoint, proc, sandbox
from ralph.isolation.files import BYTECODE, remove_bytecode, remove_contents, remove_path, use_trash
from ralph.isolation.git_syntax import excluded, patterns
from ralph.isolation.jail import Jail
from ralph.workspace import lap_git_dir, reuse
from ralph.workspace.lap_rules import remove_what_its_own_rules_hide
from ralph.workspace.own_git import SETTINGS, UNLISTABLE, OwnGit, exact_staging, make_git_dir
from ralph.workspace.places import folder_for, trash
from ralph.workspace.provision import Provision, SetupFailed
from ralph.workspace.safe_tree import GitReads, Walked, make_safe_for_git, submodule_heads


class WorkspaceTampered(RalphError):
    """A folder ralph made was replaced (by a symlink, say): ralph will not touch what it points at."""


@dataclass
class Workspace:
    """One run's workspace: the one object a lap's phases ask for its files, its git dirs and
    its sandbox. Its parts keep their own modules: `own`, ralph's git on tree/; `provision`,
    what the tree holds beyond the commit."""

    common_dir: Path  # the user's repository: the object store ralph's commits go to
    root: Path
    identity: tuple[str, str]  # user.name, user.email for commits made inside the lap's git dir
    hooks_path: str  # the repository's hooks folder, as the lap's git dir should find it
    folders: dict[Path, tuple[int, int]] = field(default_factory=dict)  # the folders it made → (device, inode)
    # The repository's tags as packed-refs lines: versions that setuptools-scm, hatch-vcs and
    # versioneer read with `git describe` in setup and checks.
    tags: str = ""
    # Code of a lap's may have run in tree/ since ralph last made it safe for its own git.
    unchecked: bool = True
    stale_after_staging: bool = False  # the checks check the commit out anew (a ralph.api caller's agent)
    checked_out_at: str = ""  # the commit an adopted workspace's tree last held (_adopt)
    # The tree the last `stage` made, while tree/ holds exactly its blobs' bytes (exact_staging),
    # and the commits ralph made of trees: a lap's checks then need no checkout (`checkout`).
    staged: str | None = None
    commits: dict[str, str] = field(default_factory=dict)
    walked: Walked = field(init=False)  # tree/'s folders as the last safety walk left them
    own: OwnGit = field(init=False)  # ralph's own git on tree/
    provision: Provision = field(init=False)  # the untracked files that are the user's or setup's

    def __post_init__(self) -> None:
        self.own = OwnGit(self.tree, self.root / "own.git", self.index, self.common_dir, before=self._before_git)
        self.provision, self.walked = Provision(self.own), Walked(self.tree)

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    @property
    def lap_git(self) -> Path:
        return self.root / "git"

    @property
    def index(self) -> Path:
        return self.root / "index"

    # --- lifetime ---------------------------------------------------------------------

    @classmethod
    def create(cls, top: Path, common_dir: Path, run: str) -> Workspace:
        """The workspace for `run`: the one an earlier run of this repository released (or this
        run's own, a killed process's), its tracked files as that run last checked them out, so
        the first checkout writes only what differs; else a new, empty one."""
        root = folder_for(common_dir, run)
        use_trash(trash())
        settings = git.settings(top, "core.hookspath", *SETTINGS)
        workspace = cls(common_dir, root, _identity(top), _hooks_path(settings.get("core.hookspath"), common_dir))
        if not (reuse.claim(root, common_dir) and workspace._adopt()):
            remove_path(root)
            root.parent.mkdir(parents=True, exist_ok=True)
            for folder in (root, workspace.tree, workspace.lap_git, root / "scratch"):
                workspace._mkdir(folder)
        remove_path(workspace.own.git_dir)
        make_git_dir(workspace.own.git_dir, common_dir, workspace.identity, settings)
        if workspace.own.checked_out is not None:
            (workspace.own.git_dir / "HEAD").write_text(workspace.checked_out_at + "\n")
            workspace.empty()  # what the last run left untracked (ignored too): nothing of it trusted
        workspace.tags = "".join(f"{sha} {ref}\n" for ref, sha in sorted(git.refs(top, "refs/tags/").items()))
        return workspace

    def _adopt(self) -> bool:
        """Take over the workspace a run released at `root`: its folders, each still a real
        folder, and its index, as the release vouched for it (reuse.vouched)."""
        for folder in (self.root, self.tree, self.lap_git, self.root / "scratch"):
            try:
                info = os.lstat(folder)
            except OSError:
                return False
            if not stat.S_ISDIR(info.st_mode) or folder.resolve() != folder:
                return False
            self.folders[folder] = (info.st_dev, info.st_ino)
        found = reuse.vouched(self.root, self.index)
        if found is None:
            return False
        self.checked_out_at, data, mtime = found
        self.own.checked_out = (data, mtime)
        return True

    def release(self) -> None:
        """At a run's end: kept for the next run of this repository, not deleted on the user's
        time (reuse.keep); its index, as the last checkout left it, vouched for."""
        checked_out, head = self.own.checked_out, ""
        try:
            self.verify()
            head = (self.own.git_dir / "HEAD").read_text().strip()
        except (RalphError, OSError):  # (WorkspaceTampered: not one to keep)
            checked_out = None
        if checked_out is not None:
            self.own.restore_index()
            if reuse.keep(self.root, self.common_dir, head, checked_out[0]):
                return
        self.remove()

    def never_stage(self, patterns: tuple[str, ...]) -> None:
        """Paths (globs from the tree's top) no lap commit holds: the reports the checks write
        into the tree, which an agent that ran the checks itself leaves behind, and the files an
        agent CLI keeps there for itself (Config.never_committed). Ignore rules of
        ralph's own git, not pathspecs: git refuses an exclude pathspec inside an ignored folder."""
        lines = [f"/{pattern}\n" for pattern in patterns if "\n" not in pattern]
        with (self.own.git_dir / "info" / "exclude").open("a", encoding="utf-8") as exclude:
            exclude.write("\n" + "".join(lines))

    def remove(self) -> None:
        remove_path(self.root)

    def _mkdir(self, folder: Path) -> None:
        folder.mkdir()
        info = os.lstat(folder)
        self.folders[folder] = (info.st_dev, info.st_ino)

    def verify(self) -> None:
        """The folders ralph made are still those folders: not replaced by a link or another folder.
        (A folder in one already seen to be itself, and not a link, is itself too: not resolved.)"""
        seen: set[Path] = set()
        for folder, made in self.folders.items():  # (as made: the root first)
            try:
                info: os.stat_result | None = os.lstat(folder)
            except OSError:
                info = None
            mine = info is not None and stat.S_ISDIR(info.st_mode) and (info.st_dev, info.st_ino) == made
            if not mine or (folder.parent not in seen and folder.resolve() != folder):
                raise WorkspaceTampered(
                    f"the lap replaced ralph's workspace folder {folder} — ralph stopped "
                    "without touching it; `ralph clean` removes the workspace"
                )
            seen.add(folder)

    # --- ralph's own git on the lap's files -------------------------------------------------

    def _before_git(self) -> None:
        """Before each command of ralph's git: its folders its own, tree/ walked if a lap's code may have run since."""
        self.verify()
        if self.unchecked:
            self._make_safe_for_git()

    def _make_safe_for_git(self) -> GitReads:
        """Returns what of git's rules files is in the tree (safe_tree.make_safe_for_git)."""
        self.unchecked = False
        return make_safe_for_git(self.tree, self.lap_git, self.walked)

    def checkout(self, commit: str, *, bytecode: bool = True, clean: bool = True) -> list[str]:
        """Make tree/'s tracked files exactly what `commit` holds: every file that differs from
        the last checkout or that anything wrote since is written anew from its blob (so no
        encoding, ident or eol trick leaves bytes the commit does not hold); with `clean`,
        untracked files removed but ignored ones and `kept`, and, with `bytecode`, the bytecode
        Python could run in place of a source (without: the caller's `remove_untrusted` does
        both, from one listing). Costs in proportion to what changed. Returns what was deleted.

        The commit ralph just made of the files as staged, no code of a lap's run since, and
        nothing that converts a file's bytes (exact_staging): the tree already holds it, file for
        file, and ralph's index says so; git is not asked to look at every file again."""
        staged, self.staged = self.staged, None
        exact = not (self.unchecked or self.stale_after_staging)
        if staged is not None and staged == self.commits.get(commit) and exact:
            self.own.took_staged(commit)
        else:
            self.own.read_tree(commit)
        if not clean:
            return []
        cleaned = self.own.usable("clean", "-ffd", *excluded(self.provision.kept)).output
        if bytecode:  # left after the clean (ignored, or setup's): it must not run in place of a source
            remove_bytecode(self.tree, self.own.untracked("--", *BYTECODE), made=self._untracked_path)
        return [line.removeprefix("Removing ") for line in cleaned.splitlines() if line.startswith("Removing ")]

    def _untracked_path(self, path: str) -> bool:
        """Whether `path` (a file, or a folder: anything in it) is untracked in tree/ (a folder
        git has no file of is listed as itself, not file by file: node_modules is big)."""
        return bool(self.own.untracked("--directory", "--", f":(literal){path}"))

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
        self.own.usable("clean", "-ffdxq")
        self.provision.forget()

    def delete_the_laps_files(self) -> None:
        """Everything a lap can write here (tree/, git/, the phases' /tmp and HOME), which the
        next lap's checkout and setup make anew: on a disk it filled, git could not even write
        its index. Setup's files are then known to be gone: it runs again."""
        self.verify()  # its own folders, not links a lap put in their place
        for folder in (self.tree, self.lap_git, self.root / "scratch"):
            remove_contents(folder)
        self.provision.forget()

    def changed(self) -> bool:
        self.unchecked = True  # asked while the agent's phase goes on: its code ran since any walk
        return self.own.changed()

    def stage(self, parent: str, timeout: float) -> tuple[str, str | None]:
        """Every file in tree/ as a tree object; returns it and, when some files could not be
        staged, why (the tree is then `parent`'s: nothing of the lap is trusted, it is red)."""
        own = self.own
        own.restore_index()
        self.staged = None
        reads = self._make_safe_for_git()
        remove_what_its_own_rules_hide(own, self.root / "rules-aside", self.provision.kept, reads.ignores)
        submodules = submodule_heads(self.tree, self.lap_git, own.gitlinks())
        spared = [*own.unignored(self.provision.kept), *submodules]
        left_out = [f":(exclude,literal){path}" for path in spared]
        staged = own.run(*git.DURABLE, "add", "-A", "--", ".", *left_out, timeout=timeout, check=False)
        crashpoint.reached("add")
        refusal = None
        if not staged.ok or UNLISTABLE in staged.stderr:  # (git skips a folder it cannot list)
            refusal = (staged.stderr or staged.output).strip() or f"exit {staged.exit_code}"
            own.run("read-tree", parent)
        elif moved := "".join(f"160000 {head}\t{path}\n" for path, head in submodules.items() if head):
            own.run("update-index", "--index-info", input=moved)
        tree = own.run(*git.DURABLE, "write-tree").output.strip()
        self.staged = tree if refusal is None and not reads.attributes and exact_staging() else None
        return tree, refusal

    def commit_tree(self, tree: str, parent: str, message: str) -> str:
        sha = self.own.commit_tree(tree, parent, message)
        self.commits[sha] = tree
        return sha

    # --- what the lap's tree holds beyond the commit -------------------------------------

    def copy_in(self, top: Path, paths: list[str]) -> None:
        self.provision.copy_in(top, paths)

    def needs_setup(self, commit: str, inputs: list[str], *, for_checks: bool) -> bool:
        return self.provision.needs_setup(commit, inputs, for_checks=for_checks)

    def remove_untrusted(self, *, bytecode: bool = False) -> tuple[list[str], list[str]]:
        return self.provision.remove_untrusted(bytecode=bytecode)

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
        provision = self.provision
        provision.setup_at = None  # until it has run to its end
        spared = [f"--exclude={pattern}" for pattern in patterns(provision.copied)]
        before = set(self.own.untracked("--directory", *spared))  # a lap's own: not setup's
        outputs = []
        for index, command in enumerate(commands, 1):
            log = log_dir / f"setup-{index}.log"
            done = proc.run(command, self.tree, env=env, timeout=timeout, spill=log, jail=jail)
            outputs.append(done.output)
            if not done.ok:
                why = f"timed out after {timeout:g}s" if done.timed_out else f"exit {done.exit_code}"
                hidden = sandbox.missing_inside(command, env, jail) if jail is not None and not done.timed_out else None
                raise SetupFailed(f"setup `{command}` failed ({hidden or why})", done.tail(2000))
        self.unchecked = True  # (the commands ran in a jail made before the listing above)
        made = [path.rstrip("/") for path in self.own.untracked("--directory", *spared) if path not in before]
        provision.setup_ran(commit, made, for_lap=for_lap, remember=remember)
        # Written anew counts, even if the same bytes.
        rewrote = self.own.run("diff-files", "--name-only", "--ignore-submodules=all", "-z").output
        return "\n".join(outputs), [path for path in rewrote.split("\0") if path]

    def write_excludes(self) -> None:
        """The lap's git dir ignores the user's copied files and what setup made: no part of any
        commit, the agent's own included (nor seen by the hooks, which would judge a .env)."""
        self.verify()
        lap_git_dir.write_excludes(self.lap_git, patterns(self.provision.kept))

    # --- the lap's own git dir ----------------------------------------------------------

    def fresh_lap_git(self, head: str, *, keep_modules: bool = True) -> None:
        """Make git/ anew, HEAD detached at `head`, and point tree/.git at it.

        Called before every phase, so whatever one phase planted there (hooks, config,
        a rewritten .git file) never reaches the next, nor ralph. Submodules' repositories
        (modules/) stay unless `keep_modules` is False, as before `submodules` makes their
        checkouts anew: the lap's commit records their HEADs."""
        self.verify()
        lap_git_dir.make(
            self.lap_git,
            self.tree,
            head,
            common_dir=self.common_dir,
            tags=self.tags,
            config=lap_git_dir.config(self.identity, self.hooks_path),
            index=self.index,
            keep_modules=keep_modules,
        )
        self.write_excludes()

    def submodules(self, commit: str) -> dict[str, str]:
        """Empty the submodules' folders of `commit` for a fresh `git submodule update`, and point
        each at the repository's own copy of it where there is one (offline, objects shared).
        Returns {path: name}."""
        return lap_git_dir.submodules(self.lap_git, self.tree, self.common_dir, commit)

    def jail(
        self,
        phase: str,
        *,
        network: bool = True,
        writable: tuple[Path, ...] | list[Path] = (),
        home: Path | None = None,
        keep: tuple[Path, ...] = (),
        hide: tuple[Path, ...] = (),
        sockets: tuple[Path, ...] = (),
    ) -> Jail:
        """A sandbox for one phase (sandbox.phase_jail) in the work tree, the lap's git dir writable,
        with a /tmp and HOME no earlier phase has written to. `sockets`: those laps may connect to."""
        self.verify()
        self.unchecked = True
        return sandbox.phase_jail(
            self.root / "scratch" / phase,
            self.tree,
            writable=(self.tree, self.lap_git, *writable),
            home=home,
            network=network,
            keep=keep,
            hide=hide,
            sockets=sockets,
        )


def _identity(top: Path) -> tuple[str, str]:
    ident = git.out(top, "var", "GIT_COMMITTER_IDENT")
    name, _, rest = ident.partition(" <")
    return name, rest.partition(">")[0]


def _hooks_path(configured: str | None, common_dir: Path) -> str:
    """core.hooksPath as the user set it (a relative one is found in each lap's tree), else the
    repository's hooks folder."""
    configured = (configured or "").strip()
    return os.path.expanduser(configured) if configured else str(common_dir / "hooks")
