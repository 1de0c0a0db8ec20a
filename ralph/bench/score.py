"""The bench's own verdict on what a run left: the job's checks run once more on the scored
commit, sandboxed as a lap's are, and the package's tests that pass there counted against the
finished job's. A run's notes are not read for it: a lap that ran out of time has no check
results, a red lap's notes keep no passing tests, and neither may read as a score."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralph import git, todo
from ralph.bench.build import BuiltJob, test_id
from ralph.config import CONFIG_FILE, load
from ralph.isolation import sandbox
from ralph.lap.checks_at import checks_at
from ralph.verdict.checks import CheckResult
from ralph.workspace.provision import SetupFailed


@dataclass(frozen=True)
class Scored:
    tests_passed: int  # of the finished job's tests, those passing
    checks_pass: bool  # every check ran and passed
    items_open: int
    not_judged: str  # why a check could not run (then nothing is scored), else ""


def score(clone: Path, commit: str, job: BuiltJob) -> Scored:
    repo = git.open_repo(clone)
    cfg = load(repo.top / CONFIG_FILE)
    items = todo.parse(git.show_file(repo.top, commit, cfg.files.todo))
    open_items = sum(not item.done for item in items)
    try:
        results = checks_at(repo, cfg, commit, "bench-score", sandboxed=sandbox.decide(cfg.sandbox.mode))
    except SetupFailed as failed:
        return Scored(0, False, open_items, f"setup failed: {failed.reason}")
    not_run = next((f"`{r.command}` could not run: {r.could_not_run}" for r in results if r.could_not_run), "")
    return Scored(passing(results, job), all(r.passed for r in results), open_items, not_run)


def passing(checks: list[CheckResult], job: BuiltJob) -> int:
    """The finished job's tests passing in the job's test check (tests a lap added count for nothing)."""
    tests = checks[0].tests if checks else None
    if tests is None:
        return 0
    return len({test_id(test) for test in tests.passed_ids} & set(job.reference_tests))
