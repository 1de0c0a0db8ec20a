"""`ralph report`: a run as one self-contained HTML page (inline CSS and SVG, no script, nothing
fetched): the goal and the outcome, a timeline of laps, tokens per lap against one session,
and each lap with its checks, tests, ticked items, judge's scores and diff."""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

from ralph import git
from ralph.errors import Exit, RalphError
from ralph.git import layout
from ralph.git.layout import RunRefs
from ralph.isolation.files import replace_with
from ralph.records import ledger
from ralph.records.formats import LapRecord, LapStatus
from ralph.records.ledger import RunState
from ralph.run import summary
from ralph.show import ui

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

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#1f2328;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.muted{color:#59636e}.facts{display:flex;gap:24px;flex-wrap:wrap;margin:12px 0}
.facts div{background:#f6f8fa;border-radius:6px;padding:8px 12px}.facts b{display:block;font-size:18px}
.status{font-weight:600;padding:1px 8px;border-radius:10px;color:#fff}
.green{background:#2da44e}.red{background:#cf222e}.error{background:#bf8700}.limited{background:#1b7c83}
.unknown{background:#8c959f}
details.lap{border:1px solid #d1d9e0;border-radius:6px;margin:8px 0;padding:6px 12px}
details.lap>summary{cursor:pointer}table{border-collapse:collapse;margin:6px 0}
td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;line-height:1.35}
.pass{color:#116329}.fail{color:#cf222e}.add{color:#116329;background:#dafbe1}.del{color:#82071e;background:#ffebe9}.hunk{color:#0550ae}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
"""


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


def render(top: Path, state: RunState) -> str:
    records = [lap.record for lap in state.laps]
    laps = "\n".join(_lap(top, lap.number, lap.commit, lap.record, lap.problem) for lap in state.laps)
    known = any(r and r.agent.usage.requests for r in records)
    tokens = _tokens_chart(records, [lap.number for lap in state.laps]) if known else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>ralph run {escape(state.name)}</title><style>{STYLE}</style></head>
<body>
<h1>ralph run {escape(state.name)}</h1>
<p class="goal">{escape(state.record.config.goal)}</p>
{_outcome(top, state, records)}
<h2>Laps</h2>
{_timeline(records, [lap.number for lap in state.laps])}
{tokens}
{laps}
<p class="muted">Review with git: <code>git log --notes=ralph ralph/{escape(state.name)}</code> ·
<code>git show {escape(RunRefs(state.name).laps)}N</code></p>
</body></html>
"""


def _outcome(top: Path, state: RunState, records: list[LapRecord | None]) -> str:
    known = [r for r in records if r]
    counts = {status: sum(r.status == status for r in known) for status in LapStatus}
    outcome = "done" if state.is_done else "not done"
    seconds = sum(r.duration_s for r in known)
    tokens = state.tokens_used()
    facts = [
        ("outcome", f'<span class="status {"green" if state.is_done else "unknown"}">{outcome}</span>'),
        (
            "laps",
            f"{len(records)}: "
            + ", ".join(f"{n} {status}" for status, n in counts.items() if n or status != LapStatus.LIMITED),
        ),
        ("TODO done", _todo_done(top, state)),
        ("time in laps", f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"),
        ("tokens", f"{tokens:,}" if tokens else "unknown"),
        ("cost", _spent(*state.cost_used())),
        ("green line", f"{state.record.base[:10]} → {state.green[:10]}"),
    ]
    cells = "".join(f"<div><span class=muted>{name}</span><b>{value}</b></div>" for name, value in facts)
    return f'<div class="facts" id="outcome">{cells}</div>'


def _todo_done(top: Path, state: RunState) -> str:
    counts = summary.todo_on_tip(top, state)
    return f"{counts.done}/{counts.total}" if counts.total else "–"


def _spent(spent: float, unknown: int) -> str:
    if not spent:
        return "unknown"
    return f"${spent:.2f}" + (f" + {unknown} lap(s) unknown" if unknown else "")


def _timeline(records: list[LapRecord | None], numbers: list[int]) -> str:
    """A bar a lap, as wide as the lap was long (at least 3 units), coloured by its status."""
    if not records:
        return "<p>No lap yet.</p>"
    durations = [max(r.duration_s if r else 0.0, 0.0) for r in records]
    scale = (WIDTH - 3 * len(records)) / (sum(durations) or 1)
    x, bars = 0.0, []
    for number, record, seconds in zip(numbers, records, durations, strict=True):
        width = max(3.0, seconds * scale)
        status = record.status if record else None
        title = f"lap {number}: {status or 'no record'}, {seconds:.1f}s" + (f" — {record.reason}" if record else "")
        label = (
            f'<text x="{x + width / 2:.1f}" y="30" text-anchor="middle" font-size="11" fill="#fff">{number}</text>'
            if width >= 18
            else ""
        )
        bars.append(
            f'<g class="lap-bar" data-status="{status or "unknown"}"><title>{escape(title)}</title>'
            f'<rect x="{x:.1f}" y="12" width="{width - 1:.1f}" height="28" fill="{COLOURS[status]}"/>{label}</g>'
        )
        x += width
    legend = "".join(f'<span style="background:{COLOURS[s]}"></span>{s}' for s in LapStatus)
    return (
        f'<svg id="timeline" viewBox="0 0 {WIDTH} 44" width="100%" role="img" aria-label="laps by duration">'
        f'{"".join(bars)}</svg><div class="legend muted">time →{legend}</div>'
    )


def _tokens_chart(records: list[LapRecord | None], numbers: list[int]) -> str:
    """Bars: each lap's largest request (what a fresh lap carried); line: those added up, what
    one session doing every lap so far would be sending."""
    this_lap = [r.agent.usage.largest_prompt_tokens if r else 0 for r in records]
    session = [sum(this_lap[: i + 1]) for i in range(len(this_lap))]
    height, top = 160, max(session[-1], 1)
    step = WIDTH / len(records)

    def y(tokens: int) -> float:
        return height - tokens / top * (height - 10)

    bars = "".join(
        f'<rect class="tokens-bar" x="{i * step + step * 0.15:.1f}" y="{y(t):.1f}" width="{step * 0.7:.1f}" '
        f'height="{height - y(t):.1f}" fill="{TOKENS_COLOUR}"><title>lap {number}: {t:,} tokens</title></rect>'
        for i, (number, t) in enumerate(zip(numbers, this_lap, strict=True))
    )
    points = " ".join(f"{i * step + step / 2:.1f},{y(t):.1f}" for i, t in enumerate(session))
    return (
        f'<h2>Tokens</h2><svg id="tokens" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
        f'aria-label="tokens per lap against one session">{bars}'
        f'<text x="4" y="12" font-size="11" fill="#59636e">{top:,} tokens</text>'
        f'<polyline points="{points}" fill="none" stroke="{SESSION_COLOUR}" stroke-width="3"/></svg>'
        f'<div class="legend muted"><span style="background:{TOKENS_COLOUR}"></span>this lap (its largest request)'
        f'<span style="background:{SESSION_COLOUR}"></span>one session (every lap so far, {session[-1]:,} at the end)'
        "</div>"
    )


def _lap(top: Path, number: int, commit: str, record: LapRecord | None, problem: str) -> str:
    if record is None:
        return (
            f'<details class="lap" data-status="unknown"><summary><b>lap {number}</b> '
            f'<span class="status unknown">?</span> {escape(problem)}</summary></details>'
        )
    parts = [f"<p>{escape(record.agent.summary)}</p>" if record.agent.summary else ""]
    facts = [
        ("reason", escape(record.reason)),
        ("time", f"{record.duration_s:.1f}s (prepare {record.prepare_s:.1f}s, agent {record.agent.duration_s:.1f}s)"),
        ("commit", f"<code>{commit[:12]}</code> on {record.parent[:10]}"),
        ("TODO", f"{record.todo.done} done, {record.todo.open} open"),
        ("ticked", escape("; ".join(record.ticked)) or "none"),
    ]
    if record.tests:
        facts.append(("tests passing", f"{record.tests.passing_before} → {record.tests.passing_after}"))
    if record.agent.usage.requests:
        usage = record.agent.usage
        largest = f", largest {usage.largest_prompt_tokens:,}" if usage.largest_prompt_tokens else ""
        facts.append(("tokens", f"{usage.total:,} in {ui.many(usage.requests, 'request')}{largest}"))
    if record.agent.usage.cost_usd is not None:
        facts.append(("cost", f"${record.agent.usage.cost_usd:.4f}"))
    parts.append("<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts) + "</table>")
    if record.checks:
        marks = ["pass" if check.passed else "fail" for check in record.checks]
        rows = "".join(
            f"<tr><td class={mark}>{mark}</td><td><code>{escape(check.command)}</code></td>"
            f"<td>{check.duration_s:.1f}s</td></tr>"
            for mark, check in zip(marks, record.checks, strict=True)
        )
        parts.append(f"<table class=checks><tr><th>check</th><th>command</th><th>time</th></tr>{rows}</table>")
    if record.judge:
        parts.append(_judge(record))
    parts.append(_diff(top, record.parent, commit))
    slot = f" (slot {record.slot}: {escape('; '.join(record.items))})" if record.slot is not None else ""
    return (
        f'<details class="lap" data-status="{record.status}"><summary><b>lap {number}</b>{slot} '
        f'<span class="status {record.status}">{record.status}</span> {escape(record.reason)}</summary>'
        f"{''.join(parts)}</details>"
    )


def _judge(record: LapRecord) -> str:
    judge = record.judge
    assert judge is not None
    if judge.status == "unavailable":
        return f"<p><b>judge</b> unavailable: {escape(judge.detail)}</p>"
    rows = "".join(
        f"<tr><td>{score.score:g}</td><td>{escape(score.dimension)}</td><td>{escape(score.reason)}"
        f"{'' if score.counted else ' (not counted: its evidence is in neither the diff nor a changed file)'}</td></tr>"
        for score in judge.scores
    )
    blocking = "".join(f"<li>{escape(item)}</li>" for item in judge.blocking)
    return (
        f'<div class="judge"><p><b>judge</b> {judge.status}: score {judge.score}</p>'
        f"<table><tr><th>score</th><th>dimension</th><th>why</th></tr>{rows}</table>"
        + (f"<p>blocking:</p><ul>{blocking}</ul>" if blocking else "")
        + "</div>"
    )


def _diff(top: Path, parent: str, commit: str) -> str:
    # Read capped: a lap may have committed a file of gigabytes; the page shows the diff's start.
    shown = git.run(top, "diff", "--no-color", "--stat=100", "--patch", parent, commit, "--", cap=4 * DIFF_CAP)
    text, cut = shown.output, ""
    if len(text) > DIFF_CAP or shown.cut_bytes:
        cut = f"[... the rest of the diff: git show {commit[:12]}]"
        text = text[:DIFF_CAP]
    lines = []
    for line in text.splitlines():
        kind = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "hunk"
            if line.startswith("@@")
            else ""
        )
        lines.append(f'<span class="{kind}">{escape(line)}</span>' if kind else escape(line))
    body = "\n".join(lines) + (f"\n{escape(cut)}" if cut else "")
    return f"<details><summary>diff</summary><pre>{body}</pre></details>"
