"""`ralph stats`: the runs of this repository (with `--remote`, a remote's too) compared, per run
and per agent: laps, green share, items finished, tests, tokens, cost and time (run/tally.py)."""

from __future__ import annotations

import math
from pathlib import Path

from ralph import git, todo
from ralph.errors import Exit, RalphError
from ralph.records import ledger
from ralph.records.ledger import RunState
from ralph.run import tally, workers
from ralph.run.tally import Tally
from ralph.show import ui

FORMAT = 1  # of `ralph stats --json`; a new key keeps it, a changed or removed one raises it

AgentKey = tuple[str, str | None]


def stats(cwd: Path, run: str | None, *, as_json: bool, remote: str | None) -> Exit:
    top = git.open_repo(cwd).top
    if remote is not None:
        workers.fetch_runs(top, remote, None)  # every run the remote keeps; this clone's stay
    states = _states(top, run)
    for state in states:
        _warn_unread(state)
    runs = [_run_stats(top, state) for state in states]
    agents = _agent_stats(states)
    if as_json:
        ui.print_json({"format": FORMAT, "runs": runs, "agents": agents})
        return Exit.DONE
    _say_runs(runs)
    _say_agents(agents)
    _say_legend([*runs, *agents])
    return Exit.DONE


def _states(top: Path, run: str | None) -> list[RunState]:
    """The run named, or every run ralph can read, oldest first (the others are named by run_records)."""
    if run is not None:
        return [ledger.resolve(top, run)]
    states = [state for record in ledger.run_records(top) if (state := ledger.load(top, record.run))]
    if not states:
        raise RalphError("no ralph run in this repository yet — start one with `ralph run`")
    return states


def _warn_unread(state: RunState) -> None:
    unread = [lap for lap in state.laps if lap.record is None]
    if unread:
        first = unread[0]
        ui.warn(
            f"run {state.name}: {len(unread)} lap(s) without a note this ralph reads, counted as laps of "
            f"unknown tokens and cost (lap {first.number}: {first.problem})"
        )


def _run_stats(top: Path, state: RunState) -> dict[str, object]:
    total = tally.of_run(state)
    at_tip = todo.count(todo.parse(git.show_file(top, state.green, state.record.config.files.todo)))
    return {
        "run": state.name,
        "created_at": state.record.created_at,
        "base": state.record.base,
        "green": state.green,
        "done": state.is_done,
        "on_remote": state.record.on_remote,
        **total.as_json(),
        "items_open": at_tip.open,
        "wall_s": _rounded(tally.wall_s(state)),
        "tests_passing": {
            "at_base": tally.tests_passing(state.record.baseline),
            "at_end": tally.tests_passing(state.green_checks()),
        },
        "agents": [_agent_row(key, part) for key, part in tally.by_agent(state).items()],
    }


def _agent_stats(states: list[RunState]) -> list[dict[str, object]]:
    """Each agent's laps over every run here, with the number of runs it worked in."""
    totals: dict[AgentKey, Tally] = {}
    runs: dict[AgentKey, int] = {}
    for state in states:
        for key, part in tally.by_agent(state).items():
            totals[key] = totals.get(key, Tally()) + part
            runs[key] = runs.get(key, 0) + 1
    return [dict(_agent_row(key, part), runs=runs[key]) for key, part in totals.items()]


def _agent_row(key: AgentKey, part: Tally) -> dict[str, object]:
    name, model = key
    return {"agent": name, "model": model, **part.as_json()}


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def _say_runs(runs: list[dict]) -> None:
    columns = ["run", "laps", "green", "items", "tests", "tokens", "cost", "wall", "t/item", "tok/item", "done"]
    rows = [
        [
            ui.safe(run["run"]),
            str(run["laps"]),
            _share(run),
            str(run["items_finished"]),
            _tests(run["tests_passing"]),
            _tokens(run, "tokens"),
            _cost(run),
            _duration(run["wall_s"]),
            _duration(run["lap_s_per_item"]),
            _tokens(run, "tokens_per_item"),
            "yes" if run["done"] else "no",
        ]
        for run in runs
    ]
    ui.table(columns, rows)


def _say_agents(agents: list[dict]) -> None:
    ui.say("")
    columns = ["agent", "runs", "laps", "green", "items", "tokens", "cost", "time", "t/item", "tok/item"]
    rows = [
        [
            ui.safe(f"{agent['agent']} {agent['model']}" if agent["model"] else agent["agent"]),
            str(agent["runs"]),
            str(agent["laps"]),
            _share(agent),
            str(agent["items_finished"]),
            _tokens(agent, "tokens"),
            _cost(agent),
            _duration(agent["lap_s"]),
            _duration(agent["lap_s_per_item"]),
            _tokens(agent, "tokens_per_item"),
        ]
        for agent in agents
    ]
    ui.table(columns, rows)


def _say_legend(rows: list[dict]) -> None:
    """What the columns mean where a number alone would mislead."""
    ui.say("items: ticked by green laps on the green line; t/item, tok/item: the laps' time and tokens per item")
    if any(row["tokens"] is None or row["cost_usd"] is None for row in rows):
        ui.say("?: not known for any lap (an agent CLI that reports no usage or cost, a model without prices)")
    partly = [(row["tokens"], row["laps_of_unknown_tokens"]) for row in rows] + [
        (row["cost_usd"], row["laps_of_unknown_cost"]) for row in rows
    ]
    if any(known is not None and unknown for known, unknown in partly):
        ui.say("≥: the sum over the laps that reported; some laps did not")


def _share(row: dict) -> str:
    return "-" if row["green_share"] is None else f"{row['green_share']:.0%}"


def _tests(passing: dict) -> str:
    start, end = passing["at_base"], passing["at_end"]
    if start is None and end is None:
        return "-"
    return f"{'?' if start is None else start} → {'?' if end is None else end}"


def _tokens(row: dict, key: str) -> str:
    """Tokens, or tokens per item: ? when no lap's are known, ≥ when some laps' are not."""
    tokens = row[key]
    if _no_laps(row):
        return "-"
    if tokens is None:
        return "?" if row["tokens"] is None else "-"
    return f"≥{tokens:,}" if row["laps_of_unknown_tokens"] else f"{tokens:,}"


def _cost(row: dict) -> str:
    spent = row["cost_usd"]
    if _no_laps(row):
        return "-"
    if spent is None:
        return "?"
    shown = f"${spent:.2f}" if spent == 0 or spent >= 0.01 else f"${spent:.4f}"
    return f"≥{shown}" if row["laps_of_unknown_cost"] else shown


def _no_laps(row: dict) -> bool:
    return not (row["laps"] or row["limited_laps"])


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if not math.isfinite(seconds):  # a note's duration edited to Infinity: nothing to round
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, whole = divmod(round(seconds), 60)
    return f"{minutes}m{whole:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"
