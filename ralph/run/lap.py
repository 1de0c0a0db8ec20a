"""One lap: the workspace at the last green commit → agent → commit → checks → verdict."""

from __future__ import annotations

import contextlib
import errno
import re
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from ralph import git, todo
from ralph.agents.base import Agent, AgentResult, LapTask
from ralph.agents.mcp_tools import McpTools
from ralph.config import Config
from ralph.errors import Interrupted, RalphError
from ralph.git import ledger
from ralph.git.ledger import JudgeRecord, LapRecord, RunState, TestChanges
from ralph.isolation import user_state
from ralph.isolation.sandbox import Jail, needed
from ralph.isolation.sockets import unreachable
from ralph.isolation.workspace import CopyFailed, SetupFailed, Workspace, WorkspaceTampered, workspaces_root
from ralph.run import claims, crashpoint, prompt
from ralph.show import events, ui
from ralph.verdict import commit_hooks, ratchet
from ralph.verdict import guard as guard_module
from ralph.verdict.checks import DISK_LOW, CheckResult, all_pass, passing_tests, run_checks
from ralph.verdict.checks import done as checks_done
from ralph.verdict.commit_hooks import commit_message
from ralph.verdict.judge import Judge, material, next_lap_text, signals

LOST_CLAIMS = (
    "its claims were let go of during the lap (its worker was taken for dead: no heartbeat for "
    "limits.worker_timeout) and its items given to other laps; not advanced"
)
MOVED_LINE_RETRIES = 10  # times a lap is rebased onto a green line that moved under it (by other slots)


@dataclass(frozen=True)
class RunContext:
    """What every lap of one run shares."""

    repo: git.RepoInfo
    run_name: str
    config: Config
    run_dir: Path  # <git-common-dir>/ralph/<run>: logs, transcripts, the lock
    agents: tuple[Agent, ...]  # config.agents, made: the agent, then its fallbacks
    env: dict[str, str]  # for the agent and the checks: secrets removed
    workspace: Workspace  # where the laps work, outside the repository
    sandboxed: bool  # the lap's code runs inside bubblewrap
    judge: Judge | None = None  # roles.judge: scores laps the checks passed
    mcp: McpTools | None = None  # the MCP servers' tools, started for the run
    worker: str | None = None  # `--remote`: this worker's name among the run's (workers.Crew)
    warned: set[str] = field(default_factory=set)  # checks already said to run the user's own code

    @property
    def top(self) -> Path:
        return self.repo.top

    def jail(self, phase: str, network: bool = True, writable: tuple[Path, ...] = ()) -> Jail | None:
        """The sandbox for one phase of a lap; None when laps are not sandboxed."""
        if not self.sandboxed:
            self.workspace.unchecked = True  # (Workspace.jail says so itself)
            return None
        sandbox = self.config.sandbox
        writable = (*sandbox.writable_paths(), *writable)
        allowed = tuple(sandbox.socket_paths())
        keep = (*self.keep, *allowed)  # a listed socket in /run or /tmp is bound back there
        # The kernel's list is read anew each phase (a socket bound since the last one is hidden
        # too). ralph's own folder (the laps' workspaces, the hooks' cache) holds none of the user's.
        skip = (workspaces_root().parent, self.workspace.root, *self.credentials)
        return self.workspace.jail(
            phase,
            network=network,
            writable=writable,
            home=sandbox.home_path(),
            keep=keep,
            hide=(*self.credentials, *unreachable(keep, writable, allowed, skip)),
        )

    @cached_property
    def credentials(self) -> tuple[Path, ...]:
        """The git credentials a lap must not read: with them, code of the lap's could push to the
        run's remote (a `--remote` run's green line) or to any of the user's."""
        return git.credential_files(self.top)

    @cached_property
    def keep(self) -> tuple[Path, ...]:
        agents = [agent.shell_command for agent in self.config.agents if agent.kind == "command"]
        commands = [*agents, *self.config.check_commands]
        sandbox = self.config.sandbox
        home, readable = sandbox.home_path(), sandbox.readable_paths()
        return needed(
            self.top, self.repo.common_dir, self.workspace.root, *readable, *([home] if home else []), commands=commands
        )

    def check(self, log_dir: Path) -> list[CheckResult]:
        """The checks on the workspace's files as they are now."""
        events.emit("phase_changed", phase="checks")
        results = run_checks(
            self.config.checks,
            self.workspace.tree,
            timeout=self.config.limits.check_timeout,
            env=self.env,
            log_dir=log_dir,
            jail=self.jail("checks", self.config.sandbox.network),
            user_tree=self.top,
            idle_timeout=self.config.limits.idle_timeout,
        )
        for result in results:
            setup = result.tests.setup if result.tests else None
            self.warn_user_code(result.command, result.output_tail, setup.user_tree if setup else [])
        return results

    def prepare(self, commit: str, lap: int, log_dir: Path, for_checks: bool = False) -> list[str]:
        """The workspace at `commit`, its own git dir anew, set up; returns what was deleted.

        Ignored files stay from lap to lap (venvs, node_modules, build caches). With `strict`,
        every untracked file setup did not make is deleted at a lap's start and again before
        its checks (what goes then is the lap's), and setup runs again when something changed
        a file it made. Setup that runs at a lap's start (after a red lap's own) or with
        `strict` starts from an emptied tree: what one lap's build code left never counts as
        setup's for another. Raises SetupFailed, and CopyFailed before the checks."""
        workspace, config = self.workspace, self.config
        events.emit("phase_changed", phase="preparing")
        # Bytecode matters to the checks only: the agent runs whatever it likes anyway.
        removed = workspace.checkout(commit, bytecode=for_checks)
        setup = bool(config.setup) and workspace.needs_setup(commit, config.setup_inputs, for_checks)
        if config.strict:
            untrusted, changed = workspace.remove_untrusted()
            removed += untrusted if for_checks else []
            setup = setup or bool(changed)
        if setup and (config.strict or not for_checks):
            workspace.empty()
        try:
            workspace.copy_in(self.top, config.copy_)
        except CopyFailed:
            if for_checks:
                raise
            workspace.empty()  # a red lap's ignored file where a copied file's folder belongs
            workspace.copy_in(self.top, config.copy_)
            setup = bool(config.setup)
        workspace.fresh_lap_git(commit, keep_modules=False)
        # Submodules are checked out anew, as a clone would, from the commit's gitlinks: what a
        # lap left in them, or planted in their git dirs, is gone before anything runs there.
        if git.show_file(self.top, commit, ".gitmodules") is not None and workspace.submodules(commit):
            git.init_submodules(
                workspace.tree,
                timeout=config.limits.check_timeout,
                env=self.env,
                jail=self.jail("setup", config.sandbox.network),
            )
        if setup:
            self._set_up(commit, lap, log_dir, for_checks)
        return removed

    def _set_up(self, commit: str, lap: int, log_dir: Path, for_checks: bool) -> None:
        workspace, config = self.workspace, self.config
        events.emit("phase_changed", phase="setup")
        output, rewrote = workspace.set_up(
            config.setup,
            commit,
            env=dict(self.env, RALPH_RUN=self.run_name, RALPH_LAP=str(lap)),
            timeout=config.limits.setup_timeout,
            log_dir=log_dir,
            jail=self.jail("setup", config.sandbox.network),
            for_lap=for_checks,
            remember=config.strict,
        )
        if rewrote:  # the checks judge the commit, not what setup made of its files
            workspace.checkout(commit, bytecode=for_checks)
            if "setup rewrote" not in self.warned:
                self.warned.add("setup rewrote")
                ui.warn(
                    f"setup changed files git tracks ({', '.join(rewrote[:3])}); ralph put them back so "
                    "laps and checks see the commit's — prefer commands that leave them (npm ci, uv sync --frozen)"
                )
        workspace.write_excludes()  # now naming what setup made
        self.warn_user_code("setup", output)
        missing_extra = next(
            (line.strip() for line in output.splitlines() if "does not provide the extra" in line), None
        )
        if missing_extra and "missing extra" not in self.warned:  # pip only warns: the tests' tools may be missing
            self.warned.add("missing extra")
            ui.warn(
                f"setup: {ui.one_line(missing_extra, 200)} — name an extra or dependency group the project "
                "has (README: Lap environments)"
            )

    def warn_user_code(self, what: str, output: str, modules: Sequence[str] = ()) -> None:
        """Once per run and command: `what` ran code from the user's own work tree, not the lap's."""
        if what in self.warned:
            return
        found = list(modules) or _paths_inside(output, self.top)
        if found:
            self.warned.add(what)
            ui.warn(
                f"`{what}` ran code from your own work tree, not the lap's: {found[0]} — an editable "
                "install (pip install -e) or an absolute path in a config makes it test your checkout; "
                "build the environment inside the lap workspace with `setup:` (README: Lap environments)"
            )


def _paths_inside(output: str, top: Path) -> list[str]:
    """Paths under `top` that an output names."""
    return re.findall(re.escape(str(top)) + r"/[^\s'\":,)]+", output)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_lap(
    ctx: RunContext,
    state: RunState,
    number: int,
    which: int = 0,
    items: Sequence[str] = (),
    slot: int | None = None,
    held_by: str | None = None,
) -> LapRecord:
    """Lap `number`, run by agent `which` of config.agents; in a parallel run, by slot `slot`,
    on the TODO items it claimed (their claims `held_by` that holder)."""
    log_dir = ledger.lap_dir(ctx.run_dir, number)
    if log_dir.exists():  # an attempt a crash cut short: keep its transcript apart from this one's
        log_dir.rename(log_dir.with_name(f"lap-{number}.crashed-{time.time_ns()}"))
    log_dir.mkdir(parents=True)
    started, started_at = time.monotonic(), now_iso()
    try:
        ctx.prepare(state.green, number, log_dir)
    except SetupFailed as failed:
        raise RalphError(
            f"{failed.reason} on the last green commit {state.green[:10]}, before lap {number}: "
            f"{ui.one_line(failed.output, 300)} — fix it (a network outage?), then `ralph run` resumes"
        ) from None
    except (RalphError, OSError) as failed:
        if not _disk_full(ctx, failed):
            raise
        raise RalphError(f"{_full_disk(ctx)}, before lap {number} — free some space, then `ralph run`") from None
    prepare_s = round(time.monotonic() - started, 3)
    crashpoint.reached("workspace")
    files, limits = ctx.config.files, ctx.config.limits
    todo_before = git.show_file(ctx.top, state.green, files.todo)
    told = ledger.messages(ctx.top, ctx.run_name)  # forgotten once this lap's note holds them
    lap_prompt = prompt.build(
        ctx.config,
        todo_before,
        git.show_file(ctx.top, state.green, files.progress),
        last_failure(ctx, state, items),
        list(told.values()),
        items=items,
        slot=slot_heading(slot) if slot is not None else None,
    )
    task = LapTask(
        ctx.run_name,
        number,
        ctx.workspace.tree,
        lap_prompt,
        limits.lap_timeout,
        log_dir,
        dict(ctx.env, RALPH_ITEMS="\n".join(items), RALPH_SLOT=str(slot)) if slot is not None else ctx.env,
        check=lambda: _check_now(ctx, state, log_dir),
        jail=ctx.jail("agent"),
        idle_timeout=limits.idle_timeout,
        mcp=ctx.mcp if "agent" in ctx.config.mcp.roles else None,
    )
    # Sandboxed, the lap cannot reach the repository. Without a sandbox, code the agent wrote
    # runs as the user: whatever it does to the shared repository state is put back, once
    # after the agent (before ralph's own git reads the repository's config to stage the
    # lap) and once after the hooks and checks, which run the lap's code too.
    with watching_the_repository(ctx, number) as tampered:
        crashpoint.reached("agent")
        events.emit("phase_changed", phase="agent")
        chosen = ctx.config.agents[which]
        agent = (
            ctx.agents[which]
            .run_lap(task)
            .model_copy(update={"name": chosen.name, "model": chosen.model if chosen.kind == "openai" else None})
        )
    with watching_the_repository(ctx, number) as tampered_later:
        events.emit("phase_changed", phase="committing")
        commit, ticked, counts, judged = _commit_and_judge(ctx, state, number, log_dir, agent, todo.parse(todo_before))
    tampered += tampered_later
    stray = [item for item in ticked if item not in items] if slot is not None else []
    if stray and judged.status == "green":  # another lap may be doing it right now
        judged = Judged(
            "red",
            f"ticked items it did not claim, which other laps work on: {'; '.join(stray[:3])}",
            files_changed=judged.files_changed,
        )
    if tampered:
        judged = Judged(
            "red",
            f"the lap changed the repository outside its workspace, restored: {', '.join(tampered)}",
            files_changed=judged.files_changed,
        )
    facts = LapFacts(number, started, started_at, prepare_s, agent, ticked, counts)
    about = {"told": list(told.values()), "fallback": which, "slot": slot, "items": list(items), "worker": ctx.worker}
    record = _record(ctx, state, facts, commit, judged).model_copy(update=about)
    ledger.save_lap(ctx.top, record)
    if record.status not in ("error", "limited"):  # an agent that never worked heard nothing: tell the next
        for ref in told:
            git.delete_ref(ctx.top, ref)
    if judged.stop:  # recorded first: `ralph run` goes on from the next lap, never this one again
        raise RalphError(judged.stop)
    # The line advances in the same swap that lets go of the lap's claims, which must still be
    # its own: a lap of a worker taken for dead (its items given to others) does not land.
    claimed = [claims.claim_ref(ctx.run_name, item) for item in items] if held_by else []
    try:
        crashpoint.reached("advance")
        for _ in range(MOVED_LINE_RETRIES):
            landing: dict[str, tuple[str | None, str | None]] = {
                ledger.branch_ref(ctx.run_name): (record.commit, record.parent)
            }
            landing.update(dict.fromkeys(claimed, (None, held_by)))
            if record.status != "green" or git.update_refs(ctx.top, landing):
                return record
            if any(git.rev(ctx.top, ref) != held_by for ref in claimed):
                return _overrule(ctx, record, LOST_CLAIMS)
            record = _replay_on_moved_line(ctx, log_dir, facts, record)
        return _overrule(ctx, record, "the green line kept moving during the lap; not advanced")
    except (KeyboardInterrupt, Interrupted):
        # A worker of a remote's run lands only its own laps: one that did not land now never will.
        branch = git.rev(ctx.top, ledger.branch_ref(ctx.run_name)) or record.parent
        if ctx.worker is not None and record.status == "green" and not git.is_ancestor(ctx.top, record.commit, branch):
            with contextlib.suppress(RalphError):  # the remote out of reach: the note stays green, unlanded
                _overrule(ctx, record, "interrupted before it landed; its items are done again")
        raise


@contextmanager
def watching_the_repository(ctx: RunContext, number: int) -> Iterator[list[str]]:
    """Yields a list that, on leaving, holds what changed in the shared repository state
    (and was put back). The snapshot is also on disk until then, for a resume after kill -9.
    Sandboxed laps cannot write the repository at all: nothing to watch."""
    if ctx.sandboxed:
        yield []
        return
    saved = user_state.saved_at(ctx.repo.common_dir, ctx.run_name)
    before = user_state.snapshot(ctx.top, ctx.repo.common_dir)
    before.save(saved)
    tampered: list[str] = []
    try:
        yield tampered
    finally:
        tampered += user_state.put_back(ctx.top, ctx.repo.common_dir, before, f"lap {number}")
        saved.unlink(missing_ok=True)


def _commit_and_judge(
    ctx: RunContext, state: RunState, number: int, log_dir: Path, agent: AgentResult, items_before: list[todo.Item]
) -> tuple[str, list[str], todo.Counts, Judged]:
    """The lap committed and judged. Where that fails on a full disk, a red lap: of its commit,
    or (none made yet) of the last green tree, nothing of the lap trusted; its files deleted."""
    made = None
    try:
        made = _commit(ctx, state, number, agent, items_before)
        crashpoint.reached("commit")
        commit, ticked, counts, refusal = made
        return commit, ticked, counts, _judge_lap(ctx, state, number, log_dir, commit, agent, refusal, ticked)
    except (RalphError, OSError) as failed:
        if isinstance(failed, WorkspaceTampered) or not _disk_full(ctx, failed):
            raise
        cause = ui.one_line(str(failed), 300)
    commit, ticked, counts = made[:3] if made else (_unjudged(ctx, state, number, agent), [], todo.count(items_before))
    ctx.workspace.delete_the_laps_files()
    if not _disk_full(ctx):
        reason = f"the lap filled the disk of its workspace; its files were deleted, and {_free(ctx)} is free again"
        return commit, ticked, counts, Judged("red", reason, cause)
    full = _full_disk(ctx)
    stop = f"{full}, and not with lap {number}'s files (deleted) — free some space, then `ralph run` goes on"
    return commit, ticked, counts, Judged("red", f"{full}, not with the lap's files", cause, stop=stop)


def _unjudged(ctx: RunContext, state: RunState, number: int, agent: AgentResult) -> str:
    """The lap's commit when its files could not be staged: the last green tree, nothing of the lap's."""
    message = commit_message(ctx.run_name, number, [], agent)
    return ctx.workspace.commit_tree(f"{state.green}^{{tree}}", state.green, message)


def _disk_full(ctx: RunContext, failed: BaseException | None = None) -> bool:
    """Is the disk of the workspace full (below checks.DISK_LOW free), or did `failed` say so?"""
    said = isinstance(failed, OSError) and failed.errno in (errno.ENOSPC, errno.EDQUOT)
    return said or shutil.disk_usage(ctx.workspace.root).free < DISK_LOW


def _free(ctx: RunContext) -> str:
    return f"{shutil.disk_usage(ctx.workspace.root).free / (1 << 20):.0f} MB"


def _full_disk(ctx: RunContext) -> str:
    return f"the disk that holds the lap workspace ({ctx.workspace.root.parent}) is full: {_free(ctx)} free"


@dataclass(frozen=True)
class LapFacts:
    """What a lap did, whatever commit it ends up as."""

    number: int
    started: float
    started_at: str
    prepare_s: float  # the workspace made ready at the lap's start: reset, copy, setup
    agent: AgentResult
    ticked: list[str]
    counts: todo.Counts


def _record(ctx: RunContext, state: RunState, facts: LapFacts, commit: str, judged: Judged) -> LapRecord:
    is_green = judged.status == "green"
    passing_before, passing_after = passing_tests(state.green_checks()), passing_tests(judged.checks)
    counts = facts.counts
    return LapRecord(
        run=ctx.run_name,
        lap=facts.number,
        status=judged.status,
        reason=judged.reason,
        started_at=facts.started_at,
        duration_s=round(time.monotonic() - facts.started, 3),
        prepare_s=facts.prepare_s,
        commit=commit,
        parent=state.green,
        checks=judged.checks if is_green else [_without_passed_ids(check) for check in judged.checks],
        agent=_priced(ctx.config, facts.agent),
        todo=counts,
        ticked=facts.ticked,
        files_changed=judged.files_changed,
        output_tail=judged.output_tail[-4000:],
        progress=is_green and (bool(facts.ticked) or passing_after > passing_before),
        # With a judge, done also needs the judge's pass: "unavailable" is not one.
        done=is_green
        and checks_done(judged.checks, counts)
        and (judged.judge is None or judged.judge.status == "passed"),
        protected_touched=judged.guard.protected_touched,
        granted=judged.guard.granted,
        tests=_test_changes(judged, passing_before, passing_after),
        flaky=[check.command for check in judged.checks if check.flaky],
        removed_before_checks=judged.removed,
        judge=judged.judge,
    )


def _priced(config: Config, agent: AgentResult) -> AgentResult:
    """The built-in agent's cost, from ralph.yaml's prices (a CLI's own report comes with it)."""
    if agent.model is None or agent.usage.cost_usd is not None:
        return agent
    cost = config.cost_of(agent.model, agent.usage.prompt_tokens, agent.usage.completion_tokens)
    return agent.model_copy(update={"usage": agent.usage.model_copy(update={"cost_usd": cost})})


def _replay_on_moved_line(ctx: RunContext, log_dir: Path, facts: LapFacts, record: LapRecord) -> LapRecord:
    """Someone advanced the green line during the lap: rebase onto it and judge again, never force."""
    state = ledger.load(ctx.top, ctx.run_name)
    assert state is not None  # the run's own record exists: this lap was run from it
    commit, conflicts = rebase_lap(ctx, record.commit, state.green, record.slot)
    if commit is None:
        return _overrule(
            ctx,
            record,
            f"conflict: the green line moved to {state.green[:10]} during the lap, and the lap's changes to "
            f"{', '.join(conflicts[:10])} conflict with it",
        )
    todo_name = ctx.config.files.todo
    items = todo.parse(git.show_file(ctx.top, commit, todo_name))
    facts = replace(
        facts,
        counts=todo.count(items),
        ticked=todo.newly_ticked(todo.parse(git.show_file(ctx.top, state.green, todo_name)), items),
    )
    judged = _judge_lap(ctx, state, facts.number, log_dir, commit, facts.agent, None, facts.ticked)
    replayed = _record(ctx, state, facts, commit, judged)
    replayed = replayed.model_copy(
        update={
            "reason": f"{judged.reason} (rebased onto {state.green[:10]}, which moved during the lap)",
            **{key: getattr(record, key) for key in ("told", "fallback", "slot", "items", "worker")},
        }
    )
    git.add_note(ctx.top, commit, replayed.model_dump_json(indent=1))
    moves: dict[str, tuple[str, str | None]] = {ledger.lap_ref(ctx.run_name, facts.number): (commit, record.commit)}
    original = ledger.rebased_ref(ctx.run_name, facts.number)
    if git.rev(ctx.top, original) is None:  # the lap's own commit, as its agent left it: kept too
        moves[original] = (record.commit, None)
    git.update_refs(ctx.top, moves)
    return replayed


def rebase_lap(ctx: RunContext, commit: str, onto: str, slot: int | None) -> tuple[str | None, list[str]]:
    """The lap's commit replayed onto `onto`, or None and the paths that conflict. TODO.md and
    PROGRESS.md never conflict: the lap's ticks (and new items) are put onto `onto`'s TODO,
    and its PROGRESS note onto `onto`'s: its own section of it when laps run side by side,
    else the whole note, which each lap rewrites."""
    top, files = ctx.top, ctx.config.files
    parent = git.out(top, "rev-parse", f"{commit}^")
    notes = [name for name in (files.todo, files.progress) if git.show_file(top, commit, name) is not None]
    # The lap's commit without its changes to the two (None: not there before it), so only
    # the rest can conflict.
    kept = {name: git.show_file(top, parent, name) for name in notes}
    bare = git.commit_tree(top, git.with_files(top, f"{commit}^{{tree}}", kept), parent, "ralph: the lap, notes aside")
    tree, conflicts = git.merge_trees(top, onto, bare)
    if tree is None:
        return None, conflicts
    ours: dict[str, str] = {}
    if files.todo in notes:
        before = todo.parse(kept[files.todo] or "")
        after_text = git.show_file(top, commit, files.todo) or ""
        known = Counter(item.text for item in before)
        added = []
        for item, _, source in todo.sources(after_text):  # the items the lap added, whole
            if known[item.text] > 0:
                known[item.text] -= 1
            else:
                added.append(source)
        ticked = todo.newly_ticked(before, todo.parse(after_text))
        ours[files.todo] = todo.combined(git.show_file(top, onto, files.todo) or "", ticked, added)
    if files.progress in notes:
        theirs = git.show_file(top, onto, files.progress) or ""
        mine = git.show_file(top, commit, files.progress) or ""
        ours[files.progress] = mine if slot is None else progress_with(theirs, mine, slot)
    message = git.run(top, "log", "-1", "--format=%B", commit).output
    return git.commit_tree(top, git.with_files(top, tree, ours), onto, message), []


def slot_heading(slot: int) -> str:
    return f"## Slot {slot}"


def progress_with(theirs: str, mine: str, slot: int) -> str:
    """`theirs` (PROGRESS.md on the green line) with slot `slot`'s section as `mine` has it
    (its last, when the lap wrote the heading more than once)."""
    written = list(_sections(mine, slot))
    if not written:
        return theirs
    start, end = written[-1]
    section = mine[start:end] if mine[start:end].endswith(("\n", "\r")) else mine[start:end] + "\n"
    current = next(_sections(theirs, slot), None)
    if current is not None:
        return theirs[: current[0]] + section + theirs[current[1] :]
    return theirs + ("" if not theirs or theirs.endswith(("\n", "\r")) else "\n") + "\n" + section


def _sections(text: str, slot: int) -> Iterator[tuple[int, int]]:
    """Where each stretch from the slot's heading to the next heading of that level, or the
    end, starts and ends; by lines as todo.lines has them (a CRLF file's heading is one too)."""
    heading, start, at = slot_heading(slot), None, 0
    for line in todo.lines(text):
        bare = line.rstrip("\r\n")
        if start is not None and bare.startswith("## "):
            yield start, at
            start = None
        if start is None and bare.rstrip(" \t") == heading:
            start = at
        at += len(line)
    if start is not None:
        yield start, at


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
    judge: JudgeRecord | None = None
    stop: str = ""  # why the run cannot go on after this lap (a disk that stays full): the error it stops with


def _judge_lap(
    ctx: RunContext,
    state: RunState,
    number: int,
    log_dir: Path,
    commit: str,
    agent: AgentResult,
    refusal: tuple[str, str] | None,
    ticked: list[str],
) -> Judged:
    changes = git.changes(ctx.top, state.green, commit)
    changed = len(changes)
    if agent.outcome == "error":
        return Judged("error", f"agent error: {_first_line(agent.detail)}", agent.detail, files_changed=changed)
    if agent.outcome == "limited":
        return Judged("limited", _first_line(agent.detail), agent.detail, files_changed=changed)
    if agent.outcome != "ok":
        return Judged("red", _first_line(agent.detail), agent.detail, files_changed=changed)
    if refusal is not None:
        return Judged("red", refusal[0], refusal[1], files_changed=changed)
    if not changed:
        return Judged("red", "the lap changed nothing")
    # A repository the lap made inside the tree is committed as a gitlink to a commit that exists
    # nowhere; its files would reach the checks but not the commit (a declared submodule is
    # checked out anew from its gitlink instead).
    gitlinks = {path for path, (_, mode) in changes.items() if mode == "160000"}
    nested = gitlinks - set(git.submodule_paths(ctx.top, commit)) if gitlinks else set()
    if nested:
        return Judged(
            "red",
            f"the lap made repositories inside the tree, whose files no commit holds: "
            f"{', '.join(sorted(nested)[:5])} — commit their files in the repository itself",
            files_changed=changed,
        )
    files = ctx.config.files
    report = guard_module.check_lap(
        ctx.top, state.green, commit, changes, ctx.config.protected, files.todo, files.progress, state.record.base
    )
    # The checks judge exactly the commit: the workspace made that commit again (by ralph's own
    # index, which no lap writes), nothing untracked but ignored files, and with strict nothing
    # but what setup made.
    try:
        removed = ctx.prepare(commit, number, log_dir, for_checks=True)
    except git.SubmodulesFailed as failed:  # the lap's gitlinks or .gitmodules lead nowhere
        return Judged("red", "the lap's submodules cannot be checked out", str(failed), files_changed=changed)
    except SetupFailed as failed:  # a lockfile the lap broke
        return Judged("red", f"setup: {failed.reason}", failed.output, files_changed=changed)
    except CopyFailed as failed:  # the lap made a file where a copied file's folder belongs
        return Judged("red", str(failed), files_changed=changed)
    crashpoint.reached("checks")
    checks = ctx.check(log_dir)
    comparison = ratchet.compare(state.green_checks(), checks, report)
    problems = comparison.unrun + report.problems + comparison.problems
    if report.idle_ticks and not _made_something_pass(state.green_checks(), checks, comparison):
        problems.append(report.idle_ticks)
    if problems and removed and ctx.config.strict:
        problems.append(f"strict: ignored files were deleted before the checks: {', '.join(removed[:5])}")
    if problems:
        return Judged(
            "red", "; ".join(problems), comparison.failing_output, checks, changed, report, comparison, removed
        )
    green = Judged("green", _green_reason(checks), "", checks, changed, report, comparison, removed)
    return _ask_the_judge(ctx, state, log_dir, commit, agent, ticked, changes, green) if ctx.judge else green


def _ask_the_judge(
    ctx: RunContext,
    state: RunState,
    log_dir: Path,
    commit: str,
    agent: AgentResult,
    ticked: list[str],
    changes: dict[str, tuple[str, str]],
    green: Judged,
) -> Judged:
    """The judge's verdict on a lap the checks passed: held back, it is red."""
    assert ctx.judge is not None
    seen = material(ctx.config, ctx.top, state.green, commit, changes, ticked, agent.summary)
    measured = signals(
        seen,
        all_pass(green.checks),
        passing_tests(state.green_checks()),
        passing_tests(green.checks),
        ctx.config.files.progress in changes,
    )
    events.emit("phase_changed", phase="judge")
    verdict = ctx.judge.judge(seen, measured, log_dir)
    usage = verdict.usage
    cost = ctx.config.cost_of(ctx.judge.config.model, usage.prompt_tokens, usage.completion_tokens)
    verdict.usage = usage.model_copy(update={"cost_usd": cost})
    green.judge = verdict
    if verdict.status == "unavailable":
        green.reason += f"; {verdict.detail} (judged by the checks alone)"
    elif verdict.status == "held":
        threshold = ctx.judge.role.threshold
        low = verdict.score is not None and verdict.score < threshold
        why = [f"score {verdict.score} below {threshold}"] if low else []
        why += [f"blocking: {'; '.join(verdict.blocking)}"] if verdict.blocking else []
        green.status, green.reason, green.output_tail = "red", f"judge: {', '.join(why)}", next_lap_text(verdict)
    else:
        green.reason += f"; the judge scored {verdict.score}"
    return green


def _made_something_pass(before: list[CheckResult], now: list[CheckResult], comparison: ratchet.Comparison) -> bool:
    """Is a test, or a check, passing now that was not on the last green commit? That is work,
    however small the diff (a whitespace fix inside a string literal)."""
    passed_before = {check.command for check in before if check.passed}
    return bool(comparison.newly_passing) or any(check.passed and check.command not in passed_before for check in now)


def _green_reason(checks: list[CheckResult]) -> str:
    return "all checks pass" if all_pass(checks) else "no check regressed"


def _check_now(ctx: RunContext, state: RunState, log_dir: Path) -> str | None:
    """What is left on the agent's uncommitted work when it says it is done, for agents that fix
    red checks in the lap: no change at all, a check that regressed or could not run, a check
    that still fails. None when nothing is."""
    if not ctx.workspace.changed():
        return "you changed no file, and a lap that changes nothing is red."
    checks = ctx.check(log_dir)
    comparison = ratchet.compare(state.green_checks(), checks, guard_module.GuardReport())
    events.emit("phase_changed", phase="agent")
    problems = comparison.unrun + comparison.problems
    if problems:
        return "the repository's checks fail on your edits: " + "; ".join(problems) + "\n" + comparison.failing_output
    failing = [check for check in checks if not check.passed]
    if not failing:
        return None
    named = [f"`{check.command}`" + _failing_tests(check) for check in failing]
    return (
        f"these checks still fail: {'; '.join(named)}\n{failing[0].output_tail[-2000:]}\n"
        "If they are for later laps and your slice is done, call finish again."
    )


def _failing_tests(check: CheckResult) -> str:
    failing = check.tests.failing_ids if check.tests else []
    return f" ({ratchet.named(failing)})" if failing else ""


def _test_changes(judged: Judged, passing_before: int, passing_after: int) -> TestChanges | None:
    if not any(check.tests for check in judged.checks):
        return None
    return TestChanges(
        passing_before=passing_before,
        passing_after=passing_after,
        newly_failing=judged.comparison.newly_failing,
        newly_passing=judged.comparison.newly_passing,
    )


def _without_passed_ids(check: CheckResult) -> CheckResult:
    """Red laps are never a ratchet baseline: their notes need counts, not every passing test's
    id nor pytest's set-up."""
    if check.tests is None:
        return check
    return check.model_copy(update={"tests": check.tests.model_copy(update={"passed_ids": [], "setup": None})})


def _commit(
    ctx: RunContext, state: RunState, number: int, agent: AgentResult, items_before: list[todo.Item]
) -> tuple[str, list[str], todo.Counts, tuple[str, str] | None]:
    """Commit every file the agent left; returns the commit, the items it ticked (of
    `items_before`, the last green TODO), the TODO's counts and, if the commit was refused, why.

    The repository's hooks run on the lap's changes in the lap's own git dir (sandboxed, when
    laps are); the lap commit itself is ralph's, made from the files the hooks left. A refused
    lap is still committed, so it can be reviewed and the next lap told why.
    """
    workspace, timeout = ctx.workspace, ctx.config.limits.check_timeout
    workspace.verify()
    refusal = None
    if ctx.config.commit.verify and workspace.has_hooks():  # the hooks see the message the commit will have
        staged = workspace.stage(state.green, timeout)[0]
        ticked, _ = _ticked(ctx, items_before, staged)
        message = commit_message(ctx.run_name, number, ticked, agent)
        log_dir = ledger.lap_dir(ctx.run_dir, number)
        refusal = commit_hooks.run_on_lap(ctx, state.record.base, state.green, staged, message, log_dir)
    tree, unstaged = workspace.stage(state.green, timeout)  # the files as the hooks left them
    if unstaged is not None:
        refusal = ("git could not stage the lap's files", unstaged)
    ticked, counts = _ticked(ctx, items_before, tree)
    commit = workspace.commit_tree(tree, state.green, commit_message(ctx.run_name, number, ticked, agent))
    return commit, ticked, counts, refusal


def _ticked(ctx: RunContext, before: list[todo.Item], tree: str) -> tuple[list[str], todo.Counts]:
    after = todo.parse(git.show_file(ctx.top, tree, ctx.config.files.todo))
    return todo.newly_ticked(before, after), todo.count(after)


def last_failure(ctx: RunContext, state: RunState, items: Sequence[str] = ()) -> prompt.LastFailure | None:
    """The last lap, when it was red; in a parallel run, the last lap on any of these items,
    when it was red (a conflict among them: its hunks are the diff it could not rebase)."""
    record = state.last_record()
    if items:
        mine = [lap.record for lap in state.laps if lap.record and set(lap.record.items) & set(items)]
        record = mine[-1] if mine else None
    if record is None or record.status == "green":
        return None
    return prompt.LastFailure(
        record.lap, record.reason, git.diffstat(ctx.top, record.parent, record.commit), record.output_tail[-3000:]
    )


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no detail")
