"""`ralph land`: the green line onto the user's current branch, the one command that touches it,
and everything it refuses so that landing never runs or overwrites what the user did not review;
`ralph land --pr`: the green line pushed and opened as a pull request instead (ralph/git/github.py)."""

from __future__ import annotations

import os
from pathlib import Path

from ralph import git
from ralph.errors import Exit, RalphError
from ralph.git import github
from ralph.git.layout import RunRefs
from ralph.git.remote import check_remote
from ralph.git.store import RefStore
from ralph.isolation import proc
from ralph.records import ledger
from ralph.records.ledger import RunState
from ralph.run.summary import green_laps, pull_request_body, what_is_left
from ralph.show import ui
from ralph.verdict import hook_code


def land(cwd: Path, run: str | None, how: str, *, partial: bool = False) -> Exit:
    """Bring the green line onto the user's current branch: the one command that touches it."""
    repo = git.open_repo(cwd)
    state = ledger.resolve(repo.top, run)
    _refuse_what_is_not_ready(repo, state, partial=partial)
    landed = git.rev(repo.top, RunRefs(state.name).landed)
    since = _since(repo, state, how, landed)
    _refuse_unsafe_landing(repo, state)
    # The commit checked above, not the branch's name: a `ralph run` going on may move the branch.
    _replay(repo.top, _steps(repo.top, state, how, since), head=repo.head)
    RefStore(repo.top).swap(RunRefs(state.name).landed, state.green, landed)  # this clone's own mark
    ui.say(f"landed run [bold]{state.name}[/] ({how}) onto {ui.safe(repo.branch)}")
    return Exit.DONE


def _refuse_what_is_not_ready(repo: git.RepoInfo, state: RunState, *, partial: bool) -> None:
    """No branch to land on, a dirty work tree, nothing green yet, or a run not done."""
    if repo.branch is None:
        raise RalphError("HEAD is detached — check out the branch to land on")
    if git.is_dirty(repo.top):
        raise RalphError("the work tree has uncommitted changes — commit or stash them before landing")
    if state.green == state.record.base:
        raise RalphError(f"run {state.name!r} has no green lap yet: nothing to land")
    if not state.is_done and not partial:
        left = "; ".join(what_is_left(repo.top, state)) or "the judge has not passed its last green lap"
        raise RalphError(
            f"run {state.name!r} is not done: {left} — land its green laps so far with --partial "
            "(`ralph status` says more)"
        )


def _since(repo: git.RepoInfo, state: RunState, how: str, landed: str | None) -> str:
    """Where this land starts: the base, or what an earlier (partial) land brought, when the
    branch holds exactly that; either way the landed tree is one the checks ran on."""
    if landed and _tree(repo.top, repo.head) == _tree(repo.top, landed):
        if landed == state.green:
            raise RalphError(f"every green lap of run {state.name!r} is landed already")
        return landed
    if how != "rebase" and not git.is_ancestor(repo.top, repo.head, state.green):
        raise RalphError(
            f"{repo.branch} has commits the run never saw (it started from {state.record.base[:10]}): "
            f"a {how} would make a tree no check ran on — replay the laps onto it with --rebase "
            "and run your checks, or land on a branch at the run's base"
        )
    return state.record.base


def _steps(top: Path, state: RunState, how: str, since: str) -> list[list[str]]:
    """The git commands that land the green laps since `since`, as `how` says."""
    branch = state.green
    if how == "merge":
        return [["merge", "--no-ff", "-m", f"Merge ralph run {state.name}", branch]]
    if how == "rebase":
        return [["cherry-pick", "--allow-empty", f"{since}..{branch}"]]
    message = _squash_message(top, state, since)
    if since == state.record.base:
        return [["merge", "--squash", branch], ["commit", "-m", message]]
    # the laps since the last land, as one commit
    return [["cherry-pick", "--no-commit", f"{since}..{branch}"], ["commit", "-m", message]]


def _replay(top: Path, steps: list[list[str]], head: str) -> None:
    """Run `steps`; on a failure put the branch, index and files back as they were at `head`
    (the tree was clean before landing)."""
    for args in steps:
        # The user's own action on their own branch: their ssh-agent may sign the commit.
        result = git.run(top, *args, check=False, hooks=True, env=proc.clean_env(allow=("SSH_AUTH_SOCK",)))
        if not result.ok:
            if args[0] == "cherry-pick":
                git.run(top, "cherry-pick", "--abort", check=False)
            git.run(top, "reset", "-q", "--hard", head, check=False)
            raise RalphError(f"landing stopped and was undone: git {args[0]} failed: {result.tail(500).strip()}")


def _tree(top: Path, commit: str) -> str:
    return git.out(top, "rev-parse", f"{commit}^{{tree}}")


def _refuse_unsafe_landing(repo: git.RepoInfo, state: RunState) -> None:
    """What git would do silently: overwrite an ignored file, or land changes to the hooks that
    then run on the user's commits (core.hooksPath inside the work tree, as husky sets it)."""
    since = git.out(repo.top, "merge-base", repo.head, state.green)
    landing = [path for path, (status, _) in git.changes(repo.top, since, state.green).items() if status != "D"]
    # A file of the user's where a landed file goes, or where a landed folder goes (git deletes
    # an ignored file in a folder's way without asking).
    folders = {str(parent) for path in landing for parent in Path(path).parents if str(parent) != "."}
    in_the_way = [
        path
        for path in [*landing, *sorted(folders)]
        if os.path.lexists(repo.top / path)
        and (path not in folders or (repo.top / path).is_symlink() or not (repo.top / path).is_dir())
    ]
    tracked = set(git.out(repo.top, "ls-files", "--", *in_the_way).splitlines()) if in_the_way else set()
    clobbered = [path for path in in_the_way if path not in tracked]
    if clobbered:
        raise RalphError(
            f"landing would overwrite files git does not track here: {', '.join(clobbered[:5])} — move them away first"
        )
    hooks = git.hooks_path(repo.top)
    inside = _inside(repo.top, Path(os.path.expanduser(hooks))) if hooks else None
    touched = [
        path
        for path in landing
        if inside is not None and (inside == "." or path == inside or path.startswith(inside + "/"))
    ]
    if touched:
        raise RalphError(
            f"the run changed your git hooks ({', '.join(touched[:5])} in core.hooksPath {hooks}) — "
            f"review them, then merge ralph/{state.name} by hand"
        )
    _refuse_running_the_runs_code(repo, state, since)
    _refuse_choosing_your_drivers(repo, state, since, landing)


# Config keys naming a command git runs on a file its attributes choose (git-lfs's own are safe).
_DRIVERS = r"^(filter\.[^.]+\.(clean|smudge|process)|diff\.[^.]+\.(textconv|command)|merge\.[^.]+\.driver)$"


def _refuse_choosing_your_drivers(repo: git.RepoInfo, state: RunState, since: str, landing: list[str]) -> None:
    """A `.gitattributes` the run changed chooses which of the drivers the user's git config
    defines (a filter, a textconv, a merge driver) git runs on which files, as the user, from
    this checkout on: one whose command is a script of the tree then runs the run's code."""
    attributes = [path for path in landing if Path(path).name == ".gitattributes"]
    if not attributes:
        return
    listing = git.run(repo.top, "config", "--get-regexp", _DRIVERS, check=False).output
    drivers = [line.split(" ", 1)[0] for line in listing.splitlines() if not line.startswith("filter.lfs.")]
    if drivers:
        raise RalphError(
            f"the run changed {attributes[0]}, which chooses the files your git config's {drivers[0]} runs on, "
            f"as you — review it (git diff {since[:10]} ralph/{state.name} -- {attributes[0]}), "
            f"then merge ralph/{state.name} by hand"
        )


def _refuse_running_the_runs_code(repo: git.RepoInfo, state: RunState, since: str) -> None:
    """Landing commits through the user's hooks, as the user, outside any sandbox (their
    ssh-agent too): not when those hooks would run a file the run changed (ralph/verdict/hook_code.py)."""
    changed = list(git.changes(repo.top, since, state.green))
    run_by = hook_code.touched(changed, hook_code.what_hooks_run(repo.top, repo.common_dir, state.green))
    if run_by:
        path, runs = run_by[0]
        what = f"{runs.hook} {runs.why} (the run changed {path})" if runs.why else f"{path}, which {runs.hook}"
        raise RalphError(
            f"your git hooks would run what the run changed, as you, outside any sandbox: {what} — review it "
            f"(git diff {since[:10]} ralph/{state.name} -- {path}), then merge ralph/{state.name} by hand"
        )


def _inside(top: Path, path: Path) -> str | None:
    """`path` (relative ones are relative to the work tree) relative to `top`, None when outside."""
    full = (top / path).resolve()
    return str(full.relative_to(top.resolve())) if full == top.resolve() or top.resolve() in full.parents else None


def _squash_message(top: Path, state: RunState, since: str) -> str:
    """The goal, then each green lap landed with its subject (the items it ticked)."""
    laps = "\n".join(f"- lap {number}: {subject}" for number, _, subject in green_laps(top, since, state.green))
    goal = " ".join(state.record.config.goal.split())
    subject = goal if len(goal) <= 64 else goal[:63].rstrip() + "…"
    done = "" if state.is_done else " (partial: the run is not done)"
    return f"ralph: {subject}\n\nThe green laps of run {state.name}{done}:\n{laps}\n\nRalph-Run: {state.name}\n"


# --- ralph land --pr ----------------------------------------------------------------------


def land_pr(cwd: Path, run: str | None, *, partial: bool, draft: bool, remote: str) -> Exit:
    """Push the green line to `remote` as the branch ralph/<run> and open a pull request of it
    into the branch the run started from (a draft for a run not done), or say the one open."""
    repo = git.open_repo(cwd)
    state = ledger.resolve(repo.top, run)
    into = _refuse_what_no_pull_request_takes(repo, state, partial=partial or draft, remote=remote)
    head = RunRefs(state.name).branch.removeprefix("refs/heads/")
    # gh asked first: a gh missing or logged out is found before anything leaves this machine.
    try:
        pushed = github.head_of(repo.top, remote, head)  # a fork's branch, when the remote is a fork
        already = github.open_pr(repo.top, pushed)
    except github.GhFailed as failed:
        raise RalphError(f"{failed} (nothing was pushed)") from None
    # The commit checked, not the branch's name: a `ralph run` going on may move the branch.
    github.push(repo.top, remote, state.green, head)
    ui.say(f"pushed {head} ({state.green[:10]}) to {ui.safe(remote)}")
    if already is not None:
        ui.say(f"pull request already open, now at the pushed commit: {ui.safe(already.url)}")
        return Exit.DONE
    try:
        url = github.create_pr(
            repo.top,
            base=into,
            head=pushed,
            title=_pull_request_title(state),
            body=pull_request_body(repo.top, state),
            draft=draft or not state.is_done,
        )
    except github.GhFailed as failed:
        raise RalphError(f"{failed} ({head} was pushed to {remote}; `ralph land --pr` again opens it)") from None
    ui.say(f"opened {'a draft ' if draft or not state.is_done else ''}pull request: {ui.safe(url)}")
    return Exit.DONE


def _refuse_what_no_pull_request_takes(repo: git.RepoInfo, state: RunState, *, partial: bool, remote: str) -> str:
    """As `ralph land` refuses: nothing green, or not done without --partial or --draft; and
    a run with no branch to go into, or no such remote. The branch the pull request goes into."""
    if state.green == state.record.base:
        raise RalphError(f"run {state.name!r} has no green lap yet: nothing to push")
    if not state.is_done and not partial:
        left = "; ".join(what_is_left(repo.top, state)) or "the judge has not passed its last green lap"
        raise RalphError(
            f"run {state.name!r} is not done: {left} — open a draft pull request of its green laps so far "
            "with --draft (`ralph status` says more)"
        )
    if state.record.user_branch is None:
        raise RalphError(
            f"run {state.name!r} started on a detached HEAD: no branch for a pull request to go into — "
            f"push ralph/{state.name} and open it by hand (`gh pr create --head ralph/{state.name} --base BRANCH`)"
        )
    check_remote(repo.top, remote)
    return state.record.user_branch


def _pull_request_title(state: RunState) -> str:
    """The issue's title for a run of an issue (its goal also names the URL), else the goal; on one line."""
    issue = state.record.issue
    title = " ".join((issue.title if issue is not None else state.record.config.goal).split())
    return title if len(title) <= 120 else title[:119].rstrip() + "…"
