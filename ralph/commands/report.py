"""`ralph report`: a run as one self-contained HTML page (inline CSS and SVG, no script, nothing
fetched): the goal and the outcome, a timeline of laps, tokens per lap against one session,
and each lap with its checks, tests, ticked items, judge's scores and diff."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ralph import git
from ralph.errors import Exit, RalphError
from ralph.git import layout
from ralph.git.layout import RunRefs
from ralph.isolation.files import replace_with
from ralph.records import ledger
from ralph.records.formats import LapRecord, LapStatus
from ralph.records.ledger import Lap, RunState
from ralph.run import summary
from ralph.show import pages, ui

DIFF_CAP = 100_000  # characters of a lap's diff in the page; the rest is one `git show` away
COLOURS = {
    LapStatus.GREEN: "#2da44e",
    LapStatus.RED: "#cf222e",
    LapStatus.ERROR: "#bf8700",
    LapStatus.LIMITED: "#1b7c83",
    None: "#8c959f",
}
TOKENS_COLOUR, SESSION_COLOUR = "#8250df", "#0969da"
WIDTH = 960  # the charts' drawing width, in SVG units


def report(cwd: Path, run: str | None, output: str | None) -> Exit:
    repo = git.open_repo(cwd)
    state = ledger.resolve(repo.top, run)
    page = render(repo.top, state)
    if output == "-":
        sys.stdout.write(page)
        return Exit.DONE
    target = Path(output) if output else layout.run_dir(repo.common_dir, state.name) / "report.html"
    try:
        replace_with(target, page)
    except OSError as exc:
        raise RalphError(f"cannot write the report to {target}: {exc.strerror}") from None
    ui.say(f"report of run [bold]{state.name}[/] ({len(state.laps)} laps): {ui.safe(target.resolve())}")
    return Exit.DONE


@dataclass(frozen=True)
class Bar:
    """A lap in the timeline: where its bar starts and how wide it is, in SVG units."""

    number: int
    record: LapRecord | None
    seconds: float
    x: float
    width: float
    colour: str


@dataclass(frozen=True)
class TokenBar:
    number: int
    tokens: int
    x: float
    y: float


@dataclass(frozen=True)
class TokensChart:
    """Bars: each lap's largest request (what a fresh lap carried); line: those added up, what
    one session doing every lap so far would be sending."""

    bars: list[TokenBar]
    step: float  # the width a lap has
    height: int
    top: int  # the tokens at the chart's top
    points: list[tuple[float, float]]  # the session line
    session: int  # the session's tokens by the last lap


@dataclass(frozen=True)
class Diff:
    lines: list[tuple[str, str]]  # (kind: add, del, hunk or "", the line)
    commit: str
    cut: bool  # only the start is shown
    failed: str = ""  # git could not show it (a note naming a parent that is no commit): its first line


@dataclass(frozen=True)
class LapView:
    number: int
    commit: str
    record: LapRecord | None
    problem: str  # why there is no record
    diff: Diff | None


def render(top: Path, state: RunState) -> str:
    records = [lap.record for lap in state.laps]
    numbers = [lap.number for lap in state.laps]
    known = any(r and r.agent.usage.requests for r in records)
    laps = [_lap(top, lap) for lap in state.laps]
    known_records = [r for r in records if r]
    return pages.render(
        "report.html.j2",
        name=state.name,
        goal=state.record.config.goal,
        laps_ref=RunRefs(state.name).laps,
        done=state.is_done,
        counts={status: sum(r.status == status for r in known_records) for status in LapStatus},
        lap_count=len(records),
        todo_done=_todo_done(top, state),
        time_in_laps=_time(sum(r.duration_s for r in known_records)),
        tokens=state.tokens_used(),
        cost=_spent(*state.cost_used()),
        base=state.record.base,
        green=state.green,
        bars=_timeline(records, numbers),
        chart=_tokens_chart(records, numbers) if known else None,
        laps=laps,
        statuses=list(LapStatus),
        colours=COLOURS,
        width=WIDTH,
        tokens_colour=TOKENS_COLOUR,
        session_colour=SESSION_COLOUR,
    )


def _todo_done(top: Path, state: RunState) -> str:
    counts = summary.todo_on_tip(top, state)
    return f"{counts.done}/{counts.total}" if counts.total else "–"


def _time(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _spent(spent: float, unknown: int) -> str:
    if not spent:
        return "unknown"
    return f"${spent:.2f}" + (f" + {unknown} lap(s) unknown" if unknown else "")


def _lap(top: Path, lap: Lap) -> LapView:
    diff = _read_diff(top, lap.record.parent, lap.commit) if lap.record else None
    return LapView(lap.number, lap.commit, lap.record, lap.problem, diff)


def _timeline(records: list[LapRecord | None], numbers: list[int]) -> list[Bar]:
    """A bar a lap, as wide as the lap was long (at least 3 units), coloured by its status."""
    durations = [max(r.duration_s if r else 0.0, 0.0) for r in records]
    scale = (WIDTH - 3 * len(records)) / (sum(durations) or 1)
    x, bars = 0.0, []
    for number, record, seconds in zip(numbers, records, durations, strict=True):
        width = max(3.0, seconds * scale)
        bars.append(Bar(number, record, seconds, x, width, COLOURS[record.status if record else None]))
        x += width
    return bars


def _tokens_chart(records: list[LapRecord | None], numbers: list[int]) -> TokensChart:
    this_lap = [r.agent.usage.largest_prompt_tokens if r else 0 for r in records]
    session = [sum(this_lap[: i + 1]) for i in range(len(this_lap))]
    height, top = 160, max(session[-1], 1)
    step = WIDTH / len(records)

    def y(tokens: int) -> float:
        return height - tokens / top * (height - 10)

    bars = [
        TokenBar(number, t, i * step + step * 0.15, y(t))
        for i, (number, t) in enumerate(zip(numbers, this_lap, strict=True))
    ]
    points = [(i * step + step / 2, y(t)) for i, t in enumerate(session)]
    return TokensChart(bars, step, height, top, points, session[-1])


def _read_diff(top: Path, parent: str, commit: str) -> Diff:
    # Read capped: a lap may have committed a file of gigabytes; the page shows the diff's start.
    # The parent is read from a note, which anyone who can push to the remote can write: after
    # --end-of-options, git takes it as a revision whatever it says (`--output=FILE` would write).
    shown = git.run(
        top, "diff", "--no-color", "--stat=100", "--patch", "--end-of-options", parent, commit, "--",
        cap=4 * DIFF_CAP, check=False,
    )  # fmt: skip
    if not shown.ok:
        return Diff([], commit, cut=False, failed=ui.one_line(shown.stderr or shown.output, 300))
    text = shown.output
    cut = len(text) > DIFF_CAP or bool(shown.cut_bytes)
    lines = [(_kind(line), line) for line in text[:DIFF_CAP].splitlines()]
    return Diff(lines, commit, cut)


def _kind(line: str) -> str:
    if line.startswith("+") and not line.startswith("+++"):
        return "add"
    if line.startswith("-") and not line.startswith("---"):
        return "del"
    return "hunk" if line.startswith("@@") else ""


def _diff(top: Path, parent: str, commit: str) -> str:
    """A lap's diff as the page shows it, alone."""
    return pages.render("diff.html.j2", diff=_read_diff(top, parent, commit))
