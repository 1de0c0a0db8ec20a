"""`ralph run`: the run checked and locked, its context made, then this process's part in it
(the laps one at a time, a parallel run's slots, a remote's worker) until it ends."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import NoReturn

from ralph import config as config_module
from ralph import git
from ralph.agents import limiter
from ralph.agents.base import Agent
from ralph.agents.judge import Judge, check_independence
from ralph.agents.kinds import make_agent
from ralph.agents.mcp_tools import McpTools
from ralph.agents.presets import PRESETS
from ralph.errors import Exit, Interrupted, RalphError
from ralph.git import layout, ledger
from ralph.git.ledger import RunState
from ralph.git.records import LapStatus, NewerFormat
from ralph.git.remote import Remote, check_remote
from ralph.isolation import hardening, orphans, proc, sandbox, user_state
from ralph.isolation.workspace import Workspace, workspaces_root
from ralph.run import best_of, ends, parallel, refusals, split, start, workers
from ralph.run.context import RunContext
from ralph.run.ends import RunEnded
from ralph.run.fuses import Fuses, next_turn, say_unsplit
from ralph.run.lap import run_lap
from ralph.run.options import RunOptions
from ralph.show import events, ui, view

RUN_MARK = "RALPH_RUN_MARK"  # in every child's environment: finds orphans of a killed run


def run(options: RunOptions) -> Exit:
    """`ralph run`: its exit code; whatever ends it, the events end with run_ended."""
    # Slots' lines are relayed as they come, marked with their slot: no live view to draw over them.
    side_by_side = options.parallel > 1 or options.best_of is not None
    display = "plain" if side_by_side and options.display == "auto" else options.display
    with view.watching(display, options.events_to):
        try:
            try:
                return _run(options)
            except start.StartedElsewhere as lost:  # the run exists now: join it, with its configuration
                ui.say(str(lost))
                return _run(options)
        except BaseException as stopped:  # the events end with run_ended, whatever ended the run
            ends.failed(stopped)
            raise


def _run(options: RunOptions) -> Exit:
    side_by_side = options.parallel > 1 or options.slot is not None or options.remote is not None
    if options.items_per_lap > 1 and not side_by_side:
        raise RalphError("--items-per-lap is for --parallel runs: a lap of a plain run works on what it chooses")
    repo = git.open_repo(options.cwd)
    cfg = config_module.load(options.config_path or repo.top / config_module.CONFIG_FILE)
    if options.best_of is not None:
        best_of.refuse(options, cfg)
    if options.remote is not None:
        name, remote = _remote(repo, options.remote, options)
        return _run_here(options, repo, cfg, name, remote)
    return _run_here(options, repo, cfg, options.name or start.name_for(repo.top, cfg.goal, options.issue))


def _remote(repo: git.RepoInfo, remote: str, options: RunOptions) -> tuple[str, Remote]:
    """The run, and the remote that keeps its refs: its branch, its refs (but `ralph land`'s
    mark), the notes."""
    if options.name is None:
        raise RalphError("--remote needs --name: every worker must name the same run")
    if options.parallel > 1:
        raise RalphError("--remote runs one worker per clone — for more workers, start more clones")
    check_remote(repo.top, remote)
    name = ledger.check_name(options.name)
    return name, Remote.keeping(remote, [name])


def _run_here(
    options: RunOptions, repo: git.RepoInfo, cfg: config_module.Config, name: str, remote: Remote | None = None
) -> Exit:
    """Run `name`: checked, locked, and this process's part in it."""
    name = ledger.check_name(name)
    slot = options.slot
    events.naming(name, slot)
    refusals.refuse_unsafe_run(repo, name)
    if remote is not None:  # the run as the remote has it, or none yet
        workers.fetch(repo.top, remote, [name])
    if slot is None and ledger.load(repo.top, name) is None:  # a resumed run starts from its green line
        refusals.refuse_bad_start(repo, cfg, options.allow_dirty, from_issue=options.issue is not None)
    run_dir = layout.run_dir(repo.common_dir, name)
    run_dir.mkdir(parents=True, exist_ok=True)
    # A slot of a parallel run locks itself: the ralph that started it holds the run's lock.
    with ledger.run_lock(run_dir if slot is None else run_dir / f"slot-{slot}", name):
        state = ledger.load(repo.top, name)
        refusals.refuse_other_issue(state, options.issue)
        cfg = _config_for(options, cfg, name, state, remote)
        env = _after_an_earlier_ralph(repo, cfg, name, slot)
        with contextlib.ExitStack() as cleanup:  # the workspace removed, then the MCP servers stopped
            try:
                ctx = _context(options, repo, cfg, name, run_dir, env, remote, cleanup)
                return _take_part(ctx, state, options)
            except start.StartedElsewhere:  # not a stop: the run goes on, joined
                raise
            except (RalphError, KeyboardInterrupt, Interrupted) as stopped:  # on_stop hears of these too
                ends.stopped_by(stopped, repo.top, cfg.hooks, name, env)
                raise


def _config_for(
    options: RunOptions, cfg: config_module.Config, name: str, state: RunState | None, remote: Remote | None
) -> config_module.Config:
    """The configuration this process runs `name` with: a resumed run's own, with --max-laps."""
    slot = options.slot
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
            raise NewerFormat(newer)
        cfg = start.pinned_config(state, cfg)
    if options.max_laps is not None:
        cfg.limits.max_laps = options.max_laps
    unknown = cfg.unknown_cost() if cfg.limits.max_cost_usd is not None else None
    if unknown:
        raise RalphError(f"limits.max_cost_usd needs every lap's cost, but {unknown} — add prices or drop the fuse")
    return cfg


def _after_an_earlier_ralph(repo: git.RepoInfo, cfg: config_module.Config, name: str, slot: int | None) -> dict:
    """The run's environment, once whatever a previous ralph of this run left running when it was
    killed is gone, and then whatever its last lap changed in the repository is put back."""
    mark = f"{repo.common_dir}:{name}"
    if slot is None and orphans.kill_marked(RUN_MARK, mark):
        ui.warn(f"stopped processes left running by an earlier `ralph run` of {name}")
    if slot is None:
        _restore_after_crash(repo, name)
    return proc.lap_env(tuple(cfg.env.pass_), extra={RUN_MARK: mark})


def _context(
    options: RunOptions,
    repo: git.RepoInfo,
    cfg: config_module.Config,
    name: str,
    run_dir: Path,
    env: dict[str, str],
    remote: Remote | None,
    cleanup: contextlib.ExitStack,
) -> RunContext:
    """What the laps of this process share: the sandbox decided, the agents and the judge
    checked, the MCP servers and the workspace made (and handed to `cleanup`)."""
    slot = options.slot
    in_sandbox = sandboxed(repo, cfg, side_by_side=options.parallel > 1 or slot is not None, remote=remote)
    limiter.configure(cfg.limits.requests_per_minute)
    judge = _judge(cfg)
    agents = _agents(cfg, env if in_sandbox else None)
    mcp: McpTools | None = None
    # Its slots run the laps, and ask the tools (--parallel's, --best-of's candidates).
    coordinating = (options.parallel > 1 or options.best_of is not None) and slot is None
    if not coordinating and (cfg.mcp.offered_to("agent") or cfg.mcp.offered_to("judge")):
        mcp = McpTools.start(cfg.mcp, repo.top, env, run_dir)
        if mcp is not None:
            cleanup.callback(mcp.close)
    if judge is not None and "judge" in cfg.mcp.roles:
        judge.mcp = mcp
    workspace = Workspace.create(repo.top, repo.common_dir, name if slot is None else parallel.slot_name(name, slot))
    workspace.never_stage(cfg.never_committed)
    cleanup.callback(workspace.remove)
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
        worker=workers.new_name() if remote is not None else None,
        remote=remote,
        whole_job=options.whole_job,
        hidden=options.hide,
    )


def _agents(cfg: config_module.Config, sandboxed_env: dict[str, str] | None) -> tuple[Agent, ...]:
    """config.agents, made; the first one's endpoint must answer, a fallback's (or agent.escalate's) only
    warns. Sandboxed (`sandboxed_env`), a command agent's program must be there inside the sandbox too."""
    # The keys of the built-in agents and the roles reach no agent CLI, whatever its preset reads.
    agents = tuple(make_agent(agent, cfg.kept_from_agent_clis) for agent in cfg.agents)
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
    """This process's part in the run: a slot's laps, or the run started (or resumed) and then
    its slots, this worker's laps of a remote's run, or the laps one at a time. The one place a
    run ends: RunEnded, said (a slot's end is its coordinator's to say)."""
    try:
        if options.slot is not None and best_of.is_candidate():
            best_of.candidate(ctx, options.slot)
        if options.slot is not None:
            parallel.work(ctx, options.slot, options.items_per_lap)
        state = start.resume(ctx, state) if state else start.start(ctx, options.issue)
        if options.best_of is not None and options.slot is None:
            best_of.coordinate(ctx, options)
        elif options.parallel > 1:
            parallel.coordinate(ctx, options)
        elif ctx.remote is not None:
            parallel.as_worker(ctx, options.items_per_lap)
        else:
            _laps(ctx, state)
    except RunEnded as ended:
        return ended.code if options.slot is not None else ends.said(ctx, ended)
    raise AssertionError("a run of laps ends by RunEnded")  # (every branch above raises it)


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


def sandboxed(repo: git.RepoInfo, cfg: config_module.Config, side_by_side: bool, remote: Remote | None) -> bool:
    """Whether laps run in bubblewrap; `auto` without it says so once and goes on unsandboxed,
    but for laps side by side or of a remote's run, which need it."""
    sandbox.refuse_unsafe_writable(
        cfg.sandbox.writable_paths(), [repo.top.resolve(), repo.common_dir, workspaces_root().parent]
    )
    sandboxed = sandbox.decide(cfg.sandbox.mode)
    if not sandboxed and cfg.sandbox.mode == "auto":
        ui.warn(
            f"laps run without a sandbox: {sandbox.why_unavailable()}. The agent can reach your "
            "repository and files; ralph watches the repository and puts it back (docs/sandbox.md)"
        )
    if side_by_side and not sandboxed:
        raise RalphError(
            "--parallel needs laps in the sandbox (bubblewrap): unsandboxed, each slot's lap could "
            "change the repository's refs under the others — install bubblewrap, or run without it"
        )
    if remote is not None and not sandboxed:
        raise RalphError(
            "--remote needs laps in the sandbox (bubblewrap): unsandboxed, a lap's code could read this "
            "clone's credentials and push to the run's refs on the remote — install bubblewrap"
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


def _laps(ctx: RunContext, state: RunState) -> NoReturn:
    """Laps one at a time, each from the last green commit, until the fuses end the run."""
    fuses = Fuses(ctx.config.limits)
    say_unsplit(ctx.config)
    while True:
        fuses.check(ctx, state)
        turn = next_turn(ctx, state)
        fuses.wait_out(state, turn.which)
        number = state.next_lap
        events.emit("lap_started", lap=number, max_laps=ctx.config.limits.max_laps, **turn.said(ctx.config))
        if turn.split is not None:
            record = split.split_lap(ctx, state, number, turn)
        else:
            record = run_lap(ctx, state, number, turn.which, escalated=turn.escalated)
        ends.lap_ended(ctx, record)
        state.laps.append(ledger.Lap(number, record.commit, record))
        if record.status == LapStatus.GREEN:
            state.green = record.commit
