"""The lap's checks phase: the workspace made exactly the lap's commit again, then the
repository's checks on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralph import git
from ralph.isolation import crashpoint
from ralph.isolation.provision import CopyFailed, SetupFailed
from ralph.run.commit import LapCommit
from ralph.run.context import RunContext
from ralph.run.prepare import workspace_at
from ralph.verdict.checks import CheckResult


class CannotCheck(Exception):
    """The lap's commit cannot be made ready for its checks: the lap's doing (a broken lockfile,
    gitlinks that lead nowhere), so the lap is red for it."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True, kw_only=True)
class Checked:
    """The checks' results on the lap's commit."""

    results: list[CheckResult]
    removed: list[str]  # untracked files deleted before the checks (with strict: the lap's)


def checks_on(ctx: RunContext, lap: LapCommit, number: int, log_dir: Path) -> Checked:
    """The checks judge exactly the commit: the workspace made that commit again (by ralph's own
    index, which no lap writes), nothing untracked but ignored files, and with strict nothing
    but what setup made."""
    try:
        removed = workspace_at(ctx, lap.sha, number, log_dir, for_checks=True)
    except git.SubmodulesFailed as failed:  # the lap's gitlinks or .gitmodules lead nowhere
        raise CannotCheck("the lap's submodules cannot be checked out", str(failed)) from None
    except SetupFailed as failed:  # a lockfile the lap broke
        raise CannotCheck(f"setup: {failed.reason}", failed.output) from None
    except CopyFailed as failed:  # the lap made a file where a copied file's folder belongs
        raise CannotCheck(str(failed)) from None
    crashpoint.reached("checks")
    return Checked(results=ctx.check(log_dir), removed=removed)
