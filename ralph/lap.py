"""One lap: prepare a worktree at the last green commit → agent → commit → checks → verdict."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ralph import git, ledger, prompt, todo
from ralph.agents.base import Agent, AgentResult, LapTask
from ralph.checks import CheckResult, all_pass, regressions, run_checks
from ralph.config import Config
from ralph.errors import RalphError
from ralph.ledger import LapRecord, RunState, TodoCounts


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


@dataclass
class Verdict:
    status: str
    reason: str
    output_tail: str = ""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def in_worktree(ctx: RunContext, name: str, commit: str, work):
    """Run `work(worktree)` in a fresh locked worktree at `commit`; always remove it after."""
    worktree = ctx.worktrees / name
    git.add_worktree(ctx.top, worktree, commit, reason=f"ralph run {ctx.run} ({name})")
    try:
        return work(worktree)
    finally:
        git.remove_worktrees_under(ctx.repo.common_dir, worktree)


def run_lap(ctx: RunContext, state: RunState, number: int) -> LapRecord:
    log_dir = ctx.run_dir / f"lap-{number}"
    log_dir.mkdir(parents=True, exist_ok=True)
    return in_worktree(ctx, f"lap-{number}", state.green,
                       lambda worktree: _lap(ctx, state, number, worktree, log_dir))


def _lap(ctx: RunContext, state: RunState, number: int, worktree: Path, log_dir: Path) -> LapRecord:
    started, started_at = time.monotonic(), now_iso()
    files, limits = ctx.config.files, ctx.config.limits
    todo_before = _read(worktree / files.todo)
    lap_prompt = prompt.build(ctx.config.goal, files.todo, todo_before, files.progress,
                              _read(worktree / files.progress), ctx.config.checks, last_failure(ctx, state))
    task = LapTask(ctx.run, number, worktree, lap_prompt, limits.lap_timeout, log_dir, ctx.env,
                   check=lambda: _check_now(ctx, state, worktree, log_dir))
    agent = ctx.agent.run_lap(task)

    items_after = todo.parse(_read(worktree / files.todo))
    ticked = todo.newly_ticked(todo.parse(todo_before), items_after)
    commit, hook_output = _commit(ctx, worktree, number, ticked, agent)
    changed = git.changed_files(ctx.top, state.green, commit)

    checks: list[CheckResult] = []
    if agent.outcome == "error":
        verdict = Verdict("error", f"agent error: {_first_line(agent.detail)}", agent.detail)
    elif agent.outcome != "ok":
        verdict = Verdict("red", _first_line(agent.detail), agent.detail)
    elif hook_output is not None:
        verdict = Verdict("red", "the repository's commit hooks rejected the lap", hook_output)
    elif not changed:
        verdict = Verdict("red", "the lap changed nothing")
    else:
        checks = ctx.check(worktree, log_dir)
        verdict = judge(state.green_checks(), checks)

    counts = todo.count(items_after)
    green = verdict.status == "green"
    record = LapRecord(
        run=ctx.run, lap=number, status=verdict.status, reason=verdict.reason, started_at=started_at,
        duration_s=round(time.monotonic() - started, 3), commit=commit, parent=state.green,
        checks=checks, agent=agent, todo=TodoCounts(open=counts.open, done=counts.done), ticked=ticked,
        files_changed=len(changed), progress=green and bool(ticked),
        done=green and all_pass(checks) and counts.open == 0 and counts.total > 0,
        output_tail=verdict.output_tail[-4000:],
    )
    ledger.save_lap(ctx.top, record)
    if green and not git.update_ref(ctx.top, ledger.branch_ref(ctx.run), commit, state.green):
        record = record.model_copy(update=dict(status="red", progress=False, done=False,
                                               reason="the green line moved during the lap; not advanced"))
        git.add_note(ctx.top, commit, record.model_dump_json(indent=1))
    return record


def _check_now(ctx: RunContext, state: RunState, worktree: Path, log_dir: Path) -> str | None:
    """The checks on the agent's uncommitted work, for agents that fix red checks in the lap."""
    verdict = judge(state.green_checks(), ctx.check(worktree, log_dir))
    return None if verdict.status == "green" else f"{verdict.reason}\n{verdict.output_tail}"


def judge(last_green: list[CheckResult], now: list[CheckResult]) -> Verdict:
    """The ratchet: green unless a check that passed on the last green commit fails now."""
    regressed = regressions(last_green, now)
    if not regressed:
        return Verdict("green", "no check regressed" if not all_pass(now) else "all checks pass")
    first = regressed[0]
    what = "timed out" if first.timed_out else f"exit {first.exit_code}"
    names = ", ".join(f"`{r.command}`" for r in regressed)
    return Verdict("red", f"check regressed: {names} ({what})", first.output_tail)


def _commit(ctx: RunContext, worktree: Path, number: int, ticked: list[str],
            agent: AgentResult) -> tuple[str, str | None]:
    """Commit everything the agent left; returns the commit and the hook output if hooks refused.

    Hooks that fix files (formatters) get one re-add and retry, as people do by hand.
    A refused lap is still committed (without hooks) so it can be reviewed.
    """
    message = commit_message(ctx.run, number, ticked, agent)
    verify, timeout = ctx.config.commit.verify, ctx.config.limits.check_timeout
    done = git.commit_all(worktree, message, verify=verify, timeout=timeout)
    if not done.ok and verify:
        done = git.commit_all(worktree, message, verify=True, timeout=timeout)
        if not done.ok:
            refused = done.output or f"git commit exited {done.exit_code}"
            done = git.commit_all(worktree, message, verify=False, timeout=timeout)
            if done.ok:
                return git.rev(worktree, "HEAD"), refused
    if not done.ok:
        raise RalphError(f"cannot commit lap {number}: {done.tail(600).strip()}")
    return git.rev(worktree, "HEAD"), None


def commit_message(run: str, number: int, ticked: list[str], agent: AgentResult) -> str:
    subject = "; ".join(ticked) if ticked else f"ralph lap {number}"
    if len(subject) > 72:
        subject = subject[:71].rstrip() + "…"
    body = f"{agent.summary.strip()}\n\n" if agent.summary.strip() else ""
    return f"{subject}\n\n{body}Ralph-Run: {run}\nRalph-Lap: {number}\nRalph-Agent: {agent.kind}\n"


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
