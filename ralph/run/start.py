"""A run's start (the baseline checks on the user's HEAD, then the run's refs) or its resume,
which run `ralph run` means without --name, and where a run of a GitHub issue starts."""

from __future__ import annotations

import dataclasses
import re
import sys
from datetime import date
from pathlib import Path

import click

from ralph import config as config_module
from ralph import git, todo
from ralph.errors import RalphError
from ralph.git import github
from ralph.git.layout import RunRefs
from ralph.lap import commit_hooks, planning
from ralph.lap.context import RunContext, now_iso
from ralph.lap.prepare import workspace_at
from ralph.records import ledger
from ralph.records.formats import IssueLink, LapRecord, LapStatus, RunRecord
from ralph.records.ledger import RunState
from ralph.run import refusals
from ralph.show import events, ui
from ralph.verdict import grants
from ralph.verdict.decide import Overrule
from ralph.workspace.workspace import Workspace


class StartedElsewhere(RalphError):
    """Another worker of a `--remote` run started it while this one ran the baseline."""


def pinned_config(state: RunState, current: config_module.Config) -> config_module.Config:
    """A run is judged by the configuration it started with, whatever the file says now (a run
    of an issue has the issue's goal, not the file's).

    Its fuse of laps judges nothing: each `ralph run` takes limits.max_laps from the file as it
    is (and --max-laps over it, loop.py). The record's number is the file's or the flag of the
    `ralph run` that started it, folded in, so it is neither kept (a plain `ralph run` after
    `ralph run --max-laps 2` would stop at once) nor taken for a change of the file."""
    pinned = state.record.config
    if state.record.issue is not None:
        current = current.model_copy(update={"goal": pinned.goal})
    limits = pinned.limits.model_copy(update={"max_laps": current.limits.max_laps})
    pinned = pinned.model_copy(update={"limits": limits})
    if pinned != current:
        ui.say(
            "[yellow]note:[/] the config file differs from the configuration this run started with; "
            "the run keeps its own (use --name to start a new run with the file's)"
        )
    return pinned


def name_for(top: Path, goal: str, issue: int | None = None) -> str:
    """Without --name: `issue-N` for a run of issue N (the same command resumes it), else the
    latest unfinished run of the same goal (resume it, whatever day it started), else a new name
    from today's date and the goal's first words."""
    if issue is not None:
        return f"issue-{issue}"
    for record in reversed(ledger.run_records(top)):
        if record.config.goal == goal:
            state = ledger.load(top, record.run)
            if state and not state.is_done:
                return record.run
    return default_name(goal)


def default_name(goal: str) -> str:
    """Today's date and the goal's first words: a name a person can tell runs apart by."""
    words = re.findall(r"[a-z0-9]+", goal.lower())[:4]
    return "-".join([date.today().strftime("%Y%m%d"), *words]) if words else date.today().strftime("%Y%m%d")


def resume(ctx: RunContext, state: RunState) -> RunState:
    """The run as a crash or a stop left it, its hooks tried again on the base.

    A remote's run: the lap may be another worker's, alive and about to land it (or taken for
    dead, its items given to others) — a worker lands only its own laps."""
    if not ctx.mode.on_remote:
        state = _finish_interrupted_advance(ctx, state)
    if ctx.mode.coordinates:
        _interrupted_slots_laps(ctx, state)
    _run_started(ctx, state.record.base, state)
    if commit_hooks.to_try(ctx) and not state.is_done:  # before this ralph's first lap too, on the base
        log_dir = ctx.run_dir / "resumed"
        log_dir.mkdir(exist_ok=True)
        workspace_at(ctx, state.record.base, 0, log_dir)
        commit_hooks.try_out(ctx, state.record.base, log_dir)
    return state


def _run_started(ctx: RunContext, base: str, state: RunState | None) -> None:
    events.emit(
        "run_started",
        resumed=state is not None,
        base=base,
        green=state.green if state else base,
        next_lap=state.next_lap if state else 1,
        max_laps=ctx.config.limits.max_laps,
        one_session=state.context_bars()[1] if state else 0,
        goal=ctx.config.goal,
    )


def start(ctx: RunContext, issue: int | None = None) -> RunState:
    """Baseline checks on the user's HEAD (for a run of an issue: HEAD with the issue's TODO.md,
    a commit of ralph's), then the run's refs: base, branch, record (last)."""
    # Refs left by a start that died before its record are this run's own: start over.
    names = RunRefs(ctx.run_name)
    leftover = git.rev(ctx.top, names.base)
    branch = git.rev(ctx.top, names.branch)
    if branch not in (None, leftover):
        raise RalphError(
            f"a branch ralph/{ctx.run_name} already exists and is not this run's — pick another name with --name"
        )
    base, link = from_issue(ctx, issue) if issue is not None else (ctx.repo.head, None)
    _run_started(ctx, base, None)
    log_dir = ctx.run_dir / "baseline"
    log_dir.mkdir(exist_ok=True)
    refusals.warn_unmatched_patterns(ctx, base)
    refusals.refuse_bad_copy(ctx)
    refusals.refuse_reports_over_tracked_files(ctx, base)
    refusals.warn_outside_environments(ctx)
    refusals.warn_placeholders(ctx, base)
    workspace_at(ctx, base, 0, log_dir)
    commit_hooks.try_out(ctx, base, log_dir)
    baseline = ctx.check(log_dir)
    refusals.refuse_unjudged_baseline(baseline, ctx.config.checks, log_dir)
    record = RunRecord(
        run=ctx.run_name,
        created_at=now_iso(),
        base=base,
        user_branch=ctx.repo.branch,
        config=ctx.config,
        baseline=baseline,
        on_remote=ctx.mode.on_remote,
        issue=link,
    )
    refs = {names.base: (base, leftover), names.branch: (base, branch)}
    if not ledger.save_record(ctx.store, record, refs):
        if ctx.mode.on_remote:
            raise StartedElsewhere(f"another worker started run {ctx.run_name} meanwhile: joining it")
        raise RalphError(f"run {ctx.run_name!r} was started by another process at the same time")
    return RunState(ctx.run_name, record, base)


def from_issue(ctx: RunContext, number: int) -> tuple[str, IssueLink]:
    """The base of a run of issue `number`, read once here: the user's HEAD with TODO.md made
    of the issue's task list (or the planner's items, when it has none), as a commit of ralph's
    on no branch; the user's branch, index and files untouched. The run's goal becomes the
    issue's title and URL. The issue's text is data: TODO.md's items, the goal, never a command."""
    found = github.issue(ctx.top, number)
    if not found.is_open:
        raise RalphError(
            f"issue #{number} is closed — reopen it to run it, or write its job in "
            f"{ctx.config.files.todo} and `ralph run` without --issue"
        )
    if not found.items and found.ticked:
        raise RalphError(f"every item of issue #{number}'s task list is ticked: nothing left to do")
    title = found.title
    items = found.items or _planned(ctx, found, title)
    whose = f"the task list of issue #{number}" if found.items else f"the planner, for issue #{number}"
    kept = accepted([*found.ticked, *items], whose, ask=True)
    text = issue_todo(title, found.url, number, kept[: len(found.ticked)], kept[len(found.ticked) :])
    tree = git.with_files(ctx.top, f"{ctx.repo.head}^{{tree}}", {ctx.config.files.todo: text})
    message = (
        f"ralph: {ctx.config.files.todo} from issue #{number}\n\n{title}\n{found.url}\n\n"
        f"Ralph-Run: {ctx.run_name}\nRalph-Issue: {found.url}\n"
    )
    ctx.config.goal = f"{title} ({found.url})"
    ui.say(f"issue #{number}: {ui.safe(title)} — {len(items)} item(s) to do")
    return git.commit_tree(ctx.top, tree, ctx.repo.head, message), IssueLink(number=number, title=title, url=found.url)


def issue_todo(title: str, url: str, number: int, ticked: list[str], items: list[str]) -> str:
    """TODO.md of a run of an issue: its ticked items (done already), then the open ones. An
    item that would not read back as itself (text of anyone's who can write the issue) is refused."""
    lines = [f"- [x] {item}\n" for item in ticked] + [f"- [ ] {item}\n" for item in items]
    text = f"# TODO\n\nGoal: {title}\nFrom issue #{number}: {url}\n\n" + "".join(lines)
    expected = [todo.Item(item, True) for item in ticked] + [todo.Item(item, False) for item in items]
    if todo.parse(text) != expected:
        raise RalphError(f"issue #{number}'s task list does not read back as the same TODO items — edit the issue")
    return text


def accepted(items: list[str], whose: str, *, ask: bool) -> list[str]:
    """Items the user did not write (an issue's, a planner's), with their grants (`(may change:
    PATH)`) kept only where the user says yes to them on a terminal: shown, and asked when `ask`;
    with no terminal, without `ask` (`--yes`) or on a no, every grant is taken off, and said."""
    granting = [item for item in items if grants.of(item)]
    if not granting:
        return items
    ui.say(f"grants proposed by {ui.safe(whose)} (paths its items may change beyond the run's scope):")
    for item in granting:
        ui.say(f"  - {ui.safe(item)}")
    if not ask:
        why = "--yes takes none"
    elif not sys.stdin.isatty():
        why = "no terminal to ask on"
    elif user_says_yes("keep these grants? (no: the items stay, their grants go)"):
        ui.say("grants kept: the TODO.md written holds them as your own")
        return items
    else:
        why = "not kept"
    ui.say(
        f"grants taken off the items ({why}): to grant a path, end an item of your own committed "
        "TODO.md with `(may change: PATH)`"
    )
    return [grants.without(item) for item in items]


def user_says_yes(question: str) -> bool:
    """The user's yes, asked on the terminal; no terminal, no yes (Ctrl-D or Ctrl-C is a no)."""
    if not sys.stdin.isatty():
        return False
    try:
        return click.confirm(question, default=False)
    except click.Abort:
        return False


def _planned(ctx: RunContext, found: github.Issue, title: str) -> list[str]:
    """An issue without a task list: the planner's items for it, over the user's HEAD."""
    folder = ctx.run_dir / "plan"
    folder.mkdir(exist_ok=True)
    ui.say(f"issue #{found.number} has no task list: planning it with {ui.safe(planning.planner_name(ctx))} …")
    task = f"{title}\n\nFrom issue #{found.number} ({found.url}):\n{found.body}"
    # A workspace of its own, as `ralph plan`'s: what the planner leaves (an ignored file the
    # next checkout would keep) never reaches the baseline's checks in the run's workspace.
    scratch = Workspace.create(ctx.top, ctx.repo.common_dir, f"{ctx.run_name}.plan")
    try:
        return planning.ask(dataclasses.replace(ctx, workspace=scratch), ctx.repo.head, task, folder).items
    finally:
        scratch.remove()


def _not_unchosen(record: LapRecord) -> bool:
    """A plain lap, or a --best-of candidate its round chose (a crash came before the line moved)."""
    return record.best_of is None or record.best_of.chosen is True


def _interrupted_slots_laps(ctx: RunContext, state: RunState) -> None:
    """Laps of slots stopped (a Ctrl-C, an error) between their green note and their landing:
    only the last lap was advanced above, and no other ever will be, since their claims were let
    go of and their items are done again. Their notes say so (a --best-of candidate is its round's)."""
    green = [
        lap for lap in state.laps if lap.record and lap.record.status == LapStatus.GREEN and not lap.record.best_of
    ]
    if not green:
        return
    on_the_line = set(git.out(ctx.top, "rev-list", state.green, f"^{state.record.base}").split())
    off = [lap.number for lap in green if lap.commit not in on_the_line]
    if off:
        ledger.never_landed(ctx.store, ctx.run_name, off, Overrule.UNLANDED_INTERRUPTED)


def _finish_interrupted_advance(ctx: RunContext, state: RunState) -> RunState:
    """A lap judged green whose branch update a crash cut off: its checks ran, so advance it (a
    `--best-of` candidate only once its round chose it: best_of.py)."""
    last = state.laps[-1] if state.laps else None
    record = last.record if last else None
    if last and record and record.status == LapStatus.GREEN and record.parent == state.green and _not_unchosen(record):
        if ctx.store.swap(RunRefs(ctx.run_name).branch, last.commit, state.green):
            state.green = last.commit
    return state
