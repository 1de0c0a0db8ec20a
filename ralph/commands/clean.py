"""`ralph clean`: a run's workspace away, and with --refs everything of the run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ralph import git
from ralph.commands import plan
from ralph.errors import Exit, RalphError
from ralph.git import layout
from ralph.git.layout import RunRefs
from ralph.git.store import RefStore
from ralph.isolation.files import empty_trash, remove_path
from ralph.records import ledger
from ralph.records.ledger import RunState
from ralph.show import ui
from ralph.workspace import user_state
from ralph.workspace.places import folder_for, released, trash


def clean(cwd: Path, run: str | None, *, refs: bool) -> Exit:
    repo = git.open_repo(cwd)
    if plan.reclaim(repo.common_dir):
        ui.say("removed the workspace a killed `ralph plan` left")
        if run is None and not ledger.run_names(repo.top):
            return Exit.DONE
    state = ledger.resolve(repo.top, run)
    run_dir = layout.run_dir(repo.common_dir, state.name)
    where = git.worktree_branches(repo.top).get(RunRefs(state.name).branch)
    if refs and where is not None:
        raise RalphError(f"ralph/{state.name} is checked out in {where} — switch to another branch first")
    with ledger.run_lock(run_dir, state.name):
        return _clean_locked(repo, state, run_dir, refs=refs)


def _clean_locked(repo: git.RepoInfo, state: RunState, run_dir: Path, *, refs: bool) -> Exit:
    # The run's workspace, and the one its issue was planned in (run/start.py) if a kill left it.
    # And those ended runs of the repository released for the next (a cache: the next run makes one anew).
    workspaces = [folder_for(repo.common_dir, name) for name in (state.name, f"{state.name}.plan")]
    workspaces += released(repo.common_dir)
    removed = sum(os.path.lexists(workspace) for workspace in workspaces)
    for workspace in workspaces:
        remove_path(workspace)
    empty_trash(trash())
    # A snapshot a killed unsandboxed lap left: stale once the run is cleaned, never to be
    # applied to a later run of the same name.
    remove_path(user_state.saved_at(repo.common_dir, state.name))
    if refs:
        _delete_refs(repo, state)
        shutil.rmtree(run_dir, ignore_errors=True)
    ui.say(
        f"cleaned run [bold]{state.name}[/]: {removed} workspace(s) removed"
        + ("; refs, branch, notes and logs deleted" if refs else "")
    )
    return Exit.DONE


def _delete_refs(repo: git.RepoInfo, state: RunState) -> None:
    """The run's notes, its refs and its branch: this clone's (a remote's stay there)."""
    store, names = RefStore(repo.top), RunRefs(state.name)
    for lap in state.laps:
        store.remove_note(lap.commit)
    for ref in git.refs(repo.top, names.all):
        store.delete(ref)
    if git.rev(repo.top, names.branch):
        store.delete(names.branch)
