"""One lap: prepare a worktree at the last green commit → agent → commit → checks → verdict."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from ralph import crashpoint, git, ledger, prompt, ratchet, todo, ui, user_state
from ralph import guard as guard_module
from ralph.agents.base import Agent, AgentResult, LapTask
from ralph.checks import CheckResult, all_pass, passing_tests, run_checks
from ralph.config import Config
from ralph.errors import RalphError
from ralph.ledger import LapRecord, RunState, TestChanges, TodoCounts


MOVED_LINE_RETRIES = 3  # times a lap is rebased onto a green line that moved under it
SNAPSHOT_FILE = "repository-snapshot.json"  # in the run folder while a lap's code runs


@dataclass(frozen=True)
class RunContext:
    """What every lap of one run shares."""

    repo: git.RepoInfo
    run: str
    config: Config
    run_dir: Path  # <git-common-dir>/ralph/<run>: worktrees, logs, transcripts, the lock
    agent: Agent
    env: dict[str, str]  # for the agent and the checks: secrets removed

    @property
    def top(self) -> Path:
        return self.repo.top

    @property
    def worktrees(self) -> Path:
        return self.run_dir / "worktrees"

    def check(self, worktree: Path, log_dir: Path) -> list[CheckResult]:
        return run_checks(self.config.checks, worktree, timeout=self.config.limits.check_timeout,
                          env=self.env, log_dir=log_dir)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def in_worktree(ctx: RunContext, name: str, commit: str, work):
    """Run `work(worktree)` in a fresh locked worktree at `commit`; always remove it after."""
    worktree = ctx.worktrees / name
    git.add_worktree(ctx.top, worktree, commit, reason=f"ralph run {ctx.run} ({name})")
    try:
        if (worktree / ".gitmodules").exists():
            git.init_submodules(worktree, timeout=ctx.config.limits.check_timeout)
        return work(worktree)
    finally:
        git.remove_worktrees_under(ctx.repo.common_dir, worktree)


def run_lap(ctx: RunContext, state: RunState, number: int) -> LapRecord:
    log_dir = ctx.run_dir / f"lap-{number}"
    if log_dir.exists():  # an attempt a crash cut short: keep its transcript apart from this one's
        log_dir.rename(log_dir.with_name(f"lap-{number}.crashed-{time.time_ns()}"))
    log_dir.mkdir(parents=True)
    return in_worktree(ctx, f"lap-{number}", state.green,
                       lambda worktree: _lap(ctx, state, number, worktree, log_dir))


def _lap(ctx: RunContext, state: RunState, number: int, worktree: Path, log_dir: Path) -> LapRecord:
    started, started_at = time.monotonic(), now_iso()
    crashpoint.reached("worktree")
    files, limits = ctx.config.files, ctx.config.limits
    todo_before = _read(worktree / files.todo)
    lap_prompt = prompt.build(ctx.config, todo_before, _read(worktree / files.progress),
                              last_failure(ctx, state))
    task = LapTask(ctx.run, number, worktree, lap_prompt, limits.lap_timeout, log_dir, ctx.env,
                   check=lambda: _check_now(ctx, state, worktree, log_dir), progress=ui.agent_step)
    # From the agent to the end of the checks, code the agent wrote runs (its own, hooks,
    # checks): whatever it does to the shared repository state is put back afterwards.
    with watching_the_repository(ctx, number) as tampered:
        crashpoint.reached("agent")
        agent = ctx.agent.run_lap(task)
        items_after = todo.parse(_read(worktree / files.todo))
        ticked = todo.newly_ticked(todo.parse(todo_before), items_after)
        commit, refusal = _commit(ctx, worktree, number, ticked, agent)
        crashpoint.reached("commit")
        judged = _judge_lap(ctx, state, worktree, log_dir, commit, agent, refusal)
    if tampered:
        judged = Judged("red", f"the lap changed the repository outside its worktree, restored: "
                               f"{', '.join(tampered)}", files_changed=judged.files_changed)
    facts = LapFacts(number, started, started_at, agent, ticked, todo.count(items_after))
    record = _record(ctx, state, facts, commit, judged)
    ledger.save_lap(ctx.top, record)
    crashpoint.reached("advance")
    for _ in range(MOVED_LINE_RETRIES):
        if record.status != "green" or git.update_ref(ctx.top, ledger.branch_ref(ctx.run), record.commit,
                                                      record.parent):
            return record
        record = _replay_on_moved_line(ctx, worktree, log_dir, facts, record)
    return _overrule(ctx, record, "the green line kept moving during the lap; not advanced")


@contextmanager
def watching_the_repository(ctx: RunContext, number: int):
    """Yields a list that, on leaving, holds what changed in the shared repository state
    (and was put back). The snapshot is also on disk until then, for a resume after kill -9."""
    saved = ctx.run_dir / SNAPSHOT_FILE
    before = user_state.snapshot(ctx.top, ctx.repo.common_dir)
    before.save(saved)
    tampered: list[str] = []
    try:
        yield tampered
    finally:
        tampered += user_state.restore(ctx.top, ctx.repo.common_dir, before)
        saved.unlink(missing_ok=True)
        if tampered:
            ui.warn(f"lap {number} changed your repository ({', '.join(tampered)}); ralph put it back")


@dataclass(frozen=True)
class LapFacts:
    """What a lap did, whatever commit it ends up as."""

    number: int
    started: float
    started_at: str
    agent: AgentResult
    ticked: list[str]
    counts: todo.Counts


def _record(ctx: RunContext, state: RunState, facts: LapFacts, commit: str, judged: Judged) -> LapRecord:
    green = judged.status == "green"
    passing_before, passing_after = passing_tests(state.green_checks()), passing_tests(judged.checks)
    counts = facts.counts
    return LapRecord(
        run=ctx.run, lap=facts.number, status=judged.status, reason=judged.reason, started_at=facts.started_at,
        duration_s=round(time.monotonic() - facts.started, 3), commit=commit, parent=state.green,
        checks=judged.checks if green else [_without_passed_ids(check) for check in judged.checks],
        agent=facts.agent, todo=TodoCounts(open=counts.open, done=counts.done), ticked=facts.ticked,
        files_changed=judged.files_changed, output_tail=judged.output_tail[-4000:],
        progress=green and (bool(facts.ticked) or passing_after > passing_before),
        done=green and all_pass(judged.checks) and counts.open == 0 and counts.total > 0,
        protected_touched=judged.guard.protected_touched, granted=judged.guard.granted,
        tests=_test_changes(judged, passing_before, passing_after),
        flaky=[check.command for check in judged.checks if check.flaky],
        removed_before_checks=judged.removed,
    )


def _replay_on_moved_line(ctx: RunContext, worktree: Path, log_dir: Path, facts: LapFacts,
                          record: LapRecord) -> LapRecord:
    """Someone advanced the green line during the lap: rebase onto it and judge again, never force."""
    state = ledger.load(ctx.top, ctx.run)
    git.reset_to_head(worktree, ignored=ctx.config.strict)
    if not git.run(worktree, *git.DURABLE, "rebase", "--onto", state.green, record.parent, check=False).ok:
        git.run(worktree, "rebase", "--abort", check=False)
        return _overrule(ctx, record, f"the green line moved to {state.green[:10]} during the lap and the "
                                      "lap does not rebase onto it")
    commit = git.rev(worktree, "HEAD")
    todo_name = ctx.config.files.todo
    items = todo.parse(git.show_file(ctx.top, commit, todo_name))
    facts = replace(facts, counts=todo.count(items),
                    ticked=todo.newly_ticked(todo.parse(git.show_file(ctx.top, state.green, todo_name)), items))
    judged = _judge_lap(ctx, state, worktree, log_dir, commit, facts.agent, None)
    replayed = _record(ctx, state, facts, commit, judged)
    replayed = replayed.model_copy(update={"reason": f"{judged.reason} (rebased onto {state.green[:10]}, "
                                                     "which moved during the lap)"})
    git.add_note(ctx.top, commit, replayed.model_dump_json(indent=1))
    git.update_ref(ctx.top, ledger.lap_ref(ctx.run, facts.number), commit, record.commit)
    return replayed


def _overrule(ctx: RunContext, record: LapRecord, reason: str) -> LapRecord:
    red = record.model_copy(update=dict(status="red", progress=False, done=False, reason=reason))
    git.add_note(ctx.top, record.commit, red.model_dump_json(indent=1))
    return red


@dataclass
class Judged:
    """A lap's verdict and the evidence for it."""

    status: str
    reason: str
    output_tail: str = ""
    checks: list[CheckResult] = field(default_factory=list)
    files_changed: int = 0
    guard: guard_module.GuardReport = field(default_factory=guard_module.GuardReport)
    comparison: ratchet.Comparison = field(default_factory=ratchet.Comparison)
    removed: list[str] = field(default_factory=list)


def _judge_lap(ctx: RunContext, state: RunState, worktree: Path, log_dir: Path, commit: str,
               agent: AgentResult, refusal: tuple[str, str] | None) -> Judged:
    statuses = git.name_status(ctx.top, state.green, commit)
    changed = len(statuses)
    if agent.outcome == "error":
        return Judged("error", f"agent error: {_first_line(agent.detail)}", agent.detail, files_changed=changed)
    if agent.outcome != "ok":
        return Judged("red", _first_line(agent.detail), agent.detail, files_changed=changed)
    if refusal is not None:
        return Judged("red", refusal[0], refusal[1], files_changed=changed)
    if not git.is_ancestor(ctx.top, state.green, commit):
        return Judged("red", "the lap rewrote history: its commit does not descend from the last green commit",
                      files_changed=changed)
    if not changed:
        return Judged("red", "the lap changed nothing")
    files = ctx.config.files
    report = guard_module.check_lap(ctx.top, state.green, commit, statuses, ctx.config.protect, files.todo,
                                    files.progress, state.record.base)
    # The checks judge exactly the commit: no hidden index flags, no file a hook rewrote after
    # staging, nothing untracked, and with strict nothing ignored either.
    removed = git.reset_to_head(worktree, ignored=ctx.config.strict)
    crashpoint.reached("checks")
    checks = ctx.check(worktree, log_dir)
    comparison = ratchet.compare(state.green_checks(), checks, set(report.granted))
    problems = report.problems + comparison.problems
    if problems and removed and ctx.config.strict:
        problems.append(f"strict: ignored files were deleted before the checks: {', '.join(removed[:5])}")
    status, reason = ("red", "; ".join(problems)) if problems else ("green", _green_reason(checks))
    return Judged(status, reason, comparison.failing_output, checks, changed, report, comparison, removed)


def _green_reason(checks: list[CheckResult]) -> str:
    return "all checks pass" if all_pass(checks) else "no check regressed"


def _check_now(ctx: RunContext, state: RunState, worktree: Path, log_dir: Path) -> str | None:
    """The checks on the agent's uncommitted work, for agents that fix red checks in the lap."""
    comparison = ratchet.compare(state.green_checks(), ctx.check(worktree, log_dir), set())
    return "; ".join(comparison.problems) + "\n" + comparison.failing_output if comparison.problems else None


def _test_changes(judged: Judged, passing_before: int, passing_after: int) -> TestChanges | None:
    if not any(check.tests for check in judged.checks):
        return None
    return TestChanges(passing_before=passing_before, passing_after=passing_after,
                       newly_failing=judged.comparison.newly_failing,
                       newly_passing=judged.comparison.newly_passing)


def _without_passed_ids(check: CheckResult) -> CheckResult:
    """Red laps are never a ratchet baseline: their notes need counts, not every passing test's id."""
    if check.tests is None:
        return check
    return check.model_copy(update={"tests": check.tests.model_copy(update={"passed_ids": []})})


def _commit(ctx: RunContext, worktree: Path, number: int, ticked: list[str],
            agent: AgentResult) -> tuple[str, tuple[str, str] | None]:
    """Commit everything the agent left; returns the commit and, if it was refused, why.

    Hooks that fix files (formatters) get one re-add and retry, as people do by hand.
    A refused lap is still committed (without hooks; what could be staged) so it can be
    reviewed and the next lap told why.
    """
    model = ctx.config.agent.model if agent.kind == "openai" else None
    message = commit_message(ctx.run, number, ticked, agent, model)
    timeout = ctx.config.limits.check_timeout
    refusal = None
    for attempt in range(2 if ctx.config.commit.verify else 1):
        staged = git.stage_all(worktree, timeout)
        if not staged.ok:
            refusal = ("git could not stage the lap's files", staged.stderr or staged.output)
            break
        done = git.commit(worktree, message, verify=ctx.config.commit.verify, timeout=timeout, env=ctx.env)
        if done.ok:
            return git.rev(worktree, "HEAD"), None
        refusal = ("the repository's commit hooks rejected the lap", done.output or f"exit {done.exit_code}")
    done = git.commit(worktree, message, verify=False, timeout=timeout, env=ctx.env)
    if not done.ok:
        raise RalphError(f"cannot commit lap {number}: {done.tail(600).strip()}")
    return git.rev(worktree, "HEAD"), refusal


def commit_message(run: str, number: int, ticked: list[str], agent: AgentResult, model: str | None) -> str:
    subject = "; ".join(ticked) if ticked else f"ralph lap {number}"
    if len(subject) > 72:
        subject = subject[:71].rstrip() + "…"
    body = f"{agent.summary.strip()}\n\n" if agent.summary.strip() else ""
    trailers = f"Ralph-Run: {run}\nRalph-Lap: {number}\nRalph-Agent: {agent.kind}\n"
    return f"{subject}\n\n{body}{trailers}" + (f"Ralph-Model: {model}\n" if model else "")


def last_failure(ctx: RunContext, state: RunState) -> prompt.LastFailure | None:
    record = state.last_record()
    if record is None or record.status == "green":
        return None
    return prompt.LastFailure(record.lap, record.reason, git.diffstat(ctx.top, record.parent, record.commit),
                              record.output_tail[-3000:])


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no detail")
