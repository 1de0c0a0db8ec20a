"""What a bench measured: one Result per job and mode, the table and the summary lines printed,
and the JSON written (`"format": 1`)."""

from __future__ import annotations

from pydantic import BaseModel, computed_field

from ralph.agents.base import Usage
from ralph.show import ui

FORMAT = 1
COLUMNS = [
    *("mode", "finished", "tests (start→end)", "tokens in/out", "largest", "requests", "laps", "red", "wall", "cost")
]


class TokenTotals(BaseModel):
    prompt: int = 0
    completion: int = 0
    largest_request: int = 0  # the biggest single prompt: how close the mode came to a context limit
    estimated: bool = False  # some server reported no usage and ralph estimated it
    cost_usd: float | None = None  # None: not known for every lap

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        return self.prompt + self.completion


class Result(BaseModel):
    job: str
    mode: str
    finished: bool  # green, every check passes, every item ticked, every test of the finished job passing
    not_judged: str = ""  # a check could not run on the scored tree: nothing there is a verdict
    tests_passed: int  # of the finished job's tests, those passing on the scored tree
    tests_total: int  # the tests the finished job passes
    tests_at_start: int  # of them, those passing on the job's base commit already
    items_done: int
    items_total: int
    tokens: TokenTotals
    requests: int
    wall_s: float
    laps: int
    red_laps: int
    exit_code: int  # `ralph run`'s
    curve: list[tuple[int, int]]  # (tokens spent so far, tests passing) from the start, lap by lap
    largest_per_lap: list[int]  # each lap's biggest request, in prompt tokens


class Report(BaseModel):
    format: int = FORMAT
    model: str  # what the agent was: the scripted model, a preset, a model at an endpoint
    results: list[Result]


def token_totals(usages: list[Usage]) -> TokenTotals:
    costs = [usage.cost_usd for usage in usages]
    return TokenTotals(
        prompt=sum(usage.prompt_tokens for usage in usages),
        completion=sum(usage.completion_tokens for usage in usages),
        largest_request=max((usage.largest_prompt_tokens for usage in usages), default=0),
        estimated=any(usage.estimated for usage in usages),
        cost_usd=round(sum(c for c in costs if c is not None), 4) if costs and None not in costs else None,
    )


def print_table(results: list[Result]) -> None:
    """A heading a job, a row a mode (cost only where some is known); then a line a mode."""
    costed = any(result.tokens.cost_usd is not None for result in results)
    for job in dict.fromkeys(result.job for result in results):
        ui.say(f"\n[bold]{ui.safe(job)}[/]")
        rows = [_row(result)[: None if costed else -1] for result in results if result.job == job]
        ui.table(COLUMNS[: None if costed else -1], rows)
    ui.say("")
    for line in summary(results):
        ui.say(line)
    for result in results:
        if result.not_judged:
            ui.warn(f"bench: {result.job}, {result.mode} mode, was not judged: {ui.safe(result.not_judged)}")


def summary(results: list[Result]) -> list[str]:
    """One line per mode: jobs finished, tests passing, tokens, wall time."""
    lines = []
    for mode in dict.fromkeys(result.mode for result in results):
        mine = [result for result in results if result.mode == mode]
        passed, total = sum(r.tests_passed for r in mine), sum(r.tests_total for r in mine)
        start = sum(r.tests_at_start for r in mine)
        tokens = sum(r.tokens.total for r in mine)
        largest = max(r.tokens.largest_request for r in mine)
        lines.append(
            f"{mode}: {sum(r.finished for r in mine)}/{len(mine)} jobs finished, {passed}/{total} tests passing "
            f"({start} at the start), "
            f"{tokens:,} tokens (largest request {largest:,}), {sum(r.requests for r in mine)} requests, "
            f"{sum(r.wall_s for r in mine):.0f} s"
        )
    return lines


def _row(result: Result) -> list[str]:
    tokens = result.tokens
    cost = "unknown" if tokens.cost_usd is None else f"${tokens.cost_usd:.2f}"
    return [
        result.mode,
        "not judged" if result.not_judged else "yes" if result.finished else "no",
        f"{result.tests_at_start}→{result.tests_passed}/{result.tests_total}",
        f"{_short(tokens.prompt)}/{_short(tokens.completion)}" + (" (estimated)" if tokens.estimated else ""),
        _short(tokens.largest_request),
        str(result.requests),
        str(result.laps),
        str(result.red_laps),
        f"{result.wall_s:.0f} s",
        cost,
    ]


def _short(count: int) -> str:
    """12,345 as 12.3k, 1,234,567 as 1.23M: a table a terminal wide."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.2f}M"
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)
