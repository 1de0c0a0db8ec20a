"""What refuses a run before its first lap, or warns of it: a HEAD, a repository or a
configuration that laps could not be committed, checked or trusted on."""

from __future__ import annotations

import re
from pathlib import Path

from ralph import config as config_module
from ralph import git, todo
from ralph.config.sections import CheckSpec
from ralph.errors import RalphError
from ralph.facts import junit, paths
from ralph.facts.pytest_results import COLLECTION
from ralph.git.layout import RunRefs
from ralph.isolation import sandbox
from ralph.lap.context import RunContext
from ralph.records.ledger import RunState
from ralph.show import ui
from ralph.verdict import checks, could_not_run, failure_lines, readers


def refuse_bad_start(
    repo: git.RepoInfo, cfg: config_module.Config, *, allow_dirty: bool, from_issue: bool = False
) -> None:
    """What makes the user's HEAD a bad place to start a new run from (HEAD's TODO.md but for a
    run of an issue, whose TODO.md the issue makes: start.from_issue)."""
    if repo.branch is None:
        raise RalphError("HEAD is detached — check out the branch the run should start from")
    if not allow_dirty and git.is_dirty(repo.top):
        raise RalphError(
            "the work tree has uncommitted changes, which laps would not see — "
            "commit or stash them, or pass --allow-dirty to start from HEAD anyway"
        )
    if git.uses_lfs(repo.top, repo.head) and not git.run(repo.top, "lfs", "version", check=False).ok:
        raise RalphError(
            "this repository uses Git LFS (filter=lfs in .gitattributes) but git-lfs is not "
            "installed, so lap worktrees would hold pointer files — install git-lfs first"
        )
    if not from_issue:
        _refuse_bad_todo(repo, cfg)


def refuse_other_issue(state: RunState | None, issue: int | None) -> None:
    """`--issue N` names a run of issue N: one of another issue (or of none) is not resumed as if
    it were."""
    if state is None or issue is None or (state.record.issue and state.record.issue.number == issue):
        return
    of = f"issue #{state.record.issue.number}" if state.record.issue else "no issue"
    raise RalphError(
        f"run {state.name!r} is a run of {of}, not of issue #{issue} — resume it without --issue, "
        f"or name a new run with --name"
    )


def refuse_unsafe_run(repo: git.RepoInfo, name: str) -> None:
    """What makes laps impossible to commit or to record, new run or resumed."""
    if not git.run(repo.top, "var", "GIT_COMMITTER_IDENT", check=False).ok:
        raise RalphError(
            "git does not know who you are, so laps cannot be committed — "
            "set it with `git config user.name NAME` and `git config user.email EMAIL`"
        )
    elsewhere = git.worktree_branches(repo.top).get(RunRefs(name).branch)
    if elsewhere is not None:
        raise RalphError(
            f"the run branch ralph/{name} is checked out in {elsewhere} — switch that worktree to another branch first"
        )


def warn_unmatched_patterns(ctx: RunContext, base: str) -> None:
    """A `protect` pattern of the user's that matches no file protects nothing: say so once."""
    own = [
        pattern
        for pattern in ctx.config.protect
        if pattern not in config_module.DEFAULT_PROTECT and not pattern.startswith("!")
    ]
    files = git.files_at(ctx.top, base) if own else []
    for pattern in own:
        if not any(True for _ in paths.spec((pattern.partition("#")[0],)).match_files(files)):
            ui.warn(f"protect: '{pattern}' matches no file at the run's start")


def warn_placeholders(ctx: RunContext, base: str) -> None:
    """`ralph init`'s goal or items still in place: the laps would work on words meant to be replaced."""
    if ctx.config.goal.strip() == todo.PLACEHOLDER_GOAL:
        ui.warn(f"the goal is still `ralph init`'s placeholder ({todo.PLACEHOLDER_GOAL!r}): write the job's goal")
    name = ctx.config.files.todo
    left = [item.text for item in todo.parse(git.show_file(ctx.top, base, name)) if item.text in todo.PLACEHOLDER_ITEMS]
    if left:
        ui.warn(f"{name} still holds `ralph init`'s placeholder items ({'; '.join(left)}): replace them (`ralph plan`)")


def warn_outside_environments(ctx: RunContext) -> None:
    """A setup command that runs a virtualenv's program by its absolute path installs into that
    environment, outside the lap workspace (yours, with the lap's code in it)."""
    for command in ctx.config.setup:
        for word in sandbox.words(command):
            path = Path(word)
            if path.is_absolute() and any((folder / "pyvenv.cfg").is_file() for folder in path.parents):
                ui.warn(
                    f"setup `{command}` runs {word}, of a virtualenv outside the lap workspace: it would "
                    "install the lap's code there — make the environment inside the workspace "
                    "(docs/environments.md)"
                )
                return


def refuse_reports_over_tracked_files(ctx: RunContext, base: str) -> None:
    """A `junit:` or `jest:` pattern is deleted before each check: one that matches files of the commit
    would change the very tree the checks judge (a fixture `tests/data/config.xml` under `**/*.xml`)."""
    patterns = [pattern for check in ctx.config.checks for pattern in (check.junit, check.jest) if pattern]
    tracked = git.files_at(ctx.top, base) if patterns else []
    for pattern in patterns:
        found = junit.tracked_matches(tracked, pattern)
        if found:
            raise RalphError(
                f"the report path '{pattern}' matches files git tracks ({', '.join(found[:3])}), which ralph would "
                "delete before each check — name the folder the report is written to (reports/*.xml)"
            )


def refuse_bad_copy(ctx: RunContext) -> None:
    """`copy` brings in files git does not track: a tracked one would hide the commit's version."""
    paths = ctx.config.copy_
    tracked = git.out(ctx.top, "ls-files", "--", *(f":(literal){path}" for path in paths)) if paths else ""
    if tracked:
        raise RalphError(
            f"copy: {tracked.splitlines()[0]} is tracked by git, so laps already have it — "
            "copy is for untracked files (a .env)"
        )


def refuse_unjudged_baseline(baseline: list[checks.CheckResult], specs: list[CheckSpec], log_dir: Path) -> None:
    """A check that could not run on the base commit judges nothing: no lap could be held to it,
    so the run does not start. Nor does one that fails there with no per-test results, unless the
    user marked it `expect_red`: an exit code that is already non-zero cannot tell a lap that
    broke a test from one that fixed one. Test files that fail to import are named (a module
    missing from the environment looks the same as code still to write)."""
    for index, check in enumerate(baseline, 1):
        if check.could_not_run:
            raise RalphError(
                f"the check `{check.command}` could not run on the base commit: {check.could_not_run} — "
                f"{could_not_run.fix(check.could_not_run)} (its output: {log_dir / f'check-{index}.log'})"
            )
    for index, (spec, check) in enumerate(zip(specs, baseline, strict=True), 1):
        _warn_broken_test_files(check)
        why = readers.judges_nothing(spec, passed=check.passed, has_tests=check.tests is not None)
        if why:
            first = failure_lines.first(check.output_tail) or could_not_run.cause(check.output_tail)
            raise RalphError(
                f"the check `{check.command}` fails on the base commit and {why}: it could judge no lap "
                f"(first failure: {first}) — {readers.hint(check.command)}; or, to run with it red, mark it "
                f"`expect_red: true` in ralph.yaml (its output: {log_dir / f'check-{index}.log'})"
            )
        if spec.expect_red and not check.passed:
            ui.warn(
                f'`{check.command}` fails on the base commit (expect_red): it judges no lap, only "done" waits '
                "for it to pass"
            )


def _warn_broken_test_files(check: checks.CheckResult) -> None:
    failing = check.tests.failing_ids if check.tests else []
    broken = [test.removesuffix(f"::{COLLECTION}") for test in failing if test.endswith(f"::{COLLECTION}")]
    if broken:
        missing = re.search(r"No module named '[^']+'", check.output_tail)
        ui.warn(
            f"`{check.command}`: {len(broken)} test file(s) fail to import on the base commit "
            f"({', '.join(broken[:3])}{': ' + missing.group(0) if missing else ''}): they count as failing "
            "until they pass; if it is the environment that lacks a module, add it in `setup:`"
        )


def _refuse_bad_todo(repo: git.RepoInfo, cfg: config_module.Config) -> None:
    name = cfg.files.todo
    text = git.show_file(repo.top, repo.head, name)
    if text is None:
        raise RalphError(
            f"{name} is not in HEAD — write the job as a checklist (`- [ ] item`; "
            "`ralph init` writes one) and commit it"
        )
    if not todo.parse(text):
        raise RalphError(
            f"{name} has no checkbox items — write the job as `- [ ] item` lines (see TODO.example.md) and commit it"
        )
