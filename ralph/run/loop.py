"""The run: checks, lock, baseline, laps in order, fuses, and the reason it stopped."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from ralph import config as config_module
from ralph import git, todo
from ralph.agents import limiter, make_agent
from ralph.agents.mcp_tools import McpTools
from ralph.commands import review
from ralph.errors import Exit, Interrupted, RalphError
from ralph.git import ledger
from ralph.git.ledger import LapRecord, RunRecord, RunState
from ralph.isolation import hardening, proc, sandbox, user_state
from ralph.isolation.workspace import Workspace, workspaces_root
from ralph.run import lifecycle, parallel, workers
from ralph.run.lap import RunContext, now_iso, run_lap
from ralph.show import events, ui, view
from ralph.verdict import checks, commit_hooks, could_not_run, guard, junit
from ralph.verdict.judge import Judge, check_independence
from ralph.verdict.pytest_results import COLLECTION

RUN_MARK = "RALPH_RUN_MARK"  # in every child's environment: finds orphans of a killed run
OUTAGE_FIRST_WAIT = 5.0  # seconds before the lap after an endpoint failure; doubles while it lasts


@dataclass(frozen=True)
class RunOptions:
    cwd: Path
    config_path: Path | None = None
    name: str | None = None
    max_laps: int | None = None
    allow_dirty: bool = False
    display: view.Display = "auto"
    events_to: str | None = None  # --events: a file, or - for stdout
    parallel: int = 1  # --parallel: slots running laps side by side
    items_per_lap: int = 1  # --items-per-lap: TODO items each lap of a parallel run claims
    slot: int | None = None  # --slot: this process is that slot of a parallel run (started by it)
    remote: str | None = None  # --remote: the git remote that keeps the run's refs, for many workers


def run(options: RunOptions) -> Exit:
    # Slots' lines are relayed as they come, marked with their slot: no live view to draw over them.
    display = "plain" if options.parallel > 1 and options.display == "auto" else options.display
    with view.watching(display, options.events_to):
        try:
            try:
                return _run(options)
            except StartedElsewhere as lost:  # the run exists now: join it, with its configuration
                ui.say(str(lost))
                return _run(options)
        except BaseException as stopped:  # the events end with run_ended, whatever ended the run
            if isinstance(stopped, KeyboardInterrupt | Interrupted):
                code, how, reason = Exit.INTERRUPTED, "interrupted", "interrupted"
            elif isinstance(stopped, RalphError):
                code, how, reason = stopped.exit_code, "error", str(stopped)
            else:
                code, how, reason = Exit.ERROR, "error", "internal error (a bug in ralph)"
            events.emit("run_ended", exit=int(code), reason=reason, stopped_by=how, flaky=[])
            raise


class StartedElsewhere(RalphError):
    """Another worker of a `--remote` run started it while this one ran the baseline."""


def _run(options: RunOptions) -> Exit:
    side_by_side = options.parallel > 1 or options.slot is not None or options.remote is not None
    if options.items_per_lap > 1 and not side_by_side:
        raise RalphError("--items-per-lap is for --parallel runs: a lap of a plain run works on what it chooses")
    repo = git.open_repo(options.cwd)
    cfg = config_module.load(options.config_path or repo.top / config_module.CONFIG_FILE)
    if options.remote is not None:
        name, remote = _remote(repo, options.remote, options)
        with git.kept_on(remote):
            return _run_here(options, repo, cfg, name, remote)
    return _run_here(options, repo, cfg, options.name or _name_for(repo.top, cfg.goal))


def _remote(repo: git.RepoInfo, remote: str, options: RunOptions) -> tuple[str, git.Remote]:
    """The run, and the remote that keeps its refs: its branch, its refs (but `ralph land`'s
    mark), the notes."""
    if options.name is None:
        raise RalphError("--remote needs --name: every worker must name the same run")
    if options.parallel > 1:
        raise RalphError("--remote runs one worker per clone — for more workers, start more clones")
    workers.check_remote(repo.top, remote)
    name = ledger.check_name(options.name)
    return name, workers.keeper(remote, [name])


def _run_here(
    options: RunOptions, repo: git.RepoInfo, cfg: config_module.Config, name: str, remote: git.Remote | None = None
) -> Exit:
    name = ledger.check_name(name)
    slot = options.slot
    events.naming(name, slot)
    _refuse_unsafe_run(repo, name)
    if remote is not None:  # the run as the remote has it, or none yet
        workers.fetch(repo.top, remote, [name])
    if slot is None and ledger.load(repo.top, name) is None:  # a resumed run starts from its green line
        _refuse_bad_start(repo, cfg, options.allow_dirty)
    run_dir = ledger.run_dir(repo.common_dir, name)
    run_dir.mkdir(parents=True, exist_ok=True)
    # A slot of a parallel run locks itself: the ralph that started it holds the run's lock.
    with ledger.run_lock(run_dir if slot is None else run_dir / f"slot-{slot}", name):
        state = ledger.load(repo.top, name)
        if slot is not None and (state is None or parallel.PARENT_VAR not in os.environ):
            raise RalphError(f"--slot is for the slots a `ralph run --parallel` of {name} starts itself")
        if slot is not None:
            hardening.end_with_parent(int(os.environ[parallel.PARENT_VAR]))
        if state is not None and state.record.on_remote and remote is None:
            raise RalphError(
                f"run {name} is kept on a git remote, whose refs replace this clone's — "
                f"work on it with `ralph run --remote REMOTE --name {name}`"
            )
        if state is not None:
            newer = next((lap.problem for lap in state.laps if lap.newer), None)
            if newer:
                raise ledger.NewerFormat(newer)
            cfg = _pinned_config(state, cfg)
        if options.max_laps is not None:
            cfg.limits.max_laps = options.max_laps
        unknown = cfg.unknown_cost() if cfg.limits.max_cost_usd is not None else None
        if unknown:
            raise RalphError(f"limits.max_cost_usd needs every lap's cost, but {unknown} — add prices or drop the fuse")
        # Whatever a previous ralph of this run left running when it was killed goes first,
        # then whatever its last lap changed in the repository before it could put it back.
        mark = f"{repo.common_dir}:{name}"
        if slot is None and proc.kill_marked(RUN_MARK, mark):
            ui.warn(f"stopped processes left running by an earlier `ralph run` of {name}")
        if slot is None:
            _restore_after_crash(repo, name)
        env = proc.clean_env(allow=tuple(cfg.env.pass_), secrets=cfg.key_variables, extra={RUN_MARK: mark})
        workspace: Workspace | None = None
        mcp: McpTools | None = None
        try:
            sandboxed = _sandboxed(repo, cfg)
            if (options.parallel > 1 or slot is not None) and not sandboxed:
                raise RalphError(
                    "--parallel needs laps in the sandbox (bubblewrap): unsandboxed, each slot's lap could "
                    "change the repository's refs under the others — install bubblewrap, or run without it"
                )
            if remote is not None and not sandboxed:
                raise RalphError(
                    "--remote needs laps in the sandbox (bubblewrap): unsandboxed, a lap's code could read this "
                    "clone's credentials and push to the run's refs on the remote — install bubblewrap"
                )
            limiter.configure(cfg.limits.requests_per_minute)
            judge = _judge(cfg)
            # The keys of the built-in agents and the roles reach no agent CLI, whatever its preset reads.
            withheld = (*(agent.api_key_env for agent in cfg.agents if agent.kind == "openai"), *cfg.role_key_variables)
            agents = tuple(make_agent(agent, withheld) for agent in cfg.agents)
            agents[0].check_endpoint(time.monotonic() + cfg.limits.lap_timeout)
            for number, fallback in enumerate(agents[1:], 1):  # needed only later, if at all: a warning
                try:
                    fallback.check_endpoint(time.monotonic() + cfg.limits.lap_timeout)
                except RalphError as exc:
                    ui.warn(f"agent.fallback[{number - 1}] cannot be used now: {exc}")
            coordinating = options.parallel > 1 and slot is None  # its slots run the laps, and ask the tools
            if not coordinating and (cfg.mcp.offered_to("agent") or cfg.mcp.offered_to("judge")):
                mcp = McpTools.start(cfg.mcp, repo.top, env, run_dir)
            if judge is not None and "judge" in cfg.mcp.roles:
                judge.mcp = mcp
            workspace = Workspace.create(
                repo.top, repo.common_dir, name if slot is None else parallel.slot_name(name, slot)
            )
            worker = workers.new_name() if remote is not None else None
            ctx = RunContext(
                repo, name, cfg, run_dir, agents, env, workspace, sandboxed, judge=judge, mcp=mcp, worker=worker
            )
            if slot is not None:
                return parallel.work(ctx, slot, options.items_per_lap)
            state = _resume(ctx, state) if state else _start(ctx)
            if coordinating:
                return parallel.coordinate(ctx, options)
            if remote is not None:
                return parallel.as_worker(ctx, remote, options.items_per_lap)
            return _laps(ctx, state)
        except StartedElsewhere:  # not a stop: the run goes on, joined
            raise
        except (RalphError, KeyboardInterrupt, Interrupted) as stopped:  # on_stop hears of these too
            code = stopped.exit_code if isinstance(stopped, RalphError) else Exit.INTERRUPTED
            status = "error" if isinstance(stopped, RalphError) else "interrupted"
            last = ledger.load(repo.top, name)
            lap = last.laps[-1].number if last and last.laps else 0
            facts = dict(run=name, lap=lap, status=status, reason=str(stopped) or status, exit=int(code))
            lifecycle.fire(cfg.hooks, "on_stop", repo.top, env, **facts)
            raise
        finally:
            if workspace is not None:
                workspace.remove()
            if mcp is not None:
                mcp.close()


def _judge(cfg: config_module.Config) -> Judge | None:
    """roles.judge's model (the agent's when it names none), at temperature 0; checked, not required."""
    role = cfg.roles.judge
    if role is None:
        return None
    endpoint = cfg.role_endpoint(role)
    if endpoint is None:
        raise RalphError(
            "roles.judge needs a model: set roles.judge.model (and base_url, api_key_env), "
            "or use the built-in agent, whose model it then uses"
        )
    endpoint = endpoint.model_copy(update={"temperature": 0.0})
    check_independence(cfg, role, endpoint)
    judge = Judge(role, endpoint)
    judge.check_endpoint()
    return judge


def _sandboxed(repo: git.RepoInfo, cfg: config_module.Config) -> bool:
    """Whether laps run in bubblewrap; `auto` without it says so once and goes on unsandboxed."""
    sandbox.refuse_unsafe_writable(
        cfg.sandbox.writable_paths(), [repo.top.resolve(), repo.common_dir, workspaces_root().parent]
    )
    sandboxed = sandbox.decide(cfg.sandbox.mode)
    if not sandboxed and cfg.sandbox.mode == "auto":
        ui.warn(
            f"laps run without a sandbox: {sandbox.why_unavailable()}. The agent can reach your "
            "repository and files; ralph watches the repository and puts it back (see README, Sandbox)"
        )
    return sandboxed


def _restore_after_crash(repo: git.RepoInfo, name: str) -> None:
    snapshot_file = user_state.saved_at(repo.common_dir, name)
    try:
        before = user_state.UserState.load(snapshot_file)
    except user_state.SnapshotRefused as refused:
        ui.warn(str(refused))
        before = None
    if before is not None:
        user_state.put_back(repo.top, repo.common_dir, before, "the lap a crash interrupted")
    snapshot_file.unlink(missing_ok=True)


def _pinned_config(state: RunState, current: config_module.Config) -> config_module.Config:
    """A run is judged by the configuration it started with, whatever the file says now."""
    pinned = state.record.config
    if pinned != current:
        ui.say(
            "[yellow]note:[/] the config file differs from the configuration this run started with; "
            "the run keeps its own (use --name to start a new run with the file's)"
        )
    return pinned


def _name_for(top: Path, goal: str) -> str:
    """Without --name: the latest unfinished run of the same goal (resume it, whatever day it
    started), else a new name from today's date and the goal's first words."""
    for record in reversed(ledger.run_records(top)):
        if record.config.goal == goal:
            state = ledger.load(top, record.run)
            if state and not state.is_done:
                return record.run
    return default_name(goal)


def default_name(goal: str) -> str:
    words = re.findall(r"[a-z0-9]+", goal.lower())[:4]
    return "-".join([date.today().strftime("%Y%m%d"), *words]) if words else date.today().strftime("%Y%m%d")


def _refuse_bad_start(repo: git.RepoInfo, cfg: config_module.Config, allow_dirty: bool) -> None:
    """What makes the user's HEAD a bad place to start a new run from."""
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
    _refuse_bad_todo(repo, cfg)


def _refuse_unsafe_run(repo: git.RepoInfo, name: str) -> None:
    """What makes laps impossible to commit or to record, new run or resumed."""
    if not git.run(repo.top, "var", "GIT_COMMITTER_IDENT", check=False).ok:
        raise RalphError(
            "git does not know who you are, so laps cannot be committed — "
            "set it with `git config user.name NAME` and `git config user.email EMAIL`"
        )
    elsewhere = git.worktree_branches(repo.top).get(ledger.branch_ref(name))
    if elsewhere is not None:
        raise RalphError(
            f"the run branch ralph/{name} is checked out in {elsewhere} — switch that worktree to another branch first"
        )


def _resume(ctx: RunContext, state: RunState) -> RunState:
    # A remote's run: the lap may be another worker's, alive and about to land it (or taken for
    # dead, its items given to others) — a worker lands only its own laps.
    if ctx.worker is None:
        state = _finish_interrupted_advance(ctx, state)
    _run_started(ctx, state.record.base, state)
    if commit_hooks.to_try(ctx) and not state.is_done:  # before this ralph's first lap too, on the base
        log_dir = ctx.run_dir / "resumed"
        log_dir.mkdir(exist_ok=True)
        ctx.prepare(state.record.base, 0, log_dir)
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


def _start(ctx: RunContext) -> RunState:
    """Baseline checks on the user's HEAD, then the run's refs: base, branch, record (last)."""
    # Refs left by a start that died before its record are this run's own: start over.
    leftover = git.rev(ctx.top, ledger.base_ref(ctx.run_name))
    branch = git.rev(ctx.top, ledger.branch_ref(ctx.run_name))
    if branch not in (None, leftover):
        raise RalphError(
            f"a branch ralph/{ctx.run_name} already exists and is not this run's — pick another name with --name"
        )
    base = ctx.repo.head
    _run_started(ctx, base, None)
    log_dir = ctx.run_dir / "baseline"
    log_dir.mkdir(exist_ok=True)
    _warn_unmatched_patterns(ctx, base)
    _refuse_bad_copy(ctx)
    _refuse_reports_over_tracked_files(ctx, base)
    _warn_outside_environments(ctx)
    ctx.prepare(base, 0, log_dir)
    commit_hooks.try_out(ctx, base, log_dir)
    baseline = ctx.check(log_dir)
    _refuse_unjudged_baseline(baseline, log_dir)
    record = RunRecord(
        run=ctx.run_name,
        created_at=now_iso(),
        base=base,
        user_branch=ctx.repo.branch,
        config=ctx.config,
        baseline=baseline,
        on_remote=ctx.worker is not None,
    )
    refs = {ledger.base_ref(ctx.run_name): (base, leftover), ledger.branch_ref(ctx.run_name): (base, branch)}
    if not ledger.save_record(ctx.top, record, refs):
        if ctx.worker is not None:
            raise StartedElsewhere(f"another worker started run {ctx.run_name} meanwhile: joining it")
        raise RalphError(f"run {ctx.run_name!r} was started by another process at the same time")
    return RunState(ctx.run_name, record, base)


def _warn_unmatched_patterns(ctx: RunContext, base: str) -> None:
    """A `protect` pattern of the user's that matches no file protects nothing: say so once."""
    own = [
        pattern
        for pattern in ctx.config.protect
        if pattern not in config_module.DEFAULT_PROTECT and not pattern.startswith("!")
    ]
    files = git.files_at(ctx.top, base) if own else []
    for pattern in own:
        if not any(True for _ in guard.spec_of([pattern.partition("#")[0]]).match_files(files)):
            ui.warn(f"protect: '{pattern}' matches no file at the run's start")


def _warn_outside_environments(ctx: RunContext) -> None:
    """A setup command that runs a virtualenv's program by its absolute path installs into that
    environment, outside the lap workspace (yours, with the lap's code in it)."""
    for command in ctx.config.setup:
        for word in sandbox.words(command):
            path = Path(word)
            if path.is_absolute() and any((folder / "pyvenv.cfg").is_file() for folder in path.parents):
                ui.warn(
                    f"setup `{command}` runs {word}, of a virtualenv outside the lap workspace: it would "
                    "install the lap's code there — make the environment inside the workspace "
                    "(README: Lap environments)"
                )
                return


def _refuse_reports_over_tracked_files(ctx: RunContext, base: str) -> None:
    """A `junit:` pattern is deleted before each check: one that matches files of the commit
    would change the very tree the checks judge (a fixture `tests/data/config.xml` under `**/*.xml`)."""
    patterns = [check.junit for check in ctx.config.checks if check.junit]
    tracked = git.files_at(ctx.top, base) if patterns else []
    for pattern in patterns:
        found = junit.tracked_matches(tracked, pattern)
        if found:
            raise RalphError(
                f"junit: '{pattern}' matches files git tracks ({', '.join(found[:3])}), which ralph would delete "
                "before each check — name the folder the report is written to (reports/*.xml)"
            )


def _refuse_bad_copy(ctx: RunContext) -> None:
    """`copy` brings in files git does not track: a tracked one would hide the commit's version."""
    paths = ctx.config.copy_
    tracked = git.out(ctx.top, "ls-files", "--", *(f":(literal){path}" for path in paths)) if paths else ""
    if tracked:
        raise RalphError(
            f"copy: {tracked.splitlines()[0]} is tracked by git, so laps already have it — "
            "copy is for untracked files (a .env)"
        )


def _refuse_unjudged_baseline(baseline: list[checks.CheckResult], log_dir: Path) -> None:
    """A check that could not run on the base commit judges nothing: no lap could be held to it,
    so the run does not start. Test files that fail to import there are named (a module missing
    from the environment looks the same as code still to write), and so is a check that fails
    with no per-test results: laps cannot regress it, only "done" waits for it."""
    for index, check in enumerate(baseline, 1):
        if check.could_not_run:
            raise RalphError(
                f"the check `{check.command}` could not run on the base commit: {check.could_not_run} — "
                f"{could_not_run.fix(check.could_not_run)} (its output: {log_dir / f'check-{index}.log'})"
            )
    for check in baseline:
        failing = check.tests.failing_ids if check.tests else []
        broken = [test.removesuffix(f"::{COLLECTION}") for test in failing if test.endswith(f"::{COLLECTION}")]
        if broken:
            missing = re.search(r"No module named '[^']+'", check.output_tail)
            ui.warn(
                f"`{check.command}`: {len(broken)} test file(s) fail to import on the base commit "
                f"({', '.join(broken[:3])}{': ' + missing.group(0) if missing else ''}): they count as failing "
                "until they pass; if it is the environment that lacks a module, add it in `setup:`"
            )
        if not check.passed and check.tests is None:
            ui.warn(
                f"`{check.command}` fails on the base commit and gives no per-test results: laps cannot "
                'regress it, only "done" waits for it — declare the JUnit report it writes (`junit:`) to judge '
                "it test by test (README: Per-test results)"
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


def _finish_interrupted_advance(ctx: RunContext, state: RunState) -> RunState:
    """A lap judged green whose branch update a crash cut off: its checks ran, so advance it."""
    last = state.laps[-1] if state.laps else None
    if last and last.record and last.record.status == "green" and last.record.parent == state.green:
        if git.update_ref(ctx.top, ledger.branch_ref(ctx.run_name), last.commit, state.green):
            state.green = last.commit
    return state


@dataclass
class Outage:
    """The run waits out a model endpoint that fails (a server restarting, a hung one) between
    error laps, backing off, until `budget` seconds of waiting are spent."""

    budget: float
    waited: float = 0.0
    waits: int = 0

    def wait(self) -> None:
        seconds = min(OUTAGE_FIRST_WAIT * 2**self.waits, self.budget - self.waited)
        ui.say(
            f"the model endpoint failed; the next lap starts in {seconds:g}s "
            f"({self.waited:g}s of limits.outage_wait {self.budget:g}s spent)"
        )
        time.sleep(seconds)
        self.waited += seconds
        self.waits += 1


def _laps(ctx: RunContext, state: RunState) -> Exit:
    limits = ctx.config.limits
    started = time.monotonic()
    outage, limit = Outage(limits.outage_wait), LimitWait(limits.limit_wait)
    while True:
        stop = why_stop(ctx, state, started, outage, limit)
        if stop is not None:
            return stopped(ctx, state, *stop)
        last, which = state.last_record(), agent_for(ctx.config, state)
        if _endpoint_failed(last) and last is not None and which == last.fallback:
            outage.wait()
        else:
            outage = Outage(limits.outage_wait)
        if last is not None and last.status == "limited" and which == last.fallback:  # no other agent to turn to
            limit.wait(_limit_wait(last, state.limited_in_a_row()), last.reason)
        number = state.next_lap
        events.emit("lap_started", lap=number, max_laps=limits.max_laps)
        record = run_lap(ctx, state, number, which)
        lap_ended(record)
        facts = dict(run=ctx.run_name, lap=number, status=record.status, reason=record.reason)
        lifecycle.fire(ctx.config.hooks, "on_lap_end", ctx.top, ctx.env, **facts)
        state.laps.append(ledger.Lap(number, record.commit, record))
        if record.status == "green":
            state.green = record.commit


def stopped(ctx: RunContext, state: RunState, code: Exit, reason: str) -> Exit:
    """The run's end, said: the laps table, the last event, the lifecycle hooks."""
    review.laps_table(state)
    for line in [] if code == Exit.DONE else review.what_is_left(ctx.top, state):
        ui.say(f"[yellow]left:[/] {ui.safe(line)}")
    how = "done" if code == Exit.DONE else "fuse"
    events.emit("run_ended", exit=int(code), reason=reason, stopped_by=how, flaky=state.flaky_checks())
    last = state.last_record()
    facts = dict(run=ctx.run_name, lap=last.lap if last else 0, status=code.name.lower(), reason=reason)
    if code == Exit.DONE:
        lifecycle.fire(ctx.config.hooks, "on_done", ctx.top, ctx.env, **facts)
    lifecycle.fire(ctx.config.hooks, "on_stop", ctx.top, ctx.env, **facts, exit=int(code))
    return code


def lap_ended(record: LapRecord) -> None:
    events.emit(
        "lap_ended",
        status=record.status,
        agent=record.agent.name,
        cost_usd=record.agent.usage.cost_usd,
        reason=record.reason,
        duration_s=record.duration_s,
        tokens=record.agent.usage.total if record.agent.usage.requests else None,
        largest_prompt_tokens=record.agent.usage.largest_prompt_tokens,
        files_changed=record.files_changed,
        ticked=record.ticked,
        todo_done=record.todo.done,
        todo_total=record.todo.total,
        commit=record.commit,
    )


LIMIT_FIRST_WAIT, LIMIT_LONGEST_WAIT, LIMIT_MARGIN = 60.0, 1800.0, 1.0


@dataclass
class LimitWait:
    """The run waits out an agent CLI's usage or rate limit (its laps count for nothing), until
    `budget` seconds of waiting are spent."""

    budget: float
    waited: float = 0.0

    def wait(self, seconds: float, reason: str) -> None:
        seconds = max(0.0, min(seconds, self.budget - self.waited))
        until = datetime.now().astimezone() + timedelta(seconds=seconds)
        events.emit("limit_wait", until=until.isoformat(timespec="seconds"), seconds=round(seconds, 1), reason=reason)
        ui.say(f"{ui.safe(reason)}: the next lap starts at {until:%H:%M:%S} (in {seconds:.0f}s)")
        time.sleep(seconds)
        self.waited += seconds


def agent_for(cfg: config_module.Config, state: RunState) -> int:
    """Which of config.agents runs the next lap: the last lap's, or the next one's after the
    last lap was limited or the agent itself failed `fallback_after` laps in a row."""
    records = [lap.record for lap in state.laps if lap.record]
    if not records:
        return 0
    which, after = min(records[-1].fallback, len(cfg.agents) - 1), cfg.agent.fallback_after
    recent = [record for record in records[-after:] if record.fallback == which]
    failing = len(recent) == after and all(record.agent.outcome != "ok" for record in recent)
    if records[-1].status == "limited" or failing:
        return min(which + 1, len(cfg.agents) - 1)
    return which


def _limit_wait(record: LapRecord, in_a_row: int) -> float:
    """Until the reset the tool named (and a moment; a reset that came while ralph was not
    running, none), else 60 s, doubling to 30 min."""
    until = record.agent.limited_until
    if until is not None:
        return max(0.0, until - time.time()) + LIMIT_MARGIN
    return min(LIMIT_FIRST_WAIT * 2 ** min(in_a_row - 1, 10), LIMIT_LONGEST_WAIT)


def _endpoint_failed(record: LapRecord | None) -> bool:
    return record is not None and record.status == "error" and record.agent.endpoint_failed


def why_stop(
    ctx: RunContext, state: RunState, started: float, outage: Outage, limit: LimitWait
) -> tuple[Exit, str] | None:
    limits = ctx.config.limits
    last = state.last_record()
    if last is None and not state.laps and _done_at_base(ctx, state):
        return Exit.DONE, "done: every check passes and every TODO item is ticked at the base"
    done = state.done_record()
    if done is not None:
        return Exit.DONE, f"done at lap {done.lap}: every check passes and every TODO item is ticked"
    if last is not None and _endpoint_failed(last):
        if outage.waited >= outage.budget:
            return Exit.API_ERRORS, (
                f"the model endpoint kept failing through {outage.waited:g}s of waiting "
                f"(limits.outage_wait); the last: {last.reason}"
            )
    elif last is not None and state.errors_in_a_row() >= 3:
        return Exit.API_ERRORS, f"3 agent errors in a row; the last: {last.reason}"
    if last is not None and last.status == "limited" and agent_for(ctx.config, state) == last.fallback:
        wait = _limit_wait(last, state.limited_in_a_row())
        deadline = limits.max_minutes * 60 - (time.monotonic() - started) if limits.max_minutes is not None else None
        if deadline is not None and wait > deadline:
            reason = f"the agent's limit resets after max_minutes ({limits.max_minutes:g}): {last.reason}"
            return Exit.MAX_MINUTES, reason
        if limit.waited + wait > limit.budget:
            return Exit.API_ERRORS, (
                f"the agent is limited, and waiting {wait:.0f}s more would pass limits.limit_wait "
                f"({limit.budget:g}s, {limit.waited:.0f}s spent): {last.reason}"
            )
        if state.limited_laps() > limits.max_laps:
            return Exit.API_ERRORS, f"the agent was limited in {state.limited_laps()} laps, more than max_laps"
    if state.counted_laps() >= limits.max_laps:
        return Exit.MAX_LAPS, f"max_laps ({limits.max_laps}) reached without finishing"
    if state.laps_without_progress() >= limits.stagnation:
        return Exit.STAGNATION, f"{state.laps_without_progress()} laps in a row without progress"
    if limits.max_minutes is not None and time.monotonic() - started >= limits.max_minutes * 60:
        return Exit.MAX_MINUTES, f"max_minutes ({limits.max_minutes:g}) reached"
    if limits.max_tokens is not None and state.tokens_used() >= limits.max_tokens:
        return Exit.MAX_TOKENS, f"max_tokens ({limits.max_tokens}) spent: {state.tokens_used()} used"
    spent, unknown = state.cost_used()
    if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
        return Exit.MAX_TOKENS, f"max_cost_usd ({limits.max_cost_usd:g}) spent: ${spent:.2f} used"
    if limits.max_cost_usd is not None and unknown:  # a lap cut off before its tool reported (a timeout)
        return Exit.MAX_TOKENS, (
            f"max_cost_usd ({limits.max_cost_usd:g}) cannot be kept: {unknown} lap(s) of unknown cost "
            f"(${spent:.2f} known)"
        )
    return None


def _done_at_base(ctx: RunContext, state: RunState) -> bool:
    items = todo.parse(git.show_file(ctx.top, state.green, ctx.config.files.todo))
    return checks.done(state.record.baseline, todo.count(items))
