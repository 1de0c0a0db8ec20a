"""`ralph log`: the laps of a run, a row each."""

from __future__ import annotations

from pathlib import Path

from ralph import git
from ralph.errors import Exit
from ralph.git import ledger
from ralph.run.summary import laps_table
from ralph.show import ui


def log(cwd: Path, run: str | None, as_json: bool) -> Exit:
    top = git.open_repo(cwd).top
    state = ledger.resolve(top, run)
    if as_json:
        ui.print_json(
            {
                "run": state.name,
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
    ui.say(f"run [bold]{state.name}[/]  green {state.green[:10]}  base {state.record.base[:10]}")
    laps_table(state)
    return Exit.DONE
