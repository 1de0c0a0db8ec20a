"""`ralph log`: the laps of a run, a row each."""

from __future__ import annotations

from pathlib import Path

from ralph import git
from ralph.errors import Exit
from ralph.records import ledger
from ralph.run.summary import laps_table
from ralph.show import ui


def log(cwd: Path, run: str | None, *, as_json: bool) -> Exit:
    top = git.find_repo(cwd).top
    state = ledger.resolve(top, run)
    if as_json:
        ui.print_json(
            {
                "run": state.name,
                "issue": state.record.issue.model_dump() if state.record.issue else None,
                "green": state.green,
                "laps": [
                    lap.record.model_dump(mode="json")
                    if lap.record
                    else {"lap": lap.number, "commit": lap.commit, "problem": lap.problem}
                    for lap in state.laps
                ],
            }
        )
        return Exit.DONE
    issue = state.record.issue
    of_issue = f"  issue #{issue.number} ({ui.safe(issue.url)})" if issue is not None else ""
    ui.say(f"run [bold]{state.name}[/]  green {state.green[:10]}  base {state.record.base[:10]}{of_issue}")
    laps_table(state)
    _say_stuck(state)
    return Exit.DONE


def _say_stuck(state: ledger.RunState) -> None:
    """The laps on stuck items (docs/agents.md: Stuck items): escalated ones, and splits."""
    for lap in state.laps:
        record = lap.record
        if record is not None and record.escalated:
            ui.say(f"lap {record.lap}: escalated to {ui.safe(record.agent.name)}")
        if record is not None and record.split is not None:
            ui.say(f"lap {record.lap}: split {ui.safe(record.split)} ({ui.status_text(record.status)})")
