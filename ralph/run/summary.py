"""A run's standing, as `ralph log`, `ralph status`, `ralph land` (and its pull request) and the
end of `ralph run` say it."""

from __future__ import annotations

import re
from pathlib import Path

from ralph import git, todo
from ralph.records.ledger import Lap, RunState
from ralph.run import tally
from ralph.run.tally import Tally
from ralph.show import ui
from ralph.verdict.checks import CheckResult

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
    rows = [_row(lap, slots=slots, width=width) for lap in state.laps]
    ui.table(["lap", "status", "time", "tokens", "files", "TODO", "reason"], rows)


def _row(lap: Lap, *, slots: bool, width: int) -> list[str]:
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


def green_laps(top: Path, since: str, green: str) -> list[tuple[str, str, str]]:
    """The green line's commits after `since`, oldest first: (lap number or "?", commit, subject)."""
    listing = git.out(
        top,
        "log",
        "--reverse",
        "--format=%(trailers:key=Ralph-Lap,valueonly,separator=)%x09%H%x09%s",
        f"{since}..{green}",
    )
    laps = [line.split("\t", 2) for line in listing.splitlines()]
    return [(number.strip() or "?", commit, subject) for number, commit, subject in laps]


def _tokens(total: Tally) -> str:
    """As `ralph stats` counts them: unknown for an agent CLI that reports none, never 0."""
    if total.known_tokens is None:
        return "unknown"
    return f"at least {total.tokens:,} (some laps reported none)" if total.unknown_tokens else f"{total.tokens:,}"


def todo_on_tip(top: Path, state: RunState) -> todo.Counts:
    """The TODO as the green tip has it (the base's, when no lap was green): a red lap's ticks
    were never the run's."""
    return todo.count(todo.parse(git.show_file(top, state.green, state.record.config.files.todo)))


def pull_request_body(top: Path, state: RunState) -> str:
    """`ralph land --pr`'s body: the run's numbers, its green laps, and the issue it closes when
    done. Lap subjects are the items laps ticked, text of the agent's: they stand in a code block,
    where GitHub reads no "Closes #N" and no @mention."""
    items = todo_on_tip(top, state)
    spent, unknown = state.cost_used()
    lines = [
        f"The green line of ralph run `{state.name}`: {_standing(state)}.",
        "",
        f"- TODO items: {items.done} of {items.done + items.open} done",
        f"- laps: {state.green_laps()} green of {len(state.laps)}",
        f"- tests passing: {_tests_passing(state)}",
        f"- tokens: {_tokens(tally.of_run(state))}",
        f"- cost: {'unknown' if unknown else f'${spent:.2f}'}",
        "",
        f"Its commits (`git log {state.record.base[:10]}..ralph/{state.name}`):",
        "",
        *_code_block(
            [
                f"lap {n} {commit[:10]} {subject}"
                for n, commit, subject in green_laps(top, state.record.base, state.green)
            ]
        ),
    ]
    issue = state.record.issue
    if issue is not None:
        lines += ["", f"{'Closes' if state.is_done else 'Part of'} #{issue.number}"]
    return "\n".join(lines) + "\n"


def _standing(state: RunState) -> str:
    if state.is_done:
        return "done (every check passes, every TODO item is ticked)"
    failing = len(state.still_failing())
    return f"not done, a draft ({failing} check(s) still failing)" if failing else "not done, a draft"


def _tests_passing(state: RunState) -> str:
    """Passing tests at the base → on the green tip, where a check gives per-test results."""

    def passing(results: list[CheckResult]) -> int | None:
        counted = [check.tests.counts.passed for check in results if check.tests is not None]
        return sum(counted) if counted else None

    before, after = passing(state.record.baseline), passing(state.green_checks())
    if before is None or after is None:
        return "not counted (no check gives per-test results)"
    return f"{before} → {after}"


def _code_block(lines: list[str]) -> list[str]:
    """`lines` as a fenced block no line can close: its fence is longer than any run of backticks in them."""
    text = "\n".join(lines) or "(none)"
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return [f"{fence}text", text, fence]
