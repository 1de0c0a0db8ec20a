"""ralph's own git on a lap's files: own.git, whose config is the only one it reads, and
ralph's index of tree/ against the repository's object store.

No system, global or repository config is read, so no filter, textconv or diff driver,
fsmonitor, hook or include exists for a lap's `.gitattributes` to name, and no command of
ralph's enters a submodule (whose git dir the lap writes). What a lap's code may have left in
tree/ for git to trip on is made safe before each command (`before`): ralph/workspace/safe_tree.py.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ralph import git
from ralph.isolation import proc
from ralph.isolation.files import make_usable, remove_path
from ralph.isolation.git_syntax import quoted, unquoted

# ralph's own git on the lap's files reads this config and no other (GIT_CONFIG_NOSYSTEM, an
# empty global one, own.git's own). The stat data in its index is trusted only with ctime, which
# a lap cannot set back; no fsmonitor, sparse patterns or untracked cache (the user's, for their
# checkout); never into a submodule; no hook (own.git holds none), no reflog.
_CONFIG = """[core]
\trepositoryformatversion = {version}
\tbare = false
\tfilemode = true
\tfsmonitor = false
\ttrustctime = true
\tcheckStat = default
\tsparseCheckout = false
\tuntrackedCache = false
\tlogAllRefUpdates = false
\thooksPath = /dev/null
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
UNLISTABLE = "could not open directory"  # git's warning for a folder it skips
_GITLINK_MODE = (0o160000).to_bytes(4, "big")  # as an index entry stores it


SETTINGS = ("core.excludesfile", "extensions.objectformat", "filter.lfs.process")  # what own.git follows


def make_git_dir(own: Path, common_dir: Path, identity: tuple[str, str], settings: dict[str, str]) -> None:
    """own.git: the config above; the user's ignore rules (their excludes file, the
    repository's info/exclude) copied, since they decide what a commit of the user's holds.
    `settings`: the repository's values of SETTINGS (git.settings)."""
    for folder in ("info", "refs", "objects"):
        (own / folder).mkdir(parents=True)
    (own / "HEAD").write_text("ref: refs/heads/none\n")
    exclude = common_dir / "info" / "exclude"
    if exclude.is_file():
        shutil.copyfile(exclude, own / "info" / "exclude")
    excludes = os.path.expanduser(settings.get("core.excludesfile", "").strip())  # as git reads a path: ~ expanded
    object_format = settings.get("extensions.objectformat", "").strip()
    lfs = settings.get("filter.lfs.process", "").startswith("git-lfs ")
    name, email = identity
    (own / "config").write_text(
        _CONFIG.format(
            version=1 if object_format else 0,
            excludes=f"\texcludesFile = {quoted(excludes)}\n" if excludes else "",
            name=quoted(name),
            email=quoted(email),
            extensions=f"[extensions]\n\tobjectFormat = {quoted(object_format)}\n" if object_format else "",
            lfs=_LFS.format(storage=quoted(str(common_dir / "lfs"))) if lfs else "",
        )
    )


def exact_staging() -> bool:
    """Whether what ralph's `git add` stages from a tree without a `.gitattributes` is byte for
    byte what the tree holds: no attributes file of the user's or the system's that git reads
    all the same (own.git's config names no core.attributesFile and sets no core.autocrlf), so
    no eol, ident, encoding or filter converts a file's bytes."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    shared = [os.path.join(config, "git", "attributes")]
    shared += [f"{prefix}/etc/gitattributes" for prefix in ("", "/usr", "/usr/local")]
    return not any(os.path.lexists(path) for path in shared)


@dataclass
class OwnGit:
    """ralph's git on `tree`: `git_dir` (own.git) and no other config, `index` as its index,
    objects into `common_dir`'s store."""

    tree: Path
    git_dir: Path
    index: Path
    common_dir: Path
    before: Callable[[], None]  # before every command: ralph's folders verified, tree/ made safe for git
    # ralph's index as its last checkout left it, kept in memory: what a lap does to the files
    # shows against it (every file the lap wrote has a new ctime), whatever the lap did to the
    # index file on disk.
    checked_out: tuple[bytes, int] | None = None  # the bytes and the mtime (ns)

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float | None = 600
    ) -> proc.Completed:
        """ralph's own git on tree/: own.git's config and no other, objects into the repository's store."""
        self.before()
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
            str(self.git_dir),
            "--work-tree",
            str(self.tree),
            *args,
            input=input,
            check=check,
            timeout=timeout,
            env=env,
        )

    def read_tree(self, commit: str) -> None:
        """The index and tree/'s tracked files made `commit`'s, and remembered as checked out."""
        self.restore_index()
        before = (self.git_dir / "HEAD").read_text().strip()
        (self.git_dir / "HEAD").write_text(commit + "\n")  # what `changed` compares the index with
        if self._attributes_changed(before, commit):
            self.index.unlink(missing_ok=True)  # every file written anew, as the new attributes make it
        # `checkout -f` is `read-tree -u --reset` (one tree, every difference overwritten) after
        # git's threaded stat of every file (preload): a third less time at 20,000 files.
        checkout = ("checkout", "-q", "-f", "--detach", commit, "--")
        if not self.run(*checkout, check=False).ok:
            make_usable(self.tree)  # a folder a lap made read-only
            self.run(*checkout)
        self.checked_out = (self.index.read_bytes(), os.stat(self.index).st_mtime_ns)

    def took_staged(self, commit: str) -> None:
        """The index as ralph's `add` just left it, remembered as the checkout of `commit`, whose
        tree that index is: every file in tree/ already holds its blob's bytes (Workspace.stage
        says when), so no file needs writing anew."""
        (self.git_dir / "HEAD").write_text(commit + "\n")
        self.checked_out = (self.index.read_bytes(), os.stat(self.index).st_mtime_ns)

    def _attributes_changed(self, before: str, commit: str) -> bool:
        """Whether a `.gitattributes` differs between the tree checked out and `commit`. git
        rewrites only the files whose entry changed, so a file the new attributes would check
        out otherwise (`eol=crlf`, `working-tree-encoding`, `ident`) keeps its old bytes: the
        checks would judge what no checkout of the commit holds (issue 27's review)."""
        if before == commit or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", before):  # not one yet
            return False
        same = self.run("diff-tree", "--quiet", "-r", before, commit, "--", ":(glob)**/.gitattributes", check=False)
        return not same.ok

    def usable(self, *args: str) -> proc.Completed:
        """ralph's git on tree/, once more after making every folder usable if git could not list
        or change one (a lap's chmod would hide a file from staging and cleaning, or stop them)."""
        done = self.run(*args, check=False)
        if not done.ok or UNLISTABLE in done.stderr:
            make_usable(self.tree)
            done = self.run(*args)
        return done

    def untracked(self, *args: str) -> list[str]:
        """`git ls-files -o ARGS`, names read back byte for byte (quoted by git, no UTF-8 needed);
        every folder listed, as `usable` makes them (a folder git skips hides what is in it)."""
        listing = self.usable("-c", "core.quotePath=true", "ls-files", "-o", *args).output
        return [unquoted(line) for line in listing.splitlines() if line]

    def restore_index(self) -> None:
        """Its mtime too: git trusts a file's stat data only when the file is older than the
        index (racy git), and a lap may write a file in the same clock tick as the checkout."""
        if self.checked_out is not None:
            data, mtime = self.checked_out
            remove_path(self.index)
            self.index.write_bytes(data)
            os.utime(self.index, ns=(mtime, mtime))

    def changed(self) -> bool:
        """Does tree/ differ from the commit last checked out (a file the tree's ignore rules do
        not ignore, added, changed or deleted)? Read by ralph's own index; nothing is staged."""
        self.restore_index()
        done = self.run("status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all", check=False)
        return not done.ok or bool(done.output.strip())

    def ignored(self, paths: list[str]) -> list[str]:
        """Those of `paths` the tree's ignore rules, as they are now, ignore."""
        if not paths:
            return []
        done = self.run("check-ignore", "-z", "--stdin", input="".join(f"{path}\0" for path in paths), check=False)
        if done.exit_code not in (0, 1):
            raise git.GitFailed(["check-ignore"], done)
        return [path for path in done.output.split("\0") if path]

    def unignored(self, paths: tuple[str, ...]) -> list[str]:
        """Those of `paths` that the tree's ignore rules do not ignore: an ignored one named in
        `git add` fails it, an unignored one not excluded would be staged."""
        ignored = set(self.ignored(list(paths)))
        return [path for path in paths if path not in ignored]

    def gitlinks(self) -> list[str]:
        """The paths ralph's index holds as gitlinks (submodules), asked before staging, while its
        entries are the last checkout's. Every index entry stores its mode as 4 bytes, big-endian:
        an index without those of a gitlink's holds none (most repositories'), and needs no `ls-files`."""
        if self.checked_out is not None and _GITLINK_MODE not in self.checked_out[0]:
            return []
        listing = self.run("ls-files", "-s", "-z").output
        return [entry.split("\t", 1)[1] for entry in listing.split("\0") if entry.startswith("160000 ")]

    def commit_tree(self, tree: str, parent: str, message: str) -> str:
        return self.run(
            *git.DURABLE, "-c", "commit.gpgSign=false", "commit-tree", tree, "-p", parent, "-F", "-", input=message
        ).output.strip()
