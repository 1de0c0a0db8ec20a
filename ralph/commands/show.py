"""`ralph show LAP`: one lap's record, diffstat and check output."""

from __future__ import annotations

from pathlib import Path

from ralph import git
from ralph.errors import Exit, RalphError
from ralph.git import ledger
from ralph.git.ledger import Lap, RunState
from ralph.git.records import JudgeRecord, LapRecord, LapStatus
from ralph.show import ui


def show(cwd: Path, number: int, run: str | None, as_json: bool) -> Exit:
    top = git.open_repo(cwd).top
    state = ledger.resolve(top, run)
    lap = _lap(state, number)
    record = lap.record
    diffstat = git.diffstat(top, record.parent if record else f"{lap.commit}^", lap.commit)
    if as_json:
        dumped = record.model_dump(mode="json") if record else None
        ui.print_json({"lap": number, "commit": lap.commit, "record": dumped, "diffstat": diffstat})
        return Exit.DONE
    ui.say(f"[bold]lap {number}[/] of run {state.name}  commit {lap.commit}")
    if record is None:
        ui.say(f"no record: {ui.safe(lap.problem)}")
        return Exit.DONE
    _say_outcome(record, on_line=git.is_ancestor(top, lap.commit, state.green))
    _say_spending(state, record, number)
    for message in record.told:
        ui.say(f"told    {ui.safe(message)}")
    if record.judge:
        _say_judge(record.judge)
    _say_changes(record, lap.commit, diffstat)
    return Exit.DONE


def _lap(state: RunState, number: int) -> Lap:
    lap = next((lap for lap in state.laps if lap.number == number), None)
    if lap is None:
        raise RalphError(f"run {state.name!r} has no lap {number} — it has laps 1..{len(state.laps)}")
    return lap


def _say_outcome(record: LapRecord, on_line: bool) -> None:
    """Its verdict, timings, TODO, what the agent said, and what the checks' tests did."""
    where = " (on the green line)" if on_line else ""
    ui.say(f"status  {ui.status_text(record.status)}{where} — {ui.safe(record.reason)}")
    ui.say(
        f"started {record.started_at}, {record.duration_s:.1f}s (prepare {record.prepare_s:.1f}s); "
        f"agent {record.agent.kind} {record.agent.outcome} ({record.agent.duration_s:.1f}s)"
    )
    ui.say(
        f"TODO    {record.todo.done} done, {record.todo.open} open; ticked: "
        f"{ui.safe('; '.join(record.ticked)) or 'none'}"
    )
    if record.agent.summary:
        ui.say(f"summary {ui.safe(record.agent.summary)}")
    said = ui.one_line(next(iter(record.agent.detail.strip().splitlines()), ""), 300)
    if said and said not in record.reason:  # the verdict's reason may stand where the agent's words were
        ui.say(f"agent   {ui.safe(said)}")
    if record.tests:
        ui.say(
            f"tests   passing tests {record.tests.passing_before} → {record.tests.passing_after}; "
            f"newly failing: {ui.safe(', '.join(record.tests.newly_failing)) or 'none'}; "
            f"newly passing: {ui.safe(', '.join(record.tests.newly_passing)) or 'none'}"
        )
    if record.protected_touched or record.granted:
        ui.say(
            f"protected   {ui.safe(', '.join(record.protected_touched)) or 'none touched'}"
            + (f"; allowed by a ticked item: {ui.safe(', '.join(record.granted))}" if record.granted else "")
        )
    if record.flaky:
        ui.say(f"flaky   {ui.safe(', '.join(record.flaky))}")


def _say_spending(state: RunState, record: LapRecord, number: int) -> None:
    """Its tokens (and how full the context was) and its cost, the judge's included."""
    usage = record.agent.usage
    if usage.requests:
        ui.say(
            f"tokens  {usage.requests} requests, {usage.prompt_tokens:,} prompt + "
            f"{usage.completion_tokens:,} completion{' (estimated)' if usage.estimated else ''}"
        )
        ui.context_bars(*state.context_bars(upto=number))
    if record.agent.kind != "command" or usage.cost_usd is not None:
        judge = f" (judge {_usd(record.judge.usage.cost_usd)})" if record.judge else ""
        ui.say(f"cost    {_usd(usage.cost_usd)}{judge}")


def _usd(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def _say_judge(judge: JudgeRecord) -> None:
    if judge.status == "unavailable":
        ui.say(f"judge   unavailable: {ui.safe(judge.detail)}")
        return
    signals = ", ".join(f"{name} {value:g}" for name, value in judge.signals.items())
    ui.say(f"judge   {judge.status}: score {judge.score} (the judge's {judge.judge_score}; ralph's signals: {signals})")
    for score in judge.scores:
        counted = "" if score.counted else " \\[not counted: its evidence is in neither the diff nor a changed file]"
        ui.say(f"  {score.score:g}  {ui.safe(score.dimension)}: {ui.safe(score.reason)}{counted}")
        ui.say(f"        evidence: {ui.safe(ui.one_line(score.evidence, 160))}")
    for item in judge.blocking:
        ui.say(f"  blocking: {ui.safe(item)}")
    for item in judge.suggestions:
        ui.say(f"  suggestion: {ui.safe(item)}")


def _say_changes(record: LapRecord, commit: str, diffstat: str) -> None:
    """The diffstat, each check's output tail, and why a lap that is not green is not."""
    ui.say(f"\n[bold]changes[/] ({record.parent[:10]}..{commit[:10]})\n{ui.safe(diffstat) or '(none)'}")
    for check in record.checks:
        mark = "[green]pass[/]" if check.passed else "[red]fail[/]"
        ui.say(f"\n[bold]check[/] {mark} {ui.safe(check.command)} (exit {check.exit_code}, {check.duration_s:.1f}s)")
        ui.say(ui.safe(check.output_tail[-1500:].rstrip()))
    if record.output_tail and record.status != LapStatus.GREEN:
        ui.say(f"\n[bold]why it is {record.status}[/]\n{ui.safe(record.output_tail[-2000:].rstrip())}")
