"""`ralph bench --html`: the results as one self-contained page (inline CSS and SVG, no script,
nothing fetched), like `ralph report`'s. Per job: tests passing against the tokens spent, both
modes; and, lap by lap, what each lap's largest request weighed against what the same requests
would weigh in one session that had done every lap so far."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ralph.bench.results import Report, Result, summary
from ralph.show import pages

LAPS_COLOUR, SESSION_COLOUR = "#8250df", "#0969da"
WIDTH, HEIGHT = 900, 220


@dataclass(frozen=True)
class Curve:
    """A mode's step line: tests passing (up) against tokens spent (right), in SVG units."""

    mode: str
    colour: str
    points: list[tuple[float, float]]


@dataclass(frozen=True)
class Bar:
    lap: int
    tokens: int
    x: float
    width: float
    height: float
    colour: str


@dataclass(frozen=True)
class Job:
    name: str
    results: list[Result]
    curves: list[Curve]
    most_tokens: int  # the progress chart's right edge
    most_tests: int  # and its top
    bars: list[Bar]  # two a lap (the laps mode's, when it ran laps): its largest request, and in one session
    session: int  # the largest requests of every lap, added up


def render(report: Report) -> str:
    jobs = list(dict.fromkeys(result.job for result in report.results))
    return pages.render(
        "bench.html.j2",
        model=report.model,
        summary=summary(report.results),
        jobs=[_job(job, [r for r in report.results if r.job == job]) for job in jobs],
        width=WIDTH,
        height=HEIGHT,
        laps_colour=LAPS_COLOUR,
        session_colour=SESSION_COLOUR,
    )


def _job(job: str, results: list[Result]) -> Job:
    most_tokens = max((point[0] for r in results for point in r.curve), default=0) or 1
    most_tests = max((r.tests_total for r in results), default=0) or 1
    curves = [_curve(result, most_tokens, most_tests) for result in results]
    laps = next((r for r in results if r.mode == "laps"), None)
    per_lap = laps.largest_per_lap if laps else []
    return Job(job, results, curves, most_tokens, most_tests, _bars(per_lap), sum(per_lap))


def _curve(result: Result, most_tokens: int, most_tests: int) -> Curve:
    steps = [result.curve[0]]
    for (_, before), (tokens, after) in itertools.pairwise(result.curve):
        steps += [(tokens, before), (tokens, after)]  # flat while a lap spends, then up or down
    points = [
        (40 + (WIDTH - 60) * tokens / most_tokens, HEIGHT - 20 - (HEIGHT - 40) * tests / most_tests)
        for tokens, tests in steps
    ]
    return Curve(result.mode, LAPS_COLOUR if result.mode == "laps" else SESSION_COLOUR, points)


def _bars(largest_per_lap: list[int]) -> list[Bar]:
    """A pair of bars a lap: its largest request, and the same request in one session (every
    earlier lap's largest request still in the context)."""
    if not largest_per_lap:
        return []
    session = list(itertools.accumulate(largest_per_lap))
    scale, slot = max(session) or 1, (WIDTH - 60) / len(session)
    bars = []
    for number, (this_lap, one_session) in enumerate(zip(largest_per_lap, session, strict=True)):
        x = 40 + number * slot
        for offset, tokens, colour in ((0.1, this_lap, LAPS_COLOUR), (0.5, one_session, SESSION_COLOUR)):
            bars.append(Bar(number + 1, tokens, x + offset * slot, 0.35 * slot, (HEIGHT - 40) * tokens / scale, colour))
    return bars
