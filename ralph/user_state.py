"""The user's side of the repository, which a lap's agent can reach through its linked worktree.

A linked worktree shares refs, config and hooks with the main repository, so an agent
that runs `git checkout main`, `git branch -D`, `git config` or writes a hook changes
the user's repository. ralph snapshots that state before the agent and, if anything
changed, puts it back (refs by compare-and-swap) and fails the lap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralph import git

# Namespaces that are ralph's own and change during a lap by design.
RALPH_REFS = ("refs/ralph/", "refs/heads/ralph/", git.NOTES_REF)


@dataclass(frozen=True)
class UserState:
    refs: dict[str, str]
    files: dict[str, bytes]  # relative to the common git dir


def snapshot(top: Path, common_dir: Path) -> UserState:
    refs = {ref: sha for ref, sha in git.refs(top, "refs/").items() if not ref.startswith(RALPH_REFS)}
    return UserState(refs, {name: path.read_bytes() for name, path in _watched_files(common_dir)})


def restore(top: Path, common_dir: Path, before: UserState) -> list[str]:
    """Put back whatever differs from `before`; returns what was changed, for the lap's reason."""
    after = snapshot(top, common_dir)
    changed = []
    for ref in sorted(before.refs.keys() | after.refs.keys()):
        old, new = before.refs.get(ref), after.refs.get(ref)
        if old == new:
            continue
        if old is None:
            git.run(top, "update-ref", "-d", ref, new)
            changed.append(f"{ref} created")
        else:
            git.update_ref(top, ref, old, new)
            changed.append(f"{ref} {'deleted' if new is None else 'moved'}")
    for name in sorted(before.files.keys() | after.files.keys()):
        old, new = before.files.get(name), after.files.get(name)
        if old == new:
            continue
        path = common_dir / name
        if old is None:
            path.unlink(missing_ok=True)
            changed.append(f"{name} added")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(old)
            changed.append(f"{name} {'deleted' if new is None else 'changed'}")
    return changed


def _watched_files(common_dir: Path):
    """HEAD and config, hooks/ and info/, the user's other worktrees' HEADs.

    Not the index: a user staging files in their checkout while a lap runs is normal,
    and an agent reaching the user's index could as well reach their files.
    """
    for name in ("HEAD", "config"):
        if (common_dir / name).is_file():
            yield name, common_dir / name
    for folder in ("hooks", "info"):
        for path in sorted((common_dir / folder).rglob("*")) if (common_dir / folder).is_dir() else ():
            if path.is_file():
                yield str(path.relative_to(common_dir)), path
    ours = common_dir / "ralph"
    for admin in sorted((common_dir / "worktrees").glob("*")) if (common_dir / "worktrees").is_dir() else ():
        try:
            linked_to = Path((admin / "gitdir").read_text().strip())
        except OSError:
            continue
        if ours not in linked_to.parents and (admin / "HEAD").is_file():
            yield str((admin / "HEAD").relative_to(common_dir)), admin / "HEAD"
