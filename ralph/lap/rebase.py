"""A lap's commit replayed onto a green line that moved under it (laps side by side): TODO.md
and PROGRESS.md merged by meaning, everything else by git."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ralph import git, todo
from ralph.lap.context import RunContext
from ralph.lap.prompt import slot_heading


def rebase_lap(ctx: RunContext, commit: str, parent: str, onto: str, slot: int | None) -> tuple[str | None, list[str]]:
    """The lap's commit (made on `parent`) replayed onto `onto`, or None and the paths that
    conflict. TODO.md and PROGRESS.md never conflict: the lap's ticks (and new items) are put
    onto `onto`'s TODO, and its PROGRESS note onto `onto`'s: its own section of it when laps
    run side by side, else the whole note, which each lap rewrites."""
    top, files = ctx.top, ctx.config.files
    notes = [name for name in (files.todo, files.progress) if git.show_file(top, commit, name) is not None]
    # git merges the rest; what it makes of the two (a conflict, often: ticks on lines side by
    # side) is replaced below, so only the rest can conflict.
    tree, conflicts = _merged(top, onto, commit)
    conflicts = [path for path in conflicts if path not in notes]
    if conflicts:
        return None, conflicts
    ours: dict[str, str] = {}
    if files.todo in notes:
        before = git.show_file(top, parent, files.todo) or ""
        after = git.show_file(top, commit, files.todo) or ""
        ours[files.todo] = _todo_onto(before, after, git.show_file(top, onto, files.todo) or "")
    if files.progress in notes:
        theirs = git.show_file(top, onto, files.progress) or ""
        mine = git.show_file(top, commit, files.progress) or ""
        ours[files.progress] = mine if slot is None else progress_with(theirs, mine, slot)
    message = git.message_of(top, commit)
    return git.commit_tree(top, git.with_files(top, tree, ours), onto, message), []


def _merged(top: Path, onto: str, commit: str) -> tuple[str, list[str]]:
    """`commit` merged onto `onto` as a cherry-pick would (their merge base is the lap's start):
    the tree, its conflicts written into the files as git writes them, and the paths in conflict."""
    merged = git.run(top, "merge-tree", "--write-tree", "--name-only", "--no-messages", onto, commit, check=False)
    if merged.exit_code not in (0, 1) or not merged.output.strip():  # (no tree: not two commits)
        raise git.GitFailed(["merge-tree", onto, commit], merged)
    tree, *conflicts = merged.output.splitlines()
    return tree, sorted({path for path in conflicts if path})


def _todo_onto(before_text: str, after_text: str, onto_text: str) -> str:
    """`onto_text` (TODO.md on the green line) with the lap's ticks, and the items it added, whole."""
    before = todo.parse(before_text)
    known = Counter(item.text for item in before)
    added = []
    for item, _, source in todo.sources(after_text):
        if known[item.text] > 0:
            known[item.text] -= 1
        else:
            added.append(source)
    return todo.combined(onto_text, todo.newly_ticked(before, todo.parse(after_text)), added)


def progress_with(theirs: str, mine: str, slot: int) -> str:
    """`theirs` (PROGRESS.md on the green line) with slot `slot`'s section as `mine` has it
    (its last, when the lap wrote the heading more than once)."""
    written = list(_sections(mine, slot))
    if not written:
        return theirs
    start, end = written[-1]
    section = mine[start:end] if mine[start:end].endswith(("\n", "\r")) else mine[start:end] + "\n"
    current = next(_sections(theirs, slot), None)
    if current is not None:
        return theirs[: current[0]] + section + theirs[current[1] :]
    return theirs + ("" if not theirs or theirs.endswith(("\n", "\r")) else "\n") + "\n" + section


def _sections(text: str, slot: int) -> Iterator[tuple[int, int]]:
    """Where each stretch from the slot's heading to the next heading of that level, or the
    end, starts and ends; by lines as todo.lines has them (a CRLF file's heading is one too)."""
    heading, start, at = slot_heading(slot), None, 0
    for line in todo.lines(text):
        bare = line.rstrip("\r\n")
        if start is not None and bare.startswith("## "):
            yield start, at
            start = None
        if start is None and bare.rstrip(" \t") == heading:
            start = at
        at += len(line)
    if start is not None:
        yield start, at
