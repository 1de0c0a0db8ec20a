"""An error's one line on stderr, with rich loaded only then: cli.py's edge needs it only when a
command fails, and `ralph status` answered from what it printed before loads no rich at all
(ralph/commands/answers.py)."""

from __future__ import annotations


def said(message: str, code: int) -> int:
    """`message` as ui.error prints it; `code` back, for the exit."""
    from ralph.show import ui

    ui.error(message)
    return code
