"""`ralph bench --html`: the results as one self-contained page (inline CSS and SVG, no script,
nothing fetched), like `ralph report`'s. Per job: tests passing against the tokens spent, both
modes; and, lap by lap, what each lap's largest request weighed against what the same requests
would weigh in one session that had done every lap so far."""

from __future__ import annotations

import itertools
from html import escape

from ralph.bench.results import Report, Result, summary

LAPS_COLOUR, SESSION_COLOUR = "#8250df", "#0969da"
WIDTH, HEIGHT = 900, 220
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:960px;color:#1f2328;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}.muted{color:#59636e}
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 12px 2px 0;text-align:left}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
"""


def render(report: Report) -> str:
    jobs = list(dict.fromkeys(result.job for result in report.results))
    sections = "".join(_job(job, [r for r in report.results if r.job == job]) for job in jobs)
    lines = "".join(f"<li>{escape(line)}</li>" for line in summary(report.results))
    legend = (
        f'<div class="legend muted"><span style="background:{LAPS_COLOUR}"></span>laps'
        f'<span style="background:{SESSION_COLOUR}"></span>one session</div>'
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>ralph bench</title>'
        f"<style>{STYLE}</style></head><body><h1>ralph bench</h1>"
        f'<p class="muted">model: {escape(report.model)}</p><ul>{lines}</ul>{legend}{sections}</body></html>\n'
    )


def _job(job: str, results: list[Result]) -> str:
    rows = "".join(
        f"<tr><td>{escape(r.mode)}</td><td>{_finished(r)}</td>"
        f"<td>{r.tests_at_start} → {r.tests_passed}/{r.tests_total}</td>"
        f"<td>{r.tokens.total:,}</td><td>{r.tokens.largest_request:,}</td>"
        f"<td>{r.requests}</td><td>{r.laps} ({r.red_laps} red)</td><td>{r.wall_s:.0f} s</td></tr>"
        for r in results
    )
    head = "<tr><th>mode</th><th>finished</th><th>tests (start → end)</th><th>tokens</th><th>largest request</th>"
    head += "<th>requests</th><th>laps</th><th>wall</th></tr>"
    laps = next((r for r in results if r.mode == "laps"), None)
    return (
        f'<section class="job" data-job="{escape(job)}"><h2>{escape(job)}</h2><table>{head}{rows}</table>'
        f"{_progress(results)}{_bars(laps) if laps and laps.largest_per_lap else ''}</section>"
    )


def _finished(result: Result) -> str:
    if result.not_judged:
        return f'<span title="{escape(result.not_judged)}">not judged</span>'
    return "yes" if result.finished else "no"


def _progress(results: list[Result]) -> str:
    """Tests passing (up) against tokens spent (right), a step line per mode."""
    most_tokens = max((point[0] for r in results for point in r.curve), default=0) or 1
    most_tests = max((r.tests_total for r in results), default=0) or 1

    def xy(tokens: int, tests: int) -> str:
        return f"{40 + (WIDTH - 60) * tokens / most_tokens:.1f},{HEIGHT - 20 - (HEIGHT - 40) * tests / most_tests:.1f}"

    lines = []
    for result in results:
        colour = LAPS_COLOUR if result.mode == "laps" else SESSION_COLOUR
        steps = [result.curve[0]]
        for (_, before), (tokens, after) in itertools.pairwise(result.curve):
            steps += [(tokens, before), (tokens, after)]  # flat while a lap spends, then up or down
        points = " ".join(xy(tokens, tests) for tokens, tests in steps)
        mode = escape(result.mode)
        lines.append(f'<polyline class="{mode}" points="{points}" fill="none" stroke="{colour}" stroke-width="4"/>')
    axes = (
        f'<line x1="40" y1="{HEIGHT - 20}" x2="{WIDTH - 20}" y2="{HEIGHT - 20}" stroke="#d1d9e0"/>'
        f'<text x="40" y="{HEIGHT - 4}" font-size="12" fill="#59636e">tokens → ({most_tokens:,})</text>'
        f'<text x="4" y="16" font-size="12" fill="#59636e">tests passing ({most_tests})</text>'
    )
    return (
        f'<svg class="progress" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'aria-label="tests passing against tokens spent">{axes}{"".join(lines)}</svg>'
    )


def _bars(laps: Result) -> str:
    """A pair of bars a lap: its largest request, and the same request in one session (every
    earlier lap's largest request still in the context)."""
    session = list(itertools.accumulate(laps.largest_per_lap))
    scale, slot = max(session) or 1, (WIDTH - 60) / len(session)
    bars = []
    for number, (this_lap, one_session) in enumerate(zip(laps.largest_per_lap, session, strict=True)):
        x = 40 + number * slot
        for offset, tokens, colour in ((0.1, this_lap, LAPS_COLOUR), (0.5, one_session, SESSION_COLOUR)):
            height = (HEIGHT - 40) * tokens / scale
            bars.append(
                f'<rect x="{x + offset * slot:.1f}" y="{HEIGHT - 20 - height:.1f}" width="{0.35 * slot:.1f}" '
                f'height="{height:.1f}" fill="{colour}"><title>lap {number + 1}: {tokens:,} tokens</title></rect>'
            )
    return (
        f'<p class="muted">each lap\'s largest request, and an estimate of what it would weigh in one session '
        f"that kept every earlier lap's in its context ({session[-1]:,} tokens by the last lap; the session row "
        "above is measured)</p>"
        f'<svg class="bars" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'aria-label="a lap\'s largest request against one session">{"".join(bars)}</svg>'
    )
