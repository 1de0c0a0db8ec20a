"""The repository's git hooks on lap commits, and the pre-commit cache they run from.

Before lap 1 the hooks are tried once on the run's base commit, in the jail the laps' hooks
get: each hook that can refuse a commit, pre-commit's on every file of the base (each as if
new), the message hooks on the message lap 1's commit would have. A hook that cannot run
(exit 126 or 127, a program missing, pre-commit unable to fetch or install its hook
repository) stops the run before any lap, named; so does one that refuses the message ralph
gives every lap's commit. Each would make every lap red for nothing the agent did.

That try-out is the only phase that writes the shared cache (`workspace.hook_cache`): it runs
only what the user's base commit holds, so what it installs is the user's hooks' own. Every
lap's hooks read that cache and cannot write it (pre-commit uses a store it cannot write as it
is, installing nothing), so no lap leaves a program there for a later lap or run. A lap whose
pre-commit configuration is not the base's gets an empty cache of its own, for that lap only.
"""

from __future__ import annotations

from pathlib import Path

from ralph import git
from ralph.agents.base import AgentResult
from ralph.errors import RalphError
from ralph.isolation import proc
from ralph.isolation.files import remove_path
from ralph.lap.context import RunContext
from ralph.lap.this_lap import ThisLap
from ralph.show import ui
from ralph.verdict import could_not_run, hook_code
from ralph.verdict.commit_hooks import Report, commit_message, read_report
from ralph.workspace.places import hook_cache

LAP_CACHE = "hook-cache"  # in the workspace: a lap's own cache, for a pre-commit configuration of its own
TRY_BRANCH = "ralph-tries-the-hooks"  # unborn: every file of the base is new to the pre-commit hook
# The hooks of a commit that can refuse it, with what git hands each ({message}: the message's file).
REFUSING = (("pre-commit", ()), ("prepare-commit-msg", ("{message}", "message")), ("commit-msg", ("{message}",)))
REJECTED = "the repository's commit hooks rejected the lap"


# --- a lap's commit -------------------------------------------------------------------


def run_on_lap(lap: ThisLap, staged: str, message: str) -> tuple[str, str] | None:
    """`git commit` in the lap's own git dir, on the last green commit, so the repository's hooks
    judge the lap as they would a person's commit; hooks that fix files (formatters) get one
    re-add and retry, as people do by hand. `staged`: the lap's files as a tree. None when the
    hooks accept; else why not, naming the hooks pre-commit names, and their output."""
    ctx, head, log_dir = lap.ctx, lap.state.green, lap.log_dir
    workspace, timeout = ctx.workspace, ctx.config.limits.check_timeout
    cache, writable = _cache_for_lap(ctx, lap.state.record.base, staged)
    env = dict(ctx.env, GIT_EDITOR="true", PRE_COMMIT_HOME=str(cache))
    refusal = (REJECTED, "")
    for attempt in (1, 2):
        workspace.fresh_lap_git(head)
        jail = ctx.jail("commit", writable=writable)
        done = git.run(workspace.tree, "add", "-A", timeout=timeout, check=False, hooks=True, env=env, jail=jail)
        log = log_dir / f"hooks-{attempt}.log"
        if done.ok:
            done = git.run(
                workspace.tree,
                *("commit", "--allow-empty", "-q", "-F", "-"),
                input=message,
                timeout=timeout,
                check=False,
                hooks=True,
                env=env,
                jail=jail,
                spill=log,
            )
        if done.ok:
            return None
        refusal = (_why_refused(done, read_report(log), timeout), done.output or f"exit {done.exit_code}")
    return refusal


def _cache_for_lap(ctx: RunContext, base: str, staged: str) -> tuple[Path, tuple[Path, ...]]:
    """The PRE_COMMIT_HOME of a lap's hooks, and what of it they may write: the shared cache,
    read-only, when the lap's pre-commit configuration is the base's (the try-out installed
    all it names); else an empty one of the lap's own."""
    workspace = ctx.workspace
    folder = workspace.tree / workspace.hooks_path  # (an absolute hooks_path stays itself)
    names = dict.fromkeys([hook_code.DEFAULT_CONFIG, *hook_code.configs(hook_code.installed(folder))])
    if all(git.show_file(ctx.top, base, name) == git.show_file(ctx.top, staged, name) for name in names):
        return hook_cache(ctx.repo.common_dir), ()
    own = workspace.root / LAP_CACHE
    remove_path(own)
    own.mkdir()
    return own, (own,)


def _why_refused(done: proc.Completed, report: Report, timeout: float) -> str:
    if done.timed_out:
        return f"the repository's commit hooks did not finish within limits.check_timeout ({timeout:g}s)"
    if report.error:
        return f"pre-commit could not run on the lap: {report.error}"
    cannot = report.hook_that_could_not_run()
    if cannot:
        return f"the commit hook {cannot[0]} could not run on the lap: {cannot[1]}"
    if report.failed:
        return f"{REJECTED}: {report.ids} failed"
    if report.unrunnable:
        return f"the repository's commit hooks could not run on the lap: {report.unrunnable}"
    return REJECTED


# --- before lap 1 ---------------------------------------------------------------------


def to_try(ctx: RunContext) -> bool:
    """Whether there are hooks to try, before the workspace holds a tree (hooks in the tree, by
    a relative core.hooksPath, may be there)."""
    workspace = ctx.workspace
    return ctx.config.commit.verify and (not Path(workspace.hooks_path).is_absolute() or workspace.has_hooks())


def try_out(ctx: RunContext, base: str, log_dir: Path) -> None:
    """Each hook that can refuse a lap's commit, run once on the base commit where laps commit,
    installing pre-commit's environments into the shared cache; raises RalphError naming a
    hook that cannot run there, or one that refuses the message every lap's commit gets. What
    the hooks changed of the base's files is put back."""
    workspace = ctx.workspace
    if not (ctx.config.commit.verify and workspace.has_hooks()):
        return
    cache = hook_cache(ctx.repo.common_dir)
    cache.mkdir(parents=True, exist_ok=True)
    env = dict(ctx.env, GIT_EDITOR="true", PRE_COMMIT_HOME=str(cache))
    chosen = ctx.config.agents[0]
    model = chosen.model if chosen.kind == "openai" else None
    first = AgentResult(kind=chosen.kind, name=chosen.name, model=model, outcome="ok", duration_s=0)
    message = commit_message(ctx.run_name, 1, [], first)
    for hook, arguments in REFUSING:
        workspace.fresh_lap_git(base)
        if hook == "pre-commit":  # an unborn branch: pre-commit runs its hooks on every file
            (workspace.lap_git / "HEAD").write_text(f"ref: refs/heads/{TRY_BRANCH}\n")
        message_file = workspace.lap_git / "COMMIT_EDITMSG"
        message_file.write_text(message)
        log = log_dir / f"hook-{hook}.log"
        done = git.run(
            workspace.tree,
            *("hook", "run", "--ignore-missing", hook, "--"),
            *(argument.format(message=message_file) for argument in arguments),
            timeout=ctx.config.limits.check_timeout,
            check=False,
            hooks=True,
            env=env,
            jail=ctx.jail("commit", writable=(cache,)),
            spill=log,
        )
        _judge_try(ctx, hook, done, read_report(log), log)
    workspace.checkout(base)


def _judge_try(ctx: RunContext, hook: str, done: proc.Completed, report: Report, log: Path) -> None:
    where = "in the sandbox, where laps commit" if ctx.sandboxed else "where laps commit"
    fix = f"make it run there (docs/sandbox.md), or set `commit.verify: false` (its output: {log})"
    if done.timed_out:
        ui.warn(
            f"the {hook} hook did not finish on the base commit's files within limits.check_timeout "
            f"({ctx.config.limits.check_timeout:g}s); laps' hooks, on their changes, get as long"
        )
        return
    if report.error:
        what = report.setting_up or "its hook repositories"
        raise RalphError(f"pre-commit could not set up {what} {where}: {report.error} — {fix}")
    cannot = report.hook_that_could_not_run()
    if cannot:
        raise RalphError(f"the commit hook {cannot[0]} could not run {where}: {cannot[1]} — {fix}")
    if done.ok:
        return
    exited = done.exit_code in (126, 127)  # (`git hook run` exits with the hook's own code)
    why = could_not_run.reason("", done.exit_code, done.output, None) if exited else report.unrunnable
    if why:
        raise RalphError(f"the {hook} hook could not run {where}: {why} — {fix}")
    if hook != "pre-commit":  # (the base's own files may fail the pre-commit hook: laps fix that)
        said = report.ids or could_not_run.cause(done.output)
        raise RalphError(
            f"the {hook} hook refuses the message ralph gives every lap's commit ({said}) — let it take "
            f"messages with a `Ralph-Run:` trailer, or set `commit.verify: false` (its output: {log})"
        )
