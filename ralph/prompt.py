"""The lap prompt: what a fresh agent is told at the start of a lap (both agent kinds)."""

from __future__ import annotations

from dataclasses import dataclass

RULES = """\
Rules for this lap:
- You are one lap of a longer job, with a fresh start. Work on the next unticked items
  of {todo}; do a slice you can finish and verify now rather than everything at once.
- Tick (`- [x]`) only the items you really finished. Do not delete or reword items.
- Before you stop, rewrite {progress} as a short handoff for the next lap: what is done,
  what is next, what you tried that failed and why. Keep it under about 60 lines.
- Do not weaken, skip or delete tests unless a TODO item says so.
- Your edits are committed when you stop; then the repository's checks decide whether
  the lap is kept. Checks: {checks}
"""


@dataclass(frozen=True)
class LastFailure:
    """What the previous (red) lap tried and why it was discarded."""

    lap: int
    reason: str
    diffstat: str
    output_tail: str


def build(goal: str, todo_name: str, todo_text: str | None, progress_name: str,
          progress_text: str | None, checks: list[str], failure: LastFailure | None) -> str:
    parts = [
        f"# Goal\n{goal.strip()}\n",
        RULES.format(todo=todo_name, progress=progress_name,
                     checks="; ".join(f"`{c}`" for c in checks) or "(none configured)"),
        f"# {todo_name}\n{(todo_text or '(missing — create it as a checklist)').strip()}\n",
        f"# {progress_name}\n{(progress_text or '(empty: this is the first lap)').strip()}\n",
    ]
    if failure:
        parts.append(
            f"# The previous lap (lap {failure.lap}) was red and its edits were discarded\n"
            f"Reason: {failure.reason}\n\nWhat it changed:\n{failure.diffstat.strip() or '(nothing)'}\n\n"
            f"Output that failed (tail):\n```\n{failure.output_tail.strip()}\n```\n"
            "Do not repeat that mistake; your worktree starts again from the last green commit.\n"
        )
    return "\n".join(parts)
