"""`ralph hook todo`: the TODO integrity rule as a git pre-commit hook, for commits made outside
ralph's judgement (an agent CLI committing mid-lap, a person) — see hooks/pre-commit."""

from __future__ import annotations

from pathlib import Path

from ralph import git, proc, todo, ui
from ralph.errors import Exit
from ralph.guard import todo_problems


def todo_hook(cwd: Path, todo_name: str) -> Exit:
    """Refuse a commit whose staged TODO deletes or rewords an open item of HEAD's."""
    top = git.open_repo(cwd).top
    before = git.show_file(top, "HEAD", todo_name)
    # The index being committed: `git commit -a` and `git commit PATH` hand hooks a temporary
    # one in GIT_INDEX_FILE, which ralph's clean environment would otherwise drop.
    staged = git.show_file(top, "", todo_name, env=proc.clean_env(allow=("GIT_INDEX_FILE",)))
    if before is None or staged is None:
        return Exit.DONE
    problems = todo_problems(todo.parse(before), todo.parse(staged))
    for problem in problems:
        ui.error(f"{problem} — open items may only be ticked; add new items instead of rewording")
    return Exit.ERROR if problems else Exit.DONE
