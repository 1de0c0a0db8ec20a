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
from pathlib import Path
from typing import Any, Literal

from ralph import git
from ralph.bench.build import IDENT, BuiltJob, render
from ralph.bench.results import Result, tokens_of
from ralph.config import CONFIG_FILE, Limits, parse
from ralph.errors import RalphError
from ralph.git import ledger
from ralph.git.records import LapRecord, LapStatus
from ralph.run.loop import run
from ralph.run.options import RunOptions
from ralph.show import view
from ralph.verdict.checks import CheckResult

Mode = Literal["laps", "session"]
MODES: tuple[Mode, ...] = ("laps", "session")
BUDGETED = ("agent", "limits", "prices", "env", "sandbox")  # what a bench config gives the jobs


def budget(settings: dict[str, Any], mode: Mode) -> dict[str, Any]:
    """The job's ralph.yaml settings for `mode`: laps as given; session the laps' total in one lap."""
    if mode == "laps":
        return settings
    limits = Limits.model_validate(settings.get("limits") or {})
    agent = dict(settings["agent"])
    laps = limits.max_laps
    agent["max_turns"] = laps * int(agent.get("max_turns") or 60)
    session_limits = dict(settings.get("limits") or {}, max_laps=1, lap_timeout=laps * limits.lap_timeout)
    return dict(settings, agent=agent, limits=session_limits)


def run_job(
    repo: Path, job: BuiltJob, settings: dict[str, Any], mode: Mode, display: view.Display, keep: Path | None
) -> Result:
    """Run `job` (its cached repository `repo`) once in `mode`; `keep`: the clone is left in that folder."""
    folder = keep or Path(tempfile.mkdtemp(prefix="ralph-bench-"))
    clone = folder / f"{job.name}-{mode}"
    try:
        if clone.exists():
            raise RalphError(f"bench: {clone} is there already — give --keep a new folder")
        folder.mkdir(parents=True, exist_ok=True)
        git.run(folder, "clone", "-q", str(repo), str(clone))
        _configure(clone, job, budget(settings, mode), mode)
        started = time.monotonic()
        code = run(RunOptions(cwd=clone, name=f"bench-{mode}", display=display, whole_job=mode == "session"))
        wall = time.monotonic() - started
        state = ledger.load(clone, f"bench-{mode}")
        return _result(job, mode, state, wall, int(code))
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def config_text(goal: str, checks: list[str], settings: dict[str, Any]) -> str:
    """A job's ralph.yaml with the bench's settings, checked: a wrong key is named before any run."""
    text = json.dumps({"goal": goal, "checks": checks, **settings}, indent=2) + "\n"
    parse(text, "the bench's configuration")
    return text


def _configure(clone: Path, job: BuiltJob, settings: dict[str, Any], mode: Mode) -> None:
    (clone / CONFIG_FILE).write_text(config_text(job.goal, [render(check) for check in job.checks], settings))
    git.run(clone, "config", "user.name", IDENT["GIT_AUTHOR_NAME"])
    git.run(clone, "config", "user.email", IDENT["GIT_AUTHOR_EMAIL"])
    git.run(clone, "commit", "-q", "--no-verify", "-am", f"bench: the agent and the {mode} mode's budget")


def _result(job: BuiltJob, mode: Mode, state: ledger.RunState | None, wall: float, code: int) -> Result:
    records = [lap.record for lap in (state.laps if state else []) if lap.record is not None]
    baseline = state.record.baseline if state else []
    scored, finished = _scored(mode, state, records)
    curve, passing, spent = [(0, _passing(baseline, job))], _passing(baseline, job), 0
    for record in records:
        spent += record.agent.usage.total
        if record.status == LapStatus.GREEN or mode == "session":
            passing = _passing(record.checks, job)
        curve.append((spent, passing))
    todo = scored.todo if scored is not None else None
    return Result(
        job=job.name,
        mode=mode,
        finished=finished,
        tests_passed=_passing(scored.checks if scored else baseline, job),
        tests_total=job.tests_total,
        items_done=todo.done if todo else 0,
        items_total=len(job.items),
        tokens=tokens_of([record.agent.usage for record in records]),
        requests=sum(record.agent.usage.requests for record in records),
        wall_s=round(wall, 2),
        laps=len(records),
        red_laps=sum(record.status == LapStatus.RED for record in records),
        exit_code=code,
        curve=curve,
        largest_per_lap=[record.agent.usage.largest_prompt_tokens for record in records],
    )


def _scored(mode: Mode, state: ledger.RunState | None, records: list[LapRecord]) -> tuple[LapRecord | None, bool]:
    """The lap whose tree is scored, and whether it finished the job. laps: the green tip, what
    ralph hands the user; session: its one lap, green or red, what one session leaves behind."""
    if state is None or not records:
        return None, False
    if mode == "laps":
        tip = next((record for record in reversed(records) if record.commit == state.green), None)
        return tip, state.is_done
    last = records[-1]
    return last, all(check.passed for check in last.checks) and last.todo.open == 0


def _passing(checks: list[CheckResult], job: BuiltJob) -> int:
    """The package's tests passing in the job's test check, at most as many as the finished job passes."""
    tests = checks[0].tests if checks else None
    return min(tests.counts.passed, job.tests_total) if tests else 0
