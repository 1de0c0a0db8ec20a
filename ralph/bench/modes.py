"""One job in one mode: a fresh clone of the job's repository, its ralph.yaml given the agent
and the mode's budget, `ralph run` in-process, and the result read back from the run's refs.

laps: `ralph run` as users run it, with the limits of the user's config.
session: the same agent given the whole job as one lap, with the budget the laps had in total:
`max_laps × max_turns` model calls, `max_laps × lap_timeout` seconds (a command agent's one
invocation gets that time), and no handoff; the same checks judge it at the end."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ralph import git
from ralph.bench.build import IDENT, BuiltJob, entries, render
from ralph.bench.results import Result, token_totals
from ralph.bench.score import Scored, passing, score
from ralph.config import CONFIG_FILE, Limits, parse
from ralph.config.agent import AgentConfig
from ralph.errors import RalphError
from ralph.records import ledger
from ralph.records.formats import LapRecord, LapStatus
from ralph.run.loop import run
from ralph.run.options import RunOptions
from ralph.show import view

Mode = Literal["laps", "session"]
MODES: tuple[Mode, ...] = ("laps", "session")
BUDGETED = ("agent", "limits", "prices", "env", "sandbox")  # what a bench config gives the jobs


@dataclass(frozen=True)
class JobRun:
    """How the bench runs each job: how the run shows, where clones stay, what laps must not see."""

    display: view.Display = "auto"
    keep: Path | None = None  # --keep: each clone, with its run's refs, is left in this folder
    hide: tuple[Path, ...] = ()  # the bench's cache: the answers, the packages' originals


def budget(settings: dict[str, Any], mode: Mode) -> dict[str, Any]:
    """The job's ralph.yaml settings for `mode`: laps as given; session the laps' total in one
    lap: their model calls, their time and their rounds of red checks shown, each agent's
    (fallbacks' too)."""
    if mode == "laps":
        return settings
    limits = Limits.model_validate(settings.get("limits") or {})
    laps = limits.max_laps

    def whole(agent: dict[str, Any]) -> dict[str, Any]:
        given = AgentConfig.model_validate({key: value for key, value in agent.items() if key != "fallback"})
        scaled = dict(agent, max_turns=laps * given.max_turns, fix_attempts=laps * given.fix_attempts)
        if agent.get("fallback"):
            scaled["fallback"] = [whole(fallback) for fallback in agent["fallback"]]
        return scaled

    session_limits = dict(settings.get("limits") or {}, max_laps=1, lap_timeout=laps * limits.lap_timeout)
    return dict(settings, agent=whole(settings["agent"]), limits=session_limits)


def run_job(repo: Path, job: BuiltJob, settings: dict[str, Any], mode: Mode, options: JobRun) -> Result:
    """Run `job` (its cached repository `repo`) once in `mode`, then score what it left."""
    folder = options.keep or Path(tempfile.mkdtemp(prefix="ralph-bench-"))
    clone = folder / f"{job.name}-{mode}"
    try:
        if clone.exists():
            raise RalphError(f"bench: {clone} is there already — give --keep a new folder")
        folder.mkdir(parents=True, exist_ok=True)
        git.run(folder, "clone", "-q", str(repo), str(clone))
        _configure(clone, job, budget(settings, mode), mode)
        started = time.monotonic()
        run_options = RunOptions(
            cwd=clone, name=f"bench-{mode}", display=options.display, whole_job=mode == "session", hide=options.hide
        )
        code = run(run_options)
        wall = time.monotonic() - started
        state = ledger.load(clone, f"bench-{mode}")
        if state is None:
            raise RalphError(f"bench: {job.name}'s {mode} run left no record — see `ralph log` in {clone}")
        records = [lap.record for lap in state.laps if lap.record is not None]
        scored = _scored_lap(mode, state, records)
        commit = scored.commit if scored is not None and scored.commit else state.green
        verdict = score(clone, _as_the_job_judges(clone, commit, scored), job)
        return _result(job, mode, state, records, scored, verdict, wall, int(code))
    finally:
        if options.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def config_text(goal: str, checks: list[str], settings: dict[str, Any]) -> str:
    """A job's ralph.yaml with the bench's settings, checked: a wrong key is named before any run."""
    text = json.dumps({"goal": goal, "checks": entries(checks), **settings}, indent=2) + "\n"
    parse(text, "the bench's configuration")
    return text


def _configure(clone: Path, job: BuiltJob, settings: dict[str, Any], mode: Mode) -> None:
    (clone / CONFIG_FILE).write_text(config_text(job.goal, [render(check) for check in job.checks], settings))
    git.run(clone, "config", "user.name", IDENT["name"])
    git.run(clone, "config", "user.email", IDENT["email"])
    git.run(clone, "commit", "-q", "--no-verify", "-am", f"bench: the agent and the {mode} mode's budget")


def _result(
    job: BuiltJob,
    mode: Mode,
    state: ledger.RunState,
    records: list[LapRecord],
    scored: LapRecord | None,
    verdict: Scored,
    wall: float,
    code: int,
) -> Result:
    start = passing(state.record.baseline, job)
    curve, tests, spent = [(0, start)], start, 0
    for record in records:  # between the start and the end, the laps' own checks
        spent += record.agent.usage.total
        tests = passing(record.checks, job) if record.status == LapStatus.GREEN else tests
        curve.append((spent, tests))
    if len(curve) > 1:
        curve[-1] = (spent, verdict.tests_passed)  # the end: the bench's own verdict
    green = mode == "laps" or (scored is not None and scored.status == LapStatus.GREEN)
    finished = green and verdict.checks_pass and verdict.items_open == 0 and verdict.tests_passed == job.tests_total
    return Result(
        job=job.name,
        mode=mode,
        finished=finished and not verdict.not_judged,
        not_judged=verdict.not_judged,
        tests_passed=verdict.tests_passed,
        tests_total=job.tests_total,
        tests_at_start=start,
        items_done=len(job.items) - verdict.items_open,
        items_total=len(job.items),
        tokens=token_totals([record.agent.usage for record in records]),
        requests=sum(record.agent.usage.requests for record in records),
        wall_s=round(wall, 2),
        laps=len(records),
        red_laps=sum(record.status == LapStatus.RED for record in records),
        exit_code=code,
        curve=curve,
        largest_per_lap=[record.agent.usage.largest_prompt_tokens for record in records],
    )


def _as_the_job_judges(clone: Path, commit: str, scored: LapRecord | None) -> str:
    """The commit to score: a red session lap that changed what judges it (the tests, their
    configuration, the job's own checks) is scored by them as they were, not by its versions."""
    if scored is None or not scored.protected_touched:
        return commit
    files = {path: git.show_file(clone, scored.parent, path) for path in scored.protected_touched}
    tree = git.with_files(clone, f"{commit}^{{tree}}", files)
    return git.commit_tree(clone, tree, commit, "bench: what judges the job, as the job had it")


def _scored_lap(mode: Mode, state: ledger.RunState, records: list[LapRecord]) -> LapRecord | None:
    """The lap whose tree is scored. laps: the green tip, what ralph hands the user (None: the
    base); session: its one lap, green or red, what one session leaves behind."""
    if mode == "laps":
        return next((record for record in reversed(records) if record.commit == state.green), None)
    return records[-1] if records else None
