"""A run's standing, as `ralph log`, `ralph status`, `ralph land` and the end of `ralph run` say it."""

from __future__ import annotations

from pathlib import Path

from ralph import git, todo
from ralph.git.ledger import Lap, RunState
from ralph.show import ui

LOG_OTHER_COLUMNS = 44  # the width of the laps table's columns but the reason, which is cut to fit the rest


def what_is_left(top: Path, state: RunState) -> list[str]:
    """What stands between the green tip and done: each failing check (since which lap) and
    the open TODO items, a line each."""
    lines = [
        f"`{command}` fails (since {'the base' if since == 0 else f'lap {since}'})"
        for command, since in state.still_failing().items()
    ]
    items = todo.parse(git.show_file(top, state.green, state.record.config.files.todo))
    still_open = [item.text for item in items if not item.done]
    if still_open:
        shown = "; ".join(still_open[:3]) + (f" and {len(still_open) - 3} more" if len(still_open) > 3 else "")
        lines.append(f"{len(still_open)} TODO item(s) open: {shown}")
    return lines


def laps_table(state: RunState) -> None:
    """A lap a line, its reason cut to the terminal's width (`ralph show` has it whole); TODO
    is done/all after the lap, +N the items it ticked. Also the end of `ralph run`'s output."""
    width = max(20, ui.console.width - LOG_OTHER_COLUMNS)
    slots = any(lap.record and lap.record.slot is not None for lap in state.laps)  # a parallel run
    rows = [_row(lap, slots, width) for lap in state.laps]
    ui.table(["lap", "status", "time", "tokens", "files", "TODO", "reason"], rows)


def _row(lap: Lap, slots: bool, width: int) -> list[str]:
    r = lap.record
    if r is None:
        return [str(lap.number), "?", "", "", "", "", ui.safe(ui.one_line(lap.problem, width))]
    return [
        f"{r.lap} (slot {r.slot})" if slots and r.slot is not None else str(r.lap),
        ui.status_text(r.status),
        f"{r.duration_s:.1f}s",
        f"{r.agent.usage.total:,}" if r.agent.usage.requests else "-",
        str(r.files_changed),
        f"{r.todo.done}/{r.todo.total}" + (f" +{len(r.ticked)}" if r.ticked else ""),
        ui.safe(ui.one_line(r.reason, width)),
    ]
