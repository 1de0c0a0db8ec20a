"""The lap's checks phase: the workspace made exactly the lap's commit again, then the
repository's checks on it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ralph import git
from ralph.isolation import crashpoint
from ralph.lap.commit import LapCommit
from ralph.lap.context import RunContext
from ralph.lap.prepare import workspace_at
from ralph.lap.this_lap import ThisLap
from ralph.verdict.checks import apart_and_whole
from ralph.verdict.decide import CannotCheck, Checked
from ralph.verdict.guard import matches
from ralph.workspace.provision import CopyFailed, SetupFailed

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def checks_on(lap: ThisLap, made: LapCommit, stop: Callable[[], bool] | None = None) -> Checked:
    """The checks judge exactly the lap's commit `made`: the workspace made that commit again (by
    ralph's own index, which no lap writes), nothing untracked but what setup made (and, with
    `strict: false`, ignored files). Where the lap added test files, its old tests are judged
    without them. `stop`: True when the results are no longer wanted (checks.run_checks)."""
    ctx, log_dir = lap.ctx, lap.log_dir
    try:
        removed = workspace_at(ctx, made.sha, lap.number, log_dir, for_checks=True)
    except git.SubmodulesFailed as failed:  # the lap's gitlinks or .gitmodules lead nowhere
        raise CannotCheck("the lap's submodules cannot be checked out", str(failed)) from None
    except SetupFailed as failed:  # a lockfile the lap broke
        raise CannotCheck(f"setup: {failed.reason}", failed.output) from None
    except CopyFailed as failed:  # the lap made a file where a copied file's folder belongs
        raise CannotCheck(str(failed)) from None
    crashpoint.reached("checks")
    added = _added_tests(ctx, made)
    if not added:
        return Checked(results=ctx.check(log_dir, stop), removed=removed)
    # Old tests are judged in a session that loads none of the lap's new test files (a module that
    # patches the runner as it is imported, a Go init() or a mocha root hook in one); the new tests
    # in a second session, on the whole tree. The files are deleted, then written again from their
    # blobs: the second session sees exactly the commit, whatever the first one's code did.
    for path in added:
        _delete_inside(ctx.workspace.tree, path)
    (apart_logs := log_dir / "apart").mkdir(exist_ok=True)
    apart = ctx.check(apart_logs, stop)
    ctx.workspace.checkout(made.sha)
    whole = ctx.check(log_dir, stop)
    return Checked(results=apart_and_whole(apart, whole, git.files_at(ctx.top, made.parent)), removed=removed)


def _added_tests(ctx: RunContext, lap: LapCommit) -> list[str]:
    """The test files the lap added: the files new since the last green commit that a whole-file
    pattern of `protect` names (the test folders and test file names, a new conftest.py among them)."""
    patterns = [pattern for pattern in ctx.config.protect if "#" not in pattern]
    added = [path for path, (status, mode) in lap.changes.items() if status == "A" and mode != "160000"]
    return [path for path in added if matches(patterns, path)] if patterns else []


def _delete_inside(tree: Path, path: str) -> None:
    """Delete tree/`path`, each folder on the way opened without following a link: no link a setup
    command left leads the deletion out of the tree. Where the commit's file is not, the lap is red."""
    *folders, name = path.split("/")
    fd = os.open(tree, _FOLDER)
    try:
        for folder in folders:
            inner = os.open(folder, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.unlink(name, dir_fd=fd)
    except OSError as error:
        why = f"the lap's new test file {path} cannot be set aside for the old tests: {error.strerror}"
        raise CannotCheck(why) from None
    finally:
        os.close(fd)
