"""`ralph hook todo|progress|guard`: ralph's rules as git pre-commit hooks, for commits made
outside ralph's judgement (an agent CLI committing mid-lap, a person) — see hooks/ and
.pre-commit-hooks.yaml."""

from __future__ import annotations

from pathlib import Path

from ralph import git, todo
from ralph.errors import Exit
from ralph.isolation import proc
from ralph.show import ui
from ralph.verdict.guard import todo_problems


def todo_hook(cwd: Path, todo_name: str) -> Exit:
    """Refuse a commit whose staged TODO deletes or rewords an open item of HEAD's."""
    top = git.open_repo(cwd).top
    before = git.show_file(top, "HEAD", todo_name)
    staged = _staged(top, todo_name)
    if before is None or staged is None:
        return Exit.DONE
    problems = todo_problems(todo.parse(before), todo.parse(staged))
    for problem in problems:
        ui.error(f"{problem} — open items may only be ticked; add new items instead of rewording")
    return Exit.ERROR if problems else Exit.DONE


def _staged(top: Path, name: str) -> str | None:
    """A file as the commit being made holds it (`git commit -a` hands hooks its own index)."""
    return git.show_file(top, "", name, env=proc.clean_env(allow=("GIT_INDEX_FILE",)))


def progress_hook(cwd: Path, progress_name: str, max_chars: int) -> Exit:
    """Refuse a commit whose PROGRESS.md is over its budget: a handoff, not a diary."""
    top = git.open_repo(cwd).top
    staged = _staged(top, progress_name)
    if staged is not None and len(staged) > max_chars:
        ui.error(
            f"{progress_name} is {len(staged):,} characters, over its budget of {max_chars:,} — "
            "keep it a short handoff: done, next, tried and failed"
        )
        return Exit.ERROR
    return Exit.DONE


def guard_hook(cwd: Path) -> Exit:
    """Refuse a commit on a ralph/* branch: the green line holds only laps ralph checked."""
    repo = git.open_repo(cwd)
    if repo.branch is not None and repo.branch.startswith("ralph/"):
        ui.error(
            f"{repo.branch} is a run's green line: only laps ralph checked go there — commit on "
            "your own branch (`ralph land` brings the run's work onto it)"
        )
        return Exit.ERROR
    return Exit.DONE
