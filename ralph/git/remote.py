"""A git remote that keeps a run's refs (`ralph run --remote`): the workers of the run, clones
on any machines, share nothing but it. store.RefStore decides which writes go there."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ralph import git
from ralph.errors import RalphError
from ralph.git.layout import FETCHED_NOTES, NOTES, RunRefs
from ralph.show.ui import one_line

NETWORK_TIMEOUT = 300  # seconds for one fetch or push
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

    @classmethod
    def keeping(cls, name: str, runs: list[str]) -> Remote:
        """The remote `name`, keeping these runs' refs and branches (but `ralph land`'s marks:
        each clone's own)."""
        kept = tuple(ref for run in runs for ref in (RunRefs(run).all, RunRefs(run).branch))
        return cls(name, kept, local=tuple(RunRefs(run).landed for run in runs))

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
            pushed = git.run(cwd, *args, check=False, timeout=NETWORK_TIMEOUT)
            if pushed.ok:
                return True
            if not any(line.startswith("!") for line in pushed.output.splitlines()):
                break  # not rejected: the remote could not be reached, or the push not made
            if self._moved(cwd, changes):
                return False
            time.sleep(0.1 * (attempt + 1))  # two pushes can both fail on each other's lock: again
        raise RalphError(f"cannot push to the remote {self.name}: {one_line(pushed.stderr or pushed.output, 400)}")

    def _moved(self, cwd: Path, changes: Mapping[str, tuple[str | None, str | None]]) -> bool:
        listing = git.run(cwd, "ls-remote", self.name, *changes, check=False, timeout=NETWORK_TIMEOUT)
        now = {ref: sha for sha, _, ref in (line.partition("\t") for line in listing.output.splitlines())}
        return any(now.get(ref) != old for ref, (new, old) in changes.items() if new is not None or old is not None)

    def sync(self, cwd: Path) -> None:
        """This clone's copies of the kept refs made the remote's (those it lacks deleted), and
        the remote's notes merged into ours (a note both wrote: ours)."""
        wanted = [f"+{ref}*:{ref}*" if ref.endswith("/") else f"+{ref}:{ref}" for ref in self.kept]
        wanted += [f"^{ref}" for ref in self.local] + [f"+{NOTES}:{FETCHED_NOTES}"]
        while True:
            fetched = git.run(
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
        if git.rev(cwd, FETCHED_NOTES) and not git.is_ancestor(cwd, FETCHED_NOTES, NOTES):
            git.run(cwd, "notes", "--ref", NOTES, "merge", "--quiet", "--strategy=ours", FETCHED_NOTES)

    def push_notes(self, cwd: Path) -> None:
        """Our notes onto the remote's, as a fast-forward of what we last fetched and merged."""
        for _ in range(NOTES_RETRIES):
            ours = git.out(cwd, "rev-parse", NOTES)
            if self.push(cwd, {NOTES: (ours, git.rev(cwd, FETCHED_NOTES))}):
                git.run(cwd, "update-ref", FETCHED_NOTES, ours)
                return
            self.sync(cwd)  # theirs merged into ours: again
        raise RalphError(f"could not push the notes to {self.name}: other workers' pushes kept coming first")


def check_remote(cwd: Path, name: str) -> None:
    """A clear error unless `name` is one of the repository's remotes."""
    if not git.run(cwd, "remote", "get-url", name, check=False).ok:
        known = ", ".join(git.out(cwd, "remote").split()) or "none"
        raise RalphError(f"no git remote named {name!r} (remotes: {known}) — add it with `git remote add`")
