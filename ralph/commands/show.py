"""`ralph show LAP`: one lap's record, where its transcript or output log is, the built-in
agent's tool calls, diffstat and check output."""

from __future__ import annotations

from pathlib import Path

from ralph import git
from ralph.agents import transcript
from ralph.agents.judge import JudgeRecord
from ralph.agents.replies import arguments_summary
from ralph.errors import Exit, RalphError
from ralph.git import layout
from ralph.records import ledger
from ralph.records.formats import LapRecord, LapStatus
from ralph.records.ledger import Lap, RunState
from ralph.show import ui
from ralph.show.read_beside import watch

CALLS_SHOWN = 25  # the lap's first tool calls; the transcript has them all


def show(cwd: Path, number: int, run: str | None, *, as_json: bool) -> Exit:
    repo = git.find_repo(cwd)
    top = repo.top
    state = ledger.resolve(top, run)
    lap = _lap(state, number)
    record = lap.record
    diffstat = git.diffstat(top, record.parent if record else f"{lap.commit}^", lap.commit)
    folder = layout.lap_dir(layout.run_dir(repo.common_dir, state.name), number)
    kept = _Kept(folder, record.agent.kind if record else "")
    if as_json:
        dumped = record.model_dump(mode="json") if record else None
        ui.print_json({"lap": number, "commit": lap.commit, "record": dumped, "diffstat": diffstat} | kept.as_json())
        return Exit.DONE
    ui.say(f"[bold]lap {number}[/] of run {state.name}  commit {lap.commit}")
    if record is None:
        ui.say(f"no record: {ui.safe(lap.problem)}")
        return Exit.DONE
    _say_outcome(record, on_line=git.is_ancestor(top, lap.commit, state.green))
    _say_spending(state, record, number, kept)
    kept.say()
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


def _say_outcome(record: LapRecord, *, on_line: bool) -> None:
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
    if record.escalated:
        ui.say(f"stuck   escalated: agent.escalate ({ui.safe(record.agent.name)}) ran it, after red laps on one item")
    if record.split is not None:
        ui.say(f"stuck   split: the planner split {ui.safe(record.split)}")
    if record.agent.summary:
        ui.say(f"summary {ui.safe(record.agent.summary)}")
    said = ui.one_line(next(iter(record.agent.detail.strip().splitlines()), ""), 300)
    # The verdict's reason may stand where the agent's words were; a working agent's detail is
    # its output's tail, cut anywhere: its summary says it.
    if said and said not in record.reason and record.agent.outcome != "ok":
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
            + (f"; granted by your TODO: {ui.safe(', '.join(record.granted))}" if record.granted else "")
        )
    if record.flaky:
        ui.say(f"flaky   {ui.safe(', '.join(record.flaky))}")


def _say_spending(state: RunState, record: LapRecord, number: int, kept: _Kept) -> None:
    """Its tokens (the cached ones, the endpoint check's; how full the context was) and its cost,
    the judge's included."""
    usage = record.agent.usage
    if usage.requests or usage.total:  # the endpoint check's tokens, in a lap that asked nothing
        cached = f" (of which {usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
        check = kept.endpoint_check()
        checked = f"; the endpoint check's {check:,} included" if check else ""
        ui.say(
            f"tokens  {ui.many(usage.requests, 'request')}, {usage.prompt_tokens:,} prompt{cached} + "
            f"{usage.completion_tokens:,} completion{' (estimated)' if usage.estimated else ''}{checked}"
        )
        if usage.largest_prompt_tokens:  # an agent CLI tells no request's size: no bars of 0 tokens
            ui.context_bars(*state.context_bars(upto=number))
    judge = f" (judge {_usd(record.judge.usage.cost_usd)})" if record.judge else ""
    untold = " (its tool tells no cost)" if record.agent.kind == "command" and usage.cost_usd is None else ""
    ui.say(f"cost    {_usd(usage.cost_usd)}{untold}{judge}")


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


class _Kept:
    """What the lap's folder keeps of its agent: the built-in agent's transcript (its tool
    calls), a command agent's output log. A lap run on another machine, or a run whose folder
    was cleaned, keeps nothing here."""

    def __init__(self, folder: Path, kind: str):
        self.folder, self.kind = folder, kind
        self.transcript = folder / "transcript.jsonl"
        watch(self.transcript)  # read beside git: a kept answer holds while these are as they are
        watch(folder / "agent.log")
        self.records: list[dict] = []
        self.unreadable = ""
        if kind == "openai" and self.transcript.is_file():
            try:
                self.records = transcript.read(self.transcript)
            except (RalphError, ValueError, OSError) as exc:  # a newer format, a line a crash cut short, no access
                self.unreadable = str(exc)

    def calls(self) -> list[tuple[str, dict, bool]]:
        return transcript.tool_calls(self.records)

    def endpoint_check(self) -> int:
        usage = transcript.endpoint_check(self.records) or {}
        counts = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
        return sum(count for count in counts if isinstance(count, int) and count >= 0)

    def as_json(self) -> dict:
        if self.kind != "openai":
            log = self.folder / "agent.log"
            return {"output_log": str(log) if log.is_file() else None}
        calls = [
            {"name": name, "arguments": arguments, "from_text": written} for name, arguments, written in self.calls()
        ]
        return {"transcript": str(self.transcript) if self.transcript.is_file() else None, "tool_calls": calls}

    def say(self) -> None:
        if self.kind != "openai":
            log = self.folder / "agent.log"
            if log.is_file():
                ui.say(f"output  {ui.safe(log)}")
            return
        if not self.transcript.is_file():
            ui.say(f"transcript {ui.safe(self.transcript)} — not here (cleaned, or the lap ran on another machine)")
            return
        ui.say(f"transcript {ui.safe(self.transcript)}")
        if self.unreadable:
            ui.say(f"  unreadable: {ui.safe(self.unreadable)}")
            return
        calls = self.calls()
        ui.say(f"tool calls {len(calls)}" + ("" if calls else " (none)"))
        for index, (name, arguments, written) in enumerate(calls[:CALLS_SHOWN], 1):
            as_text = " (written as text)" if written else ""
            ui.say(f"  {index:>2}. {ui.safe(name)}  {ui.safe(arguments_summary(name, arguments))}{as_text}")
        if len(calls) > CALLS_SHOWN:
            ui.say(f"  … and {len(calls) - CALLS_SHOWN} more")
