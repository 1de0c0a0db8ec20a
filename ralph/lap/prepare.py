"""The lap's first phase: the workspace made ready at the last green commit (and, before the
checks, at the lap's own commit), its log folder, and the TODO it starts from, read once."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ralph import git, todo
from ralph.errors import RalphError
from ralph.git import layout
from ralph.isolation import crashpoint
from ralph.lap import disk
from ralph.lap.context import RunContext, now_iso
from ralph.records.ledger import RunState
from ralph.show import events, ui
from ralph.workspace.provision import CopyFailed, SetupFailed


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """The lap's workspace, ready for the agent, and what the later phases need of its start."""

    log_dir: Path  # the lap's transcripts and check logs
    started: float  # time.monotonic() at the lap's start
    started_at: str
    prepare_s: float  # the workspace made ready: reset, copy, setup
    todo_text: str | None  # TODO.md on the last green commit (None: not there)
    todo_before: list[todo.Item]  # the same, parsed: what the lap's ticks are counted against


def start_lap(ctx: RunContext, state: RunState, number: int) -> Prepared:
    """The workspace at the last green commit, for lap `number`. A setup that fails there, or a
    full disk, stops the run: no lap could do better."""
    log_dir = _fresh_log_dir(ctx, number)
    started, started_at = time.monotonic(), now_iso()
    try:
        workspace_at(ctx, state.green, number, log_dir)
    except SetupFailed as failed:
        raise RalphError(
            f"{failed.reason} on the last green commit {state.green[:10]}, before lap {number}: "
            f"{ui.one_line(failed.output, 300)} — fix it (a network outage?), then `ralph run` resumes"
        ) from None
    except (RalphError, OSError) as failed:
        if not disk.full(ctx, failed):
            raise
        raise RalphError(f"{disk.full_disk(ctx)}, before lap {number} — free some space, then `ralph run`") from None
    prepare_s = round(time.monotonic() - started, 3)
    crashpoint.reached("workspace")
    text = git.show_file(ctx.top, state.green, ctx.config.files.todo)
    return Prepared(
        log_dir=log_dir,
        started=started,
        started_at=started_at,
        prepare_s=prepare_s,
        todo_text=text,
        todo_before=todo.parse(text),
    )


def _fresh_log_dir(ctx: RunContext, number: int) -> Path:
    log_dir = layout.lap_dir(ctx.run_dir, number)
    if log_dir.exists():  # an attempt a crash cut short: keep its transcript apart from this one's
        log_dir.rename(log_dir.with_name(f"lap-{number}.crashed-{time.time_ns()}"))
    log_dir.mkdir(parents=True)
    return log_dir


def workspace_at(ctx: RunContext, commit: str, lap: int, log_dir: Path, *, for_checks: bool = False) -> list[str]:
    """The workspace at `commit`, its own git dir anew, set up; returns what was deleted.

    With `strict` (the default), every untracked file that setup did not make is deleted at a
    lap's start and again before its checks (what goes then is the lap's), but for what the
    base commit's own code left before the first lap (the baseline's build) while unchanged;
    setup runs again when something changed a file it made. Without it, ignored files stay
    from lap to lap. Setup that runs at a lap's start (after a red lap's own) or with `strict`
    starts from an emptied tree: what one lap's build code left never counts as setup's for
    another. Raises SetupFailed, and CopyFailed before the checks."""
    workspace, config = ctx.workspace, ctx.config
    events.emit("phase_changed", phase="preparing")
    # Bytecode matters to the checks only: the agent runs whatever it likes anyway. Strict, once
    # the baseline's files are known, one listing of the untracked files does the clean's work.
    listed = config.strict and workspace.provision.base_made is not None
    removed = workspace.checkout(commit, bytecode=for_checks, clean=not listed)
    setup = bool(config.setup) and workspace.needs_setup(commit, config.setup_inputs, for_checks=for_checks)
    if config.strict:
        if lap and not for_checks:  # (the first lap's start: what is there is the baseline's)
            workspace.provision.note_base_made()
        untrusted, changed = workspace.remove_untrusted(bytecode=for_checks and listed)
        removed += untrusted if for_checks else []
        setup = setup or bool(changed)
    if setup and (config.strict or not for_checks):
        workspace.empty()
    try:
        workspace.copy_in(ctx.top, config.copy_)
    except CopyFailed:
        if for_checks:
            raise
        workspace.empty()  # a red lap's ignored file where a copied file's folder belongs
        workspace.copy_in(ctx.top, config.copy_)
        setup = bool(config.setup)
    workspace.fresh_lap_git(commit, keep_modules=False)
    _submodules_anew(ctx, commit)
    if setup:
        _set_up(ctx, commit, lap, log_dir, for_checks=for_checks)
    return removed


def _submodules_anew(ctx: RunContext, commit: str) -> None:
    """Submodules are checked out anew, as a clone would, from the commit's gitlinks: what a
    lap left in them, or planted in their git dirs, is gone before anything runs there."""
    if git.show_file(ctx.top, commit, ".gitmodules") is not None and ctx.workspace.submodules(commit):
        git.init_submodules(
            ctx.workspace.tree,
            timeout=ctx.config.limits.check_timeout,
            env=ctx.env,
            jail=ctx.jail("setup", network=ctx.config.sandbox.network),
        )


def _set_up(ctx: RunContext, commit: str, lap: int, log_dir: Path, *, for_checks: bool) -> None:
    workspace, config = ctx.workspace, ctx.config
    events.emit("phase_changed", phase="setup")
    output, rewrote = workspace.set_up(
        config.setup,
        commit,
        env=dict(ctx.env, RALPH_RUN=ctx.run_name, RALPH_LAP=str(lap)),
        timeout=config.limits.setup_timeout,
        log_dir=log_dir,
        jail=ctx.jail("setup", network=config.sandbox.network),
        for_lap=for_checks,
        remember=config.strict,
    )
    if rewrote:  # the checks judge the commit, not what setup made of its files
        workspace.checkout(commit, bytecode=for_checks)
        if "setup rewrote" not in ctx.warned:
            ctx.warned.add("setup rewrote")
            ui.warn(
                f"setup changed files git tracks ({', '.join(rewrote[:3])}); ralph put them back so "
                "laps and checks see the commit's — prefer commands that leave them (npm ci, uv sync --frozen)"
            )
    workspace.write_excludes()  # now naming what setup made
    ctx.warn_user_code("setup", output)
    _warn_missing_extra(ctx, output)


def _warn_missing_extra(ctx: RunContext, output: str) -> None:
    missing_extra = next((line.strip() for line in output.splitlines() if "does not provide the extra" in line), None)
    if missing_extra and "missing extra" not in ctx.warned:  # pip only warns: the tests' tools may be missing
        ctx.warned.add("missing extra")
        ui.warn(
            f"setup: {ui.one_line(missing_extra, 200)} — name an extra or dependency group the project "
            "has (docs/environments.md)"
        )
