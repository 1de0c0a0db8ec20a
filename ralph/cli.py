"""The command line: click declarations only; each command calls one function for its exit code, and imports it
(rich too) when it runs: `ralph --help`, completion and the git hooks ralph ships, run on every commit, start light."""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import click

from ralph.errors import Exit, Interrupted, RalphError
from ralph.facts.presets import PRESETS
from ralph.show.error_line import said  # rich loads when a command prints: not for --help, completion, a kept answer


def _run_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of --run: the runs of the repository here."""
    from ralph import git
    from ralph.records import ledger

    try:
        names = ledger.run_names(git.find_repo(Path.cwd()).top)
    except RalphError:
        return []
    return [name for name in names if name.startswith(incomplete)]


RUN_OPTION = click.option(
    "--run", "run_name", metavar="NAME", help="The run (default: the most recent).", shell_complete=_run_names
)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    raise Interrupted()


RESUMES = "interrupted — the run branch is where the last green lap left it; the same `ralph run` resumes"


def _call(function: Callable[..., int], *args: Any, interrupted: str = RESUMES, **kwargs: Any) -> None:
    """The one place where errors become messages and exit codes; `interrupted`: what Ctrl-C means."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = function(*args, **kwargs)
    except RalphError as exc:
        code = said(str(exc), exc.exit_code)
    except (KeyboardInterrupt, Interrupted):
        code = said(interrupted, Exit.INTERRUPTED)
    except Exception as error:
        code = said(_crashed(error), Exit.ERROR)
    sys.exit(int(code))


def _crashed(error: Exception) -> str:
    """A bug in ralph: the versions and traceback to the crash log; the one line naming it for stderr."""
    from ralph.commands import crash_log  # only on a crash: it loads git, which --help need not

    path = crash_log.write(error, Path.cwd(), sys.argv)
    if path is None:  # no folder took the log: the traceback is all the report has
        traceback.print_exception(error, file=sys.stderr)
    where = f"the versions and traceback are in {path}" if path else "no folder took the crash log"
    return f"internal error (a bug in ralph): {crash_log.headline(error)} — {where}; please report it"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="git-ralph")
def main() -> None:
    """Run long coding jobs as fresh agent laps, judged by the repository's own checks."""


@main.command()
@click.option(
    "--agent",
    "preset",
    type=click.Choice(list(PRESETS)),
    default="claude",
    show_default=True,
    help="The agent CLI the laps run (a preset).",
)
def init(preset: str) -> None:
    """Write a commented ralph.yaml, TODO.md and PROGRESS.md (never overwrites)."""
    from ralph.commands.init import init as do_init

    _call(do_init, Path.cwd(), preset)


@main.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Config file (default: ralph.yaml).")
@click.option("--name", help="Run name; an existing run is resumed.")
@click.option("--max-laps", type=click.IntRange(min=1), help="Override limits.max_laps.")
@click.option("--allow-dirty", is_flag=True, help="Start even with uncommitted changes (laps will not see them).")
@click.option(
    "--plain", "display", flag_value="plain", help="Plain lines, no escape codes (the default off a terminal)."
)
@click.option("--quiet", "display", flag_value="quiet", help="Only the result (warnings and errors still on stderr).")
@click.option(
    "--events", "events_to", metavar="FILE", help="Append one JSON object a line per event to FILE (-: stdout)."
)
@click.option(
    "--parallel", type=click.IntRange(min=1), default=1, help="Laps side by side, each on TODO items of its own."
)
@click.option("--items-per-lap", type=click.IntRange(min=1), default=1, help="--parallel: items a lap claims.")
@click.option("--slot", type=click.IntRange(min=1), hidden=True)  # a worker of a --parallel run, started by it
@click.option(
    "--remote",
    metavar="REMOTE",
    help="Be one worker of a run this git remote keeps (needs --name; docs/parallel.md: Many machines).",
)
@click.option(
    "--issue", type=click.IntRange(min=1), metavar="N", help="The goal and checklist from GitHub issue N (via gh)."
)
@click.option(
    "--best-of",
    type=click.IntRange(min=2),
    metavar="N",
    help="N candidate laps on the same item side by side; the best one lands (docs/parallel.md: Best of N).",
)
def run(
    config_path: Path | None,
    name: str | None,
    max_laps: int | None,
    allow_dirty: bool,
    display: str | None,
    events_to: str | None,
    parallel: int,
    items_per_lap: int,
    slot: int | None,
    remote: str | None,
    issue: int | None,
    best_of: int | None,
) -> None:
    """Lap until done or a fuse blows. Exit: 0 done, 1 error, 3 max laps, 4 stagnation,
    5 time spent, 6 agent unusable, 7 budget spent, 130 interrupted."""
    from ralph.commands.run import run as do_run
    from ralph.run.options import RunOptions
    from ralph.show import ui
    from ralph.show.view import plain_consoles

    options = RunOptions(
        cwd=Path.cwd(),
        config_path=config_path,
        name=name,
        max_laps=max_laps,
        allow_dirty=allow_dirty,
        display=display or "auto",  # type: ignore[arg-type]
        events_to=events_to,
        parallel=parallel,
        items_per_lap=items_per_lap,
        slot=slot,
        remote=remote,
        issue=issue,
        best_of=best_of,
    )
    # --plain holds for every line, the error that may end the run included.
    plain = ui.using(*plain_consoles()) if display == "plain" else nullcontext()
    with plain:
        _call(do_run, options)


@main.command()
@click.argument("goal", required=False)
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Config file (default: ralph.yaml).")
@click.option("--yes", is_flag=True, help="Write TODO.md without asking.")
@click.option("--force", is_flag=True, help="Replace a TODO.md that already has items.")
@click.option("--new", "anew", is_flag=True, help="Plan anew, even when a plan for this goal is waiting.")
@click.option(
    "--issue", type=click.IntRange(min=1), metavar="N", help="The goal from GitHub issue N (via gh), its task list too."
)
def plan(goal: str | None, config_path: Path | None, yes: bool, force: bool, anew: bool, issue: int | None) -> None:
    """Turn the goal (ralph.yaml's, or GOAL) into TODO.md with the planner: roles.planner's model,
    else the agent itself, reading the repository at HEAD."""
    from ralph.commands.plan import PlanOptions
    from ralph.commands.plan import plan as do_plan

    options = PlanOptions(goal=goal, config=config_path, yes=yes, force=force, anew=anew, issue=issue)
    _call(do_plan, Path.cwd(), options)


@main.command()
@click.argument("message")
@RUN_OPTION
@click.option("--remote", metavar="REMOTE", help="Tell a run this git remote keeps (`ralph run --remote`).")
def tell(message: str, run_name: str | None, remote: str | None) -> None:
    """Leave MESSAGE for the run's next lap (shown once in its prompt, under "From the user")."""
    from ralph.commands.tell import tell as do_tell

    _call(do_tell, Path.cwd(), message, run_name, remote)


@main.command()
@RUN_OPTION
@JSON_OPTION
def log(run_name: str | None, as_json: bool) -> None:
    """One row a lap: status, reason, duration, files changed, TODO."""
    from ralph.commands.answers import log as do_log  # a kept answer, else ralph.commands.log

    _call(do_log, Path.cwd(), run_name, as_json=as_json)


@main.command()
@click.argument("lap", type=int)
@RUN_OPTION
@JSON_OPTION
def show(lap: int, run_name: str | None, as_json: bool) -> None:
    """A lap's record, diffstat and check output."""
    from ralph.commands.answers import show as do_show  # a kept answer, else ralph.commands.show

    _call(do_show, Path.cwd(), lap, run_name, as_json=as_json)


@main.command()
@RUN_OPTION
@JSON_OPTION
@click.option("--remote", metavar="REMOTE", help="The run as this git remote has it, its workers too.")
def status(run_name: str | None, as_json: bool, remote: str | None) -> None:
    """Last green, laps used, fuses, done or not."""
    from ralph.commands.answers import status as do_status  # a kept answer, else ralph.commands.status

    _call(do_status, Path.cwd(), run_name, as_json=as_json, remote=remote)


@main.command()
@RUN_OPTION
@click.option(
    "-o", "--output", metavar="FILE", help="Where to write it (-: stdout; default: report.html in the run's folder)."
)
def report(run_name: str | None, output: str | None) -> None:
    """One self-contained HTML page of the run: outcome, timeline, tokens, every lap and its diff."""
    from ralph.commands.report import report as do_report

    _call(do_report, Path.cwd(), run_name, output)


@main.command()
@RUN_OPTION
@click.option("--squash", "how", flag_value="squash", default=True, help="One commit (default).")
@click.option("--merge", "how", flag_value="merge", help="A merge commit keeping every lap.")
@click.option("--rebase", "how", flag_value="rebase", help="Every green lap replayed onto your branch.")
@click.option("--partial", is_flag=True, help="Land a run that is not done yet.")
@click.option("--pr", is_flag=True, help="Instead: push the green line and open a pull request (via gh).")
@click.option("--draft", is_flag=True, help="--pr: open it as a draft (a run not done needs --partial or this).")
@click.option("--remote", metavar="REMOTE", default="origin", show_default=True, help="--pr: where to push.")
def land(run_name: str | None, how: str, partial: bool, pr: bool, draft: bool, remote: str) -> None:
    """Bring the green line onto your current branch (refuses a dirty work tree, a run that
    is not done without --partial, and a branch that moved since the run began unless --rebase);
    with --pr, onto a pull request instead."""
    from ralph.commands.land import land as do_land
    from ralph.commands.land import land_pr

    if pr:
        _call(land_pr, Path.cwd(), run_name, partial=partial, draft=draft, remote=remote)
    else:
        if draft:
            raise click.UsageError("--draft is for --pr")
        _call(do_land, Path.cwd(), run_name, how, partial=partial)


@main.command()
@click.option(
    "--run", "run_name", metavar="NAME", help="Only this run (default: every run).", shell_complete=_run_names
)
@JSON_OPTION
@click.option("--remote", metavar="REMOTE", help="The runs this git remote keeps, too.")
def stats(run_name: str | None, as_json: bool, remote: str | None) -> None:
    """The runs of this repository compared: per run and per agent, laps, green share, items,
    tests, tokens, cost, time, and time and tokens per finished item."""
    from ralph.commands.stats import stats as do_stats

    _call(do_stats, Path.cwd(), run_name, as_json=as_json, remote=remote)


@main.command()
@RUN_OPTION
@click.option("--refs", is_flag=True, help="Also delete the run's refs, branch, notes and logs.")
def clean(run_name: str | None, refs: bool) -> None:
    """Remove a run's workspace (and with --refs, everything of it)."""
    from ralph.commands.clean import clean as do_clean

    _call(do_clean, Path.cwd(), run_name, refs=refs)


@main.command()
@click.option("--agent", "ask_agent", is_flag=True, help="Also send the agent one tiny request, as a lap would.")
def doctor(ask_agent: bool) -> None:
    """What this machine and repository give a run: the sandbox, git, each check tried once on HEAD, the agent."""
    from ralph.commands.doctor import doctor as do_doctor

    _call(do_doctor, Path.cwd(), ask_agent=ask_agent)


@main.command()
@click.argument("folder", required=False, type=click.Path(path_type=Path))
@click.option("--model", help="Run the sample against this model instead of the scripted one.")
@click.option("--base-url", help="The OpenAI-compatible endpoint serving --model.")
@click.option("--max-laps", type=click.IntRange(min=1), default=8, show_default=True, help="Laps in the run.")
@click.option(
    "--lap-timeout",
    type=click.FloatRange(min=1),
    default=600,
    show_default=True,
    help="Seconds for the agent part of one lap.",
)
@click.option("--max-turns", type=click.IntRange(min=1), default=60, show_default=True, help="Model calls per lap.")
def demo(
    folder: Path | None,
    model: str | None,
    base_url: str | None,
    max_laps: int,
    lap_timeout: float,
    max_turns: int,
) -> None:
    """Create a sample repository in FOLDER (default: a new temp folder) and run real laps on it."""
    from ralph.commands.demo import DemoLimits
    from ralph.commands.demo import demo as do_demo

    _call(do_demo, folder, model, base_url, DemoLimits(max_laps, lap_timeout, max_turns))


@main.command()
@click.option("--list", "listing", is_flag=True, help="Name the jobs (their package, items and tests) and stop.")
@click.option("--jobs", "job_names", metavar="NAME,...", help="Only these jobs (default: all).")
@click.option("--mode", type=click.Choice(["laps", "session", "both"]), default="both", show_default=True)
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="A ralph.yaml naming the agent.")
@click.option("--scripted", is_flag=True, help="ralph's scripted model, offline: it tests the harness, not a model.")
@click.option("--json", "json_to", type=click.Path(path_type=Path), help="Write the results as JSON here.")
@click.option("--html", "html_to", type=click.Path(path_type=Path), help="Write the results as a page here.")
@click.option("--keep", type=click.Path(path_type=Path), help="Leave each job's clone, with its run, in this folder.")
@click.option("--quiet", is_flag=True, help="Print only the results, not the runs' laps.")
def bench(
    listing: bool,
    job_names: str | None,
    mode: str,
    config_path: Path | None,
    scripted: bool,
    json_to: Path | None,
    html_to: Path | None,
    keep: Path | None,
    quiet: bool,
) -> None:
    """Fresh laps against one long session, same agent and budget, on jobs built from real packages."""
    from ralph.commands.bench import BenchOptions, list_jobs
    from ralph.commands.bench import bench as do_bench

    if listing:
        _call(list_jobs)
        return
    options = BenchOptions(
        jobs=job_names,
        mode=mode,
        config=config_path,
        scripted=scripted,
        json_to=json_to,
        html_to=html_to,
        keep=keep,
        display="quiet" if quiet else "auto",
    )
    _call(do_bench, options, interrupted="bench interrupted: no results written; its clones are gone (--keep: left)")


@main.group()
def hook() -> None:
    """Git hooks ralph ships (see hooks/ in ralph's repository)."""


@hook.command("todo")
@click.option("--todo", "todo_name", default="TODO.md", show_default=True, help="The checklist file.")
def hook_todo(todo_name: str) -> None:
    """Pre-commit: refuse deleting or rewording open TODO items."""
    from ralph.commands.hook import todo_hook

    _call(todo_hook, Path.cwd(), todo_name)


@hook.command("progress")
@click.option("--progress", "progress_name", default="PROGRESS.md", show_default=True, help="The handoff file.")
@click.option("--max-chars", default=8000, show_default=True, help="Its budget, in characters.")
def hook_progress(progress_name: str, max_chars: int) -> None:
    """Pre-commit: refuse a PROGRESS.md over its size budget."""
    from ralph.commands.hook import progress_hook

    _call(progress_hook, Path.cwd(), progress_name, max_chars)


@hook.command("guard")
def hook_guard() -> None:
    """Pre-commit: refuse a commit on a ralph/* branch made outside a lap."""
    from ralph.commands.hook import guard_hook

    _call(guard_hook, Path.cwd())
