"""A split lap: the planner role splits a stuck item into steps under it (docs/agents.md: Stuck items).

The lap is an ordinary one, of its own number, commit and note: ralph asks the planner role
(roles.planner's model, never the lap's agent that got stuck: run/fuses.py splits only where
there is one) for the steps, writes them into TODO.md as open items nested under the stuck
item, whose own line stays as it is and open, every other byte as it was, commits that alone and
judges it by the checks like any lap. The agent does not define done: the run is done only when
a lap ticks the item itself, and a step grants nothing (its `(may change: …)` is taken off).
The planner's answer is checked before anything is written: steps that would change another
item, tick one, repeat one, or come to fewer than 2 or more than MAX_ITEMS are refused, and the
lap is red for it, as it is when the planner gives no answer at all.

The repository's commit hooks do not run on a split: its commit is ralph's own edit of TODO.md
(items added, none changed: what `ralph hook todo` allows too), and there is no agent's work for
them to look at. Nor does roles.judge score it: there is no diff of work.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

from ralph import git, todo
from ralph.agents.base import AgentResult
from ralph.errors import RalphError
from ralph.lap import advance, checking, planning, prepare, record
from ralph.lap.commit import LapCommit, lap_message, unjudged
from ralph.lap.context import RunContext
from ralph.lap.this_lap import ThisLap
from ralph.lap.turn import Turn
from ralph.records.formats import LapRecord, LapStatus
from ralph.records.ledger import RunState
from ralph.show import ui
from ralph.verdict import grants
from ralph.verdict.decide import CannotCheck, Checked, CommitFacts, Evidence, Verdict, decide

MIN_ITEMS, MAX_ITEMS = 2, 20  # a split into one item is a rewording; into more, a plan of its own
ITEM_CHARS = 500  # an item is one line a lap reads
REASONS_SHOWN = 6  # the last red laps' reasons the planner is told
TASK = """\
{goal}

One item of the checklist is stuck: the last {laps} laps on it were red. Split that item, and
only that one, into smaller steps.

The stuck item: {item}

Why the last laps were red:
{reasons}

The other items of the checklist, which stay as they are:
{others}

Return as the plan's todo the steps ({low} to {high}) that together lead to the stuck item, in
order, each one line, a slice a single lap can finish and verify; do not repeat other items.
They go under the stuck item as its steps: the item itself stays, and is done only when a lap
meets its own words."""
_BOX_LINE = re.compile(r"([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)\[ \][ \t]")  # its bullet: where its text starts
_LINE_END = re.compile(r"(\r\n|\n|\r)$")


class SplitRefused(RalphError):
    """The planner's answer is not a split of the one item that leaves the rest as it is."""


def split_lap(ctx: RunContext, state: RunState, turn: Turn) -> LapRecord:
    """Lap `turn.number`: the planner role splits `turn.split`; the lap's commit is that TODO.md."""
    assert turn.split is not None
    item, started = turn.split, time.monotonic()
    lap = ThisLap(ctx, state, turn, prepare.start_lap(ctx, state, turn.number))
    (lap.log_dir / "planner").mkdir()
    try:
        planned = planning.by_the_role(ctx, state.green, task_for(ctx, state, item), lap.log_dir / "planner")
    except RalphError as failed:
        result = AgentResult(kind="planner", name="planner", outcome="failed", duration_s=_since(started))
        why = f"the planner could not split it: {ui.one_line(str(failed))}"
        return _unsplit(lap, result, why)
    result = AgentResult(
        kind="planner",
        name="planner",
        model=_planner_model(ctx),
        outcome="ok",
        duration_s=_since(started),
        summary=f"Split the stuck item into {len(planned.items)} steps under it: {item}",
        usage=planned.usage,
    )
    try:
        text = split_text(lap.prepared.todo_text or "", item, planned.items)
    except SplitRefused as refused:
        listed = "\n".join(f"- {child}" for child in planned.items)
        why = f"the planner's split was refused: {refused}"
        return _unsplit(lap, result, why, listed)
    made = _commit(lap, result, text)
    return _recorded(lap, result, made, _judged(lap, made))


def task_for(ctx: RunContext, state: RunState, item: str) -> str:
    """What the planner is asked: the goal, the item, why the laps on it were red, the rest."""
    since = [lap.record for lap in state.laps if lap.record and lap.record.parent == state.green]
    red = [record for record in since if record.status == LapStatus.RED][-REASONS_SHOWN:]
    reasons = "\n".join(f"- lap {record.lap}: {ui.one_line(record.reason, 300)}" for record in red)
    items = todo.parse(git.show_file(ctx.top, state.green, ctx.config.files.todo))
    others = "\n".join(f"- [{'x' if found.done else ' '}] {found.text}" for found in items if found.text != item)
    return TASK.format(
        goal=ctx.config.goal.strip(),
        laps=len(red),
        item=item,
        reasons=reasons or "- (none recorded)",
        others=others or "- (none)",
        low=MIN_ITEMS,
        high=MAX_ITEMS,
    )


def split_text(text: str, item: str, children: list[str]) -> str:
    """`text` (TODO.md) with `children`, open, nested under the first open `item` as its steps
    (after its own lines, where its text starts); the item's line stays, open. Raises
    SplitRefused unless those steps, under it, are all that changes."""
    children = _checked_children(text, item, children)
    found = todo.sources(text)
    at = next((n for n, (it, _, _) in enumerate(found) if it.text == item and not it.done), None)
    if at is None:
        raise SplitRefused(f"the TODO has no open item {item!r}")
    _, box_line, source = found[at]
    text_lines, own = todo.lines(text), len(todo.lines(source))
    box = _BOX_LINE.match(text_lines[box_line])
    if box is None or _ended("".join(text_lines[box_line : box_line + own])) != source:
        raise SplitRefused("the item's box is not where its lines start (write it as `- [ ] …`)")
    ending = _LINE_END.search(text_lines[box_line])
    under = re.sub(r"[^\t]", " ", box[1])  # the item's text's column: a list there is nested in it
    steps = [f"{under}- [ ] {child}{ending[1] if ending else chr(10)}" for child in children]
    written = _ended("".join(text_lines[: box_line + own])) + "".join(steps) + "".join(text_lines[box_line + own :])
    items = [(it.text, it.done) for it, _, _ in found]
    expected = [*items[: at + 1], *((child, False) for child in children), *items[at + 1 :]]
    if [(it.text, it.done) for it in todo.parse(written)] != expected or todo.nesting(written) != _nested(
        todo.nesting(text), at, len(children)
    ):
        raise SplitRefused("written into the TODO, its steps would not read back under it, the others unchanged")
    return written


def _nested(before: list[int | None], at: int, steps: int) -> list[int | None]:
    """Which item each item is nested in once `steps` items are nested under item `at`."""
    moved = [index + steps if index is not None and index > at else index for index in before]
    return [*moved[: at + 1], *[at] * steps, *moved[at + 1 :]]


def _checked_children(text: str, item: str, children: list[str]) -> list[str]:
    """The planner's items, one line each, new to the TODO and to each other, 2 to MAX_ITEMS,
    each without a grant: the user did not write them."""
    lines = [" ".join(grants.without(child).split()) for child in children]
    if not MIN_ITEMS <= len(lines) <= MAX_ITEMS:
        raise SplitRefused(f"{len(lines)} item(s): a split gives {MIN_ITEMS} to {MAX_ITEMS}")
    existing = {found.text for found in todo.parse(text)}
    for child in lines:
        if not child or len(child) > ITEM_CHARS:
            raise SplitRefused(f"an item must be one line of 1 to {ITEM_CHARS} characters")
        if re.match(r"\[[ xX]\]", child):
            raise SplitRefused(f"an item is its text, not a checkbox: {ui.one_line(child, 80)!r}")
        if child in existing:
            raise SplitRefused(f"it repeats an item the TODO has: {ui.one_line(child, 80)!r}")
    if len(set(lines)) != len(lines):
        raise SplitRefused("it gives one item twice")
    return lines


def _commit(lap: ThisLap, result: AgentResult, text: str) -> LapCommit:
    """The last green tree with TODO.md (`text`) written: the split lap's commit, made by ralph alone."""
    top, green = lap.ctx.top, lap.state.green
    tree = git.with_files(top, f"{green}^{{tree}}", {lap.ctx.config.files.todo: text})
    sha = git.commit_tree(top, tree, green, lap_message(lap, [], result))
    return LapCommit(
        sha=sha,
        parent=green,
        changes=git.changes(top, green, sha),
        todo_before=lap.prepared.todo_before,
        todo_after=todo.parse(text),
        split=lap.turn.split,
    )


def _judged(lap: ThisLap, made: LapCommit) -> Verdict:
    """The checks on the split's commit, against the last green commit's, as for any lap. The
    TODO rule (guard.todo_problems) was kept when the text was made: items added under the stuck
    one, nothing else; nothing else changed for the guard to look at."""
    try:
        checked: Checked | CannotCheck = checking.checks_on(lap, made)
    except CannotCheck as cannot:
        checked = cannot
    return decide(_evidence(lap, made.facts([]), checked))


def _evidence(lap: ThisLap, commit: CommitFacts, checked: Checked | CannotCheck | None) -> Evidence:
    """A split's evidence: ralph's own edit, no agent's outcome nor guard's report to weigh."""
    return Evidence(
        agent=None,
        commit=commit,
        checks=checked,
        last_green=lap.state.green_checks(),
        strict=lap.ctx.config.strict,
        kind="split",
    )


def _unsplit(lap: ThisLap, result: AgentResult, reason: str, detail: str = "") -> LapRecord:
    """A split that cannot happen: a red lap of the last green tree, and the run goes on."""
    made = unjudged(lap, result)
    verdict = decide(_evidence(lap, replace(made.facts([]), refusal=(reason, detail)), None))
    return _recorded(lap, result, made, verdict)


def _recorded(lap: ThisLap, result: AgentResult, made: LapCommit, verdict: Verdict) -> LapRecord:
    """The split lap's note saved, and the green line advanced to it when it is green."""
    ctx, turn, prepared = lap.ctx, lap.turn, lap.prepared
    facts = record.LapFacts(
        number=turn.number,
        started=prepared.started,
        started_at=prepared.started_at,
        prepare_s=prepared.prepare_s,
        agent=result,
        told=[],
        agent_index=turn.agent_index,
        slot=None,
        items=[],
        worker=ctx.worker,
        split=turn.split,
    )
    recorded = record.lap_record(ctx, lap.state, facts, made, verdict)
    record.save(ctx, recorded, {}, verdict.stop)
    return advance.advance(lap, facts, recorded)


def _planner_model(ctx: RunContext) -> str | None:
    endpoint = planning.role(ctx.config)
    return endpoint.model if endpoint is not None else None


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _ended(text: str) -> str:
    return text if text.endswith(("\n", "\r")) else text + "\n"
