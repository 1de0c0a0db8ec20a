"""`ralph hook todo`: the TODO integrity rule as a git pre-commit hook, for commits made outside
ralph's judgement (an agent CLI committing mid-lap, a person) — see hooks/pre-commit."""

from __future__ import annotations

from pathlib import Path

from ralph import git, todo, ui
from ralph.errors import Exit
from ralph.guard import todo_problems


def todo_hook(cwd: Path, todo_name: str) -> Exit:
    """Refuse a commit whose staged TODO deletes or rewords an open item of HEAD's."""
    top = git.open_repo(cwd).top
    before = git.show_file(top, "HEAD", todo_name)
    staged = git.show_file(top, "", todo_name)  # `git show :path` is the index's version
    if before is None or staged is None:
        return Exit.DONE
    problems = todo_problems(todo.parse(before), todo.parse(staged))
    for problem in problems:
        ui.error(f"{problem} — open items may only be ticked; add new items instead of rewording")
    return Exit.ERROR if problems else Exit.DONE
