"""The repository's shared state, which the code a lap runs can reach through its linked worktree.

A linked worktree shares refs, config and hooks with the main repository, so an agent
(or a check or hook running code the agent wrote) that runs `git checkout main`,
`git branch -D`, `git config`, writes a hook, or moves ralph's own refs and notes,
changes the repository. ralph snapshots that state before the agent and after the
checks puts back anything that changed (refs by compare-and-swap), failing the lap.
Nothing ralph itself does in that window writes a ref: the lap worktree's HEAD is
detached and lives in the worktree's own admin folder.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from ralph import git


@dataclass(frozen=True)
class UserState:
    refs: dict[str, str]  # every ref, ralph's own included
    files: dict[str, bytes]  # relative to the common git dir

    def save(self, path: Path) -> None:
        """Kept on disk while a lap runs, so a resume after kill -9 can still put things back."""
        files = {name: base64.b64encode(data).decode() for name, data in self.files.items()}
        path.write_text(json.dumps({"refs": self.refs, "files": files}))

    @classmethod
    def load(cls, path: Path) -> UserState | None:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls(data["refs"], {name: base64.b64decode(text) for name, text in data["files"].items()})


def snapshot(top: Path, common_dir: Path) -> UserState:
    return UserState(git.refs(top, "refs/"), {name: path.read_bytes() for name, path in _watched_files(common_dir)})


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
