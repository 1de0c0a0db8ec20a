"""The lap prompt: what a fresh agent is told at the start of a lap (both agent kinds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ralph.config import Config

SLICE = """\
- You are one lap of a longer job, with a fresh start. Work on the next unticked items
  of {todo}; do a slice you can finish and verify now rather than everything at once."""
HANDOFF = """
- Before you stop, rewrite {progress} as a short handoff for the next lap: what is done,
  what is next, what you tried that failed and why. Keep it under about 60 lines."""
# `ralph bench --mode session`: the same agent given the whole job as its one lap, no next lap.
WHOLE_JOB = """\
- You have the whole job in this one session: work through every unticked item of {todo},
  verifying each as you go, until none is left."""
RULES = """\
Rules for this lap:
{scope}
- Tick (`- [x]`) only the items you really finished. Do not delete or reword items;
  you may add new ones. An item with steps under it is done only when its own words are
  met, not when its steps are ticked.{handoff}
- Do not weaken, skip or delete tests unless a TODO item says so.
- Protected files may gain new files beside them but may not be modified or deleted,
  unless the user's TODO item grants it with `(may change: PATH)`: {protect}
- Tool, runner, CI and agent configuration, dependency manifests and lockfiles, .env files,
  installed code and paths outside `scope:` in ralph.yaml are not yours to change either, unless
  the user's TODO item grants them so.
- Your edits are committed when you stop; then the repository's checks decide whether
  the lap is kept: every test and check that passed before must still pass. Checks: {checks}
"""


# Characters of each file the prompt carries: a lap may leave PROGRESS.md at any size, and every
# later lap's prompt (and its tokens) would carry it whole. The agent is told what was cut.
TODO_SHOWN = 64_000
PROGRESS_SHOWN = 16_000


def shown(name: str, text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and a line saying how much more is in the file."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit("\n", 1)[0] if "\n" in text[:limit] else text[:limit]
    return f"{cut}\n[ralph: {name} goes on for {len(text) - len(cut):,} more characters: read it in the work tree]"


@dataclass(frozen=True)
class LastFailure:
    """What the previous (red) lap tried and why it was discarded."""

    lap: int
    reason: str
    diffstat: str
    output_tail: str


@dataclass(frozen=True, kw_only=True)
class PromptFacts:
    """What one lap's prompt tells besides the configuration: the files as the lap finds them,
    the last red lap, the user's messages, and the lap's part of the run. `items` and `slot`
    (the heading of its PROGRESS section): a lap of a parallel run; `best_of`: one of that many
    candidates on its one item (`items`), whose progress note is the run's if it is chosen;
    `whole_job`: the one lap of a bench's session mode."""

    todo_text: str | None
    progress_text: str | None
    failure: LastFailure | None = None
    told: Sequence[str] = ()
    items: Sequence[str] = ()
    slot: str | None = None
    whole_job: bool = False
    best_of: int = 0


def build(config: Config, facts: PromptFacts) -> str:
    """The lap's prompt: the goal, the rules, the TODO and the progress note, and what `facts`
    add of the lap's own."""
    whole_job, items, told, failure = facts.whole_job, facts.items, facts.told, facts.failure
    todo_text = facts.todo_text or "(missing — create it as a checklist)"
    progress_text = facts.progress_text or "(empty: this is the first lap)"
    files = config.files
    parts = [
        f"# Goal\n{config.goal.strip()}\n",
        RULES.format(
            scope=(WHOLE_JOB if whole_job else SLICE).format(todo=files.todo),
            handoff="" if whole_job else HANDOFF.format(progress=files.progress),
            progress=files.progress,
            protect=", ".join(config.protected) or "(none)",
            checks="; ".join(f"`{c}`" for c in config.check_commands) or "(none configured)",
        ),
        f"# {files.todo}\n{shown(files.todo, todo_text, TODO_SHOWN)}\n",
        f"# {files.progress}\n{shown(files.progress, progress_text, PROGRESS_SHOWN)}\n",
    ]
    if facts.best_of:
        parts.append(
            f"# Your item\n{facts.best_of} laps try this item at the same time, each from the same commit; the "
            f"best of them is kept. Work on it only, and tick only it:\n- {items[0]}\n"
        )
    elif items:
        listed = "\n".join(f"- {item}" for item in items)
        parts.append(
            f"# Your items\nOther laps work on the other items at the same time. Work on these only, "
            f"and tick only these:\n{listed}\nIn {files.progress}, write your handoff under the heading "
            f"`{facts.slot}` only (add it if it is missing) and leave the other sections as they are.\n"
        )
    if told:
        said = "\n".join(f"- {' '.join(message.split())}" for message in told)
        parts.append(f"# From the user\nWhile the job runs, the user asks:\n{said}\n")
    if failure:
        parts.append(
            f"# The previous lap (lap {failure.lap}) was red and its edits were discarded\n"
            f"Reason: {failure.reason}\n\nWhat it changed:\n{failure.diffstat.strip() or '(nothing)'}\n\n"
            f"Output that failed (tail):\n```\n{failure.output_tail.strip()}\n```\n"
            "Do not repeat that mistake; your worktree starts again from the last green commit.\n"
        )
    return "\n".join(parts)


def slot_heading(slot: int) -> str:
    """The heading of a slot's own section of PROGRESS.md, which laps side by side each keep."""
    return f"## Slot {slot}"
