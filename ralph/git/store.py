"""Where ralph writes refs and notes: this repository, or first the git remote that keeps a run.

A `RefStore` is made once by whatever starts the work (the run, `ralph tell`, `ralph land`)
and handed on, so where a write goes is a value each caller is given, never a state of the
process. Every ref ralph writes in the user's repository is written here, by compare-and-swap,
but the remote's notes as fetched and merged into ours (git/remote.py's `sync`).
A Ctrl-C waits for a write: git killed mid-update leaves the ref's lock, and no one can move
the ref again until a person deletes the lock by hand.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ralph import git
from ralph.errors import RalphError
from ralph.git import layout
from ralph.git.remote import Remote
from ralph.isolation import proc

ZERO = "0" * 40  # as an old value: the ref must not exist yet

Changes = Mapping[str, tuple[str | None, str | None]]  # ref: (new, old); None: no such ref


@dataclass(frozen=True)
class RefStore:
    """Writes refs and notes in `top`, and those `remote` keeps there first."""

    top: Path  # the repository ralph works in
    remote: Remote | None = None  # `--remote`: keeps the run's refs and the notes, for every clone

    def swap(self, ref: str, new: str, old: str | None) -> bool:
        """Compare-and-swap `ref` from `old` (None: must not exist) to `new`; False if it lost."""
        return self.update({ref: (new, old)})

    def update(self, changes: Changes) -> bool:
        """Compare-and-swap each ref from its old value (None: must not exist; for a deletion:
        whatever it is) to its new one (None: deleted), all or none; False if any lost. A ref
        the remote keeps is swapped there first, and this repository's copy follows it."""
        remote = self._remote_for(changes)
        if remote is None:
            return self._transaction(changes, checked=True)
        if not remote.push(self.top, changes):
            remote.sync(self.top)  # another clone's write came first: what it wrote, here
            return False
        if not self._transaction(changes, checked=False):  # the swap won there: the copy follows by a fetch
            remote.sync(self.top)
        return True

    def delete(self, ref: str, old: str | None = None, *, check: bool = True) -> bool:
        """Delete `ref` (only while it points at `old`, when given); GitFailed, or for a ref the
        remote keeps RalphError, when it cannot be and `check`."""
        remote = self._remote_for([ref])
        if remote is not None and not remote.push(self.top, {ref: (None, old)}):
            remote.sync(self.top)
            if check:
                raise RalphError(f"{ref} on {remote.name} is no longer {old}: another worker moved it")
            return False
        with proc.signals_held():
            return git.run(self.top, "update-ref", "-d", ref, *([old] if old and not remote else []), check=check).ok

    def add_note(self, commit: str, text: str) -> None:
        """Notes of every run share one ref, which `git notes` moves without compare-and-swap: two
        writers at once (the slots of a parallel run, two runs) would lose a note. A lock of
        ralph's own in the git dir makes them take turns. With a remote, the notes go there too,
        merged with what other workers wrote."""
        lock_path = layout.notes_lock(git.common_dir(self.top))
        lock_path.parent.mkdir(exist_ok=True)
        with open(lock_path, "w") as lock, proc.signals_held():  # as a ref's update: never cut short
            fcntl.flock(lock, fcntl.LOCK_EX)
            git.run(self.top, *git.DURABLE, "notes", "--ref", layout.NOTES, "add", "-f", "-F", "-", commit, input=text)
            if self.remote is not None:
                self.remote.push_notes(self.top)

    def remove_note(self, commit: str) -> None:
        """This repository's note only (`ralph clean`)."""
        git.run(self.top, "notes", "--ref", layout.NOTES, "remove", "--ignore-missing", commit)

    def sync(self) -> None:
        """The remote's refs here (nothing to do without a remote)."""
        if self.remote is not None:
            self.remote.sync(self.top)

    def _transaction(self, changes: Changes, *, checked: bool) -> bool:
        """One `git update-ref --stdin`, all or none; unless `checked`, each ref is set whatever
        it held (this repository's copy of a remote's ref follows it)."""
        lines = "".join(
            f"delete {ref}{' ' + old if checked and old is not None else ''}\n"
            if new is None
            else f"update {ref} {new}{' ' + (old or ZERO) if checked else ''}\n"
            for ref, (new, old) in changes.items()
        )
        with proc.signals_held():
            return git.run(self.top, *git.DURABLE, "update-ref", "-m", "ralph", "--stdin", input=lines, check=False).ok

    def _remote_for(self, refs: Iterable[str]) -> Remote | None:
        """The remote, when it keeps these refs (all of them, or none: a mix would not be atomic)."""
        kept = [self.remote is not None and self.remote.holds(ref) for ref in refs]
        if self.remote is None or not any(kept):
            return None
        assert all(kept), "refs updated together are kept in one place"
        return self.remote
