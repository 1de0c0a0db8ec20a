"""`ralph run`: the run checked and locked, its context made, then this process's part in it
(the laps one at a time, a parallel run's slots, a remote's worker) until it ends."""

from __future__ import annotations

import contextlib
import os
import time
from typing import NoReturn

from ralph import config as config_module
from ralph import git
from ralph.agents import limiter
from ralph.agents.base import Agent
from ralph.agents.judge import Judge, check_independence
from ralph.agents.kinds import make_agent
from ralph.agents.mcp_tools import McpTools
from ralph.errors import Exit, Interrupted, RalphError
from ralph.facts.presets import PRESETS
from ralph.git import blobs, layout
from ralph.git.remote import Remote, check_remote
from ralph.isolation import hardening, orphans, proc, sandbox
from ralph.lap import modes, split
from ralph.lap.caller import NEEDS_CALLER, Caller, FreshEach
from ralph.lap.context import RunContext
from ralph.lap.modes import Candidate, Mode, Parallel, Plain, Rounds, Slot, Worker
from ralph.lap.phases import run_lap
from ralph.records import ledger
from ralph.records.formats import LapStatus, NewerFormat
from ralph.records.ledger import RunState
from ralph.run import best_of, ends, parallel, refusals, start, workers
from ralph.run.ends import RunEnded
from ralph.run.fuses import Fuses, next_turn, say_unsplit
from ralph.run.options import RunOptions, mode_of, not_started
from ralph.show import events, ui, view
from ralph.workspace import user_state
from ralph.workspace.places import workspaces_root
from ralph.workspace.workspace import Workspace

RUN_MARK = "RALPH_RUN_MARK"  # in every child's environment: finds orphans of a killed run


def run(options: RunOptions) -> Exit:
    """`ralph run`: its exit code; whatever ends it, the events end with run_ended."""
    try:
        mode = mode_of(options, os.environ)
    except RalphError as refused:
        with view.watching(options.display, options.events_to):
            ends.failed(refused)
        raise
    # Slots' lines are relayed as they come, marked with their slot: no live view to draw over them.
    display = "plain" if mode.coordinates and options.display == "auto" else options.display
    with view.watching(display, options.events_to):
        try:
            try:
                return _run(options, mode)
            except start.StartedElsewhere as lost:  # the run exists now: join it, with its configuration
                ui.say(str(lost))
                return _run(options, mode)
        except BaseException as stopped:  # the events end with run_ended, whatever ended the run
            ends.failed(stopped)
            raise


def _run(options: RunOptions, mode: Mode) -> Exit:
    repo = git.find_repo(options.cwd)  # one git process; GitPython only to say why not
    cfg = options.config or config_module.load(options.config_path or repo.top / config_module.CONFIG_FILE)
    if isinstance(mode, Rounds) and not sandbox.decide(cfg.sandbox.mode):  # refused before anything starts
        raise RalphError(modes.BEST_OF_NEEDS_SANDBOX)
    return _run_here(options, mode, repo, cfg, options.name or start.name_for(repo.top, cfg.goal, options.issue))


def _remote(repo: git.RepoInfo, mode: Mode, name: str) -> Remote | None:
    """The remote that keeps a worker's run: its branch, its refs (but `ralph land`'s mark), the
    notes; None for a run of this clone's own."""
    if not isinstance(mode, Worker):
        return None
    check_remote(repo.top, mode.remote)
    return Remote.keeping(mode.remote, [ledger.check_name(name)])


def _run_here(options: RunOptions, mode: Mode, repo: git.RepoInfo, cfg: config_module.Config, name: str) -> Exit:
    """Run `name`: checked, locked, and this process's part in it."""
    remote = _remote(repo, mode, name)
    name = ledger.check_name(name)
    events.naming(name, mode.slot_number)
    if not mode.checked_at_start:
        refusals.refuse_unsafe_run(repo, name)
    if remote is not None:  # the run as the remote has it, or none yet
        workers.fetch(repo.top, remote, [name])
    if mode.holds_the_run and ledger.load(repo.top, name) is None:  # a resumed run starts from its green line
        refusals.refuse_bad_start(repo, cfg, allow_dirty=options.allow_dirty, from_issue=options.issue is not None)
    run_dir = layout.run_dir(repo.common_dir, name)
    run_dir.mkdir(parents=True, exist_ok=True)
    # A slot of a parallel run locks itself: the ralph that started it holds the run's lock.
    with ledger.run_lock(mode.lock_dir(run_dir), name):
        state = ledger.load(repo.top, name)
        refusals.refuse_other_issue(state, options.issue)
        cfg = _config_for(options, mode, cfg, name, state)
        env = _after_an_earlier_ralph(repo, cfg, name, mode)
        with contextlib.ExitStack() as cleanup:  # the workspace removed, then the MCP servers stopped
            try:
                ctx = _context(options, mode, repo, cfg, name, env, remote, cleanup)
                return _take_part(ctx, state, options)
            except start.StartedElsewhere:  # not a stop: the run goes on, joined
                raise
            except (RalphError, KeyboardInterrupt, Interrupted) as stopped:  # on_stop hears of these too
                ends.stopped_by(stopped, repo.top, cfg.hooks, name, env)
                raise


def _config_for(
    options: RunOptions, mode: Mode, cfg: config_module.Config, name: str, state: RunState | None
) -> config_module.Config:
    """The configuration this process runs `name` with: a resumed run's own, with --max-laps."""
    if isinstance(mode, Slot):  # a candidate too
        if state is None:
            raise RalphError(not_started(name))
        hardening.end_with_parent(mode.parent_pid)
    if state is not None and state.record.on_remote and not mode.on_remote:
        raise RalphError(
            f"run {name} is kept on a git remote, whose refs replace this clone's — "
            f"work on it with `ralph run --remote REMOTE --name {name}`"
        )
    if state is not None:
        newer = next((lap.problem for lap in state.laps if lap.newer), None)
        if newer:
            raise NewerFormat(newer)
        cfg = start.pinned_config(state, cfg)
    if options.max_laps is not None:
        cfg.limits.max_laps = options.max_laps
    unknown = cfg.unknown_cost() if cfg.limits.max_cost_usd is not None else None
    if unknown:
        raise RalphError(f"limits.max_cost_usd needs every lap's cost, but {unknown} — add prices or drop the fuse")
    return cfg


def _after_an_earlier_ralph(repo: git.RepoInfo, cfg: config_module.Config, name: str, mode: Mode) -> dict:
    """The run's environment, once whatever a previous ralph of this run left running when it was
    killed is gone, and then whatever its last lap changed in the repository is put back."""
    mark = f"{repo.common_dir}:{name}"
    if mode.holds_the_run and orphans.kill_marked(RUN_MARK, mark):
        ui.warn(f"stopped processes left running by an earlier `ralph run` of {name}")
    if mode.holds_the_run:
        _restore_after_crash(repo, name)
    return proc.lap_env(tuple(cfg.env.pass_), extra={RUN_MARK: mark})


def _context(
    options: RunOptions,
    mode: Mode,
    repo: git.RepoInfo,
    cfg: config_module.Config,
    name: str,
    env: dict[str, str],
    remote: Remote | None,
    cleanup: contextlib.ExitStack,
) -> RunContext:
    """What the laps of this process share: the sandbox decided, the agents and the judge
    checked, the MCP servers and the workspace made (and handed to `cleanup`)."""
    run_dir = layout.run_dir(repo.common_dir, name)
    in_sandbox = sandboxed(repo, cfg, needed_by=mode.needs_sandbox)
    limiter.configure(cfg.limits.requests_per_minute)
    asks = not mode.checked_at_start
    judge = _judge(cfg, asks=asks)
    agents = _callers_agents(cfg, options.caller) or _agents(cfg, env if in_sandbox else None, asks=asks)
    mcp: McpTools | None = None
    # Its slots run the laps, and ask the tools (--parallel's, --best-of's candidates).
    if not mode.coordinates and (cfg.mcp.offered_to("agent") or cfg.mcp.offered_to("judge")):
        mcp = McpTools.start(cfg.mcp, repo.top, env, run_dir)
        if mcp is not None:
            cleanup.callback(mcp.close)
    if judge is not None and "judge" in cfg.mcp.roles:
        judge.mcp = mcp
    workspace = Workspace.create(repo.top, repo.common_dir, mode.workspace_name(name))
    workspace.never_stage(cfg.never_committed)
    cleanup.callback(workspace.release)
    cleanup.callback(blobs.close_all)  # (ralph used as a library runs on: no reader left per run)
    return RunContext(
        repo=repo,
        run_name=name,
        config=cfg,
        run_dir=run_dir,
        agents=agents,
        env=env,
        workspace=workspace,
        sandboxed=in_sandbox,
        judge=judge,
        mcp=mcp,
        mode=mode,
        remote=remote,
        whole_job=options.whole_job,
        hidden=options.hide,
        caller=options.caller,
    )


def _callers_agents(cfg: config_module.Config, caller: Caller) -> tuple[Agent, ...]:
    """agent.kind python: the caller's agent (ralph.api), made anew for every lap; () for the others."""
    if cfg.agent.kind != "python":
        if caller.agent is not None:
            raise RalphError(
                f"this run's agent is of kind {cfg.agent.kind}: it takes no agent object — start a new run"
            )
        return ()
    if caller.agent is None:
        raise RalphError(NEEDS_CALLER)
    return tuple(FreshEach(caller) for _ in cfg.agents)


def _agents(cfg: config_module.Config, sandboxed_env: dict[str, str] | None, *, asks: bool) -> tuple[Agent, ...]:
    """config.agents, made; `asks`: the first one's endpoint must answer, a fallback's (or
    agent.escalate's) only warns, and sandboxed (`sandboxed_env`), a command agent's program must be
    there inside the sandbox too."""
    # The keys of the built-in agents and the roles reach no agent CLI, whatever its preset reads.
    agents = tuple(make_agent(agent, cfg.kept_from_agent_clis) for agent in cfg.agents)
    if not asks:
        return agents
    agents[0].check_endpoint(time.monotonic() + cfg.limits.lap_timeout)
    first = cfg.agents[0]
    missing = (
        sandbox.missing_inside(first.shell_command, sandboxed_env)
        if sandboxed_env and first.kind == "command"
        else None
    )
    if missing:
        raise RalphError(f"the agent cannot start in the sandbox: {missing}")
    preset = PRESETS.get(first.preset or "") if first.kind == "command" else None
    if sandboxed_env and preset and preset.login and not preset.logged_in_by(os.environ, cfg.kept_from_agent_clis):
        raise RalphError(f"{preset.no_login()} — sandboxed, a lap sees neither your HOME nor your keychain")
    for number, later in enumerate(agents[1:], 1):  # needed only later, if at all: a warning
        try:
            later.check_endpoint(time.monotonic() + cfg.limits.lap_timeout)
        except RalphError as exc:
            named = "agent.escalate" if number == cfg.escalate_index else f"agent.fallback[{number - 1}]"
            ui.warn(f"{named} cannot be used now: {exc}")
    return agents


def _take_part(ctx: RunContext, state: RunState | None, options: RunOptions) -> Exit:
    """This process's part in the run, by its mode: a slot's laps (or a candidate's lap), or the
    run started (or resumed) and then its slots, this worker's laps of a remote's run, or the laps
    one at a time. The one place a run ends: RunEnded, said (a slot's end is its coordinator's to say)."""
    try:
        if ctx.mode.holds_the_run:  # a slot's run was started by its coordinator
            state = start.resume(ctx, state) if state else start.start(ctx, options.issue)
        match ctx.mode:
            case Candidate() as candidate:
                best_of.candidate(ctx, candidate)
            case Slot() as slot:
                parallel.work(ctx, slot.number, slot.items_per_lap)
            case Rounds() as rounds:
                best_of.coordinate(ctx, rounds, options)
            case Parallel() as slots:
                parallel.coordinate(ctx, slots, options)
            case Worker() as worker:
                parallel.as_worker(ctx, worker)
            case Plain():
                assert state is not None  # started above
                _laps(ctx, state)
    except RunEnded as ended:
        return ends.said(ctx, ended) if ctx.mode.holds_the_run else ended.code
    raise AssertionError("a run of laps ends by RunEnded")  # (every branch above raises it)


def _judge(cfg: config_module.Config, *, asks: bool) -> Judge | None:
    """roles.judge's model (the agent's when it names none), at temperature 0; `asks`: its endpoint
    checked (not required to answer)."""
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
    if asks:
        judge.check_endpoint()
    return judge


def sandboxed(repo: git.RepoInfo, cfg: config_module.Config, *, needed_by: str | None = None) -> bool:
    """Whether laps run in bubblewrap; `auto` without it says so once and goes on unsandboxed,
    but for a mode whose laps need it (laps side by side, of a remote's run): `needed_by` says why."""
    sandbox.refuse_unsafe_writable(
        cfg.sandbox.writable_paths(), [repo.top.resolve(), repo.common_dir, workspaces_root().parent]
    )
    sandboxed = sandbox.decide(cfg.sandbox.mode)
    if not sandboxed and cfg.sandbox.mode == "auto":
        ui.warn(
            f"laps run without a sandbox: {sandbox.why_unavailable()}. The agent can reach your "
            "repository and files; ralph watches the repository and puts it back (docs/sandbox.md)"
        )
    if needed_by and not sandboxed:
        raise RalphError(needed_by)
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


def _laps(ctx: RunContext, state: RunState) -> NoReturn:
    """Laps one at a time, each from the last green commit, until the fuses end the run."""
    fuses = Fuses(ctx.config.limits)
    say_unsplit(ctx.config)
    while True:
        fuses.check(ctx, state)
        turn = next_turn(ctx, state)
        fuses.wait_out(state, turn.agent_index)
        events.emit("lap_started", lap=turn.number, max_laps=ctx.config.limits.max_laps, **turn.said(ctx.config))
        record = split.split_lap(ctx, state, turn) if turn.split is not None else run_lap(ctx, state, turn)
        ends.lap_ended(ctx, record)
        state.laps.append(ledger.Lap(turn.number, record.commit, record))
        if record.status == LapStatus.GREEN:
            state.green = record.commit
        ends.told_the_caller(ctx, state, record)
