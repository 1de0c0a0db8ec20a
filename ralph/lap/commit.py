"""The lap's commit phase: every file the agent left, through the repository's hooks, made
into ralph's commit of the lap; and what the later phases need of it, read once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ralph import git, todo
from ralph.agents.base import AgentResult
from ralph.lap import commit_hooks
from ralph.lap.context import RunContext
from ralph.lap.this_lap import ThisLap
from ralph.show.text import printable
from ralph.verdict.commit_hooks import commit_message, unlinked
from ralph.verdict.decide import CommitFacts


@dataclass(frozen=True, kw_only=True)
class LapCommit:
    """One commit of the lap's, as the checks and the verdict see it: nobody reads it through
    git again."""

    sha: str
    parent: str  # the last green commit it was made (or rebased) onto
    changes: dict[str, tuple[str, str]]  # path → (status, mode), as git.changes gives them
    todo_before: list[todo.Item]  # TODO.md on `parent`
    todo_after: list[todo.Item]  # TODO.md in the commit
    refusal: tuple[str, str] | None = None  # why the hooks (or git) refused it, and their output
    split: str | None = None  # ralph's own commit of a stuck item's steps (split.py): that item

    @cached_property  # (read a few times a lap: at 80,000 items each reading cost 14 ms)
    def ticked(self) -> list[str]:
        return todo.newly_ticked(self.todo_before, self.todo_after)

    @cached_property
    def counts(self) -> todo.Counts:
        return todo.count(self.todo_after)

    def facts(self, nested: list[str]) -> CommitFacts:
        """What the verdict needs of it; `nested`: the repositories the lap made inside the tree."""
        return CommitFacts(
            files_changed=len(self.changes),
            refusal=self.refusal,
            nested=nested,
            ticked=self.ticked,
            todo_before=todo.count(self.todo_before),
            todo=self.counts,
            split=self.split is not None,
        )

    @classmethod
    def read(cls, ctx: RunContext, sha: str, parent: str, split: str | None = None) -> LapCommit:
        """A commit made elsewhere (a rebase), read from git."""
        name = ctx.config.files.todo
        return cls(
            sha=sha,
            parent=parent,
            changes=git.changes(ctx.top, parent, sha),
            todo_before=todo.parse(git.show_file(ctx.top, parent, name)),
            todo_after=todo.parse(git.show_file(ctx.top, sha, name)),
            split=split,
        )


def commit_lap(lap: ThisLap, agent: AgentResult) -> LapCommit:
    """Commit every file the agent left, its ticks counted against the TODO the lap started from
    (the last green TODO).

    The repository's hooks run on the lap's changes in the lap's own git dir (sandboxed, when
    laps are); the lap commit itself is ralph's, made from the files the hooks left. A refused
    lap is still committed, so it can be reviewed and the next lap told why.
    """
    ctx, green, todo_before = lap.ctx, lap.state.green, lap.prepared.todo_before
    workspace, timeout = ctx.workspace, ctx.config.limits.check_timeout
    workspace.verify()
    refusal = _hooks_refusal(lap, agent)
    tree, unstaged = workspace.stage(green, timeout)  # the files as the hooks left them
    if unstaged is not None:
        refusal = ("git could not stage the lap's files", unstaged)
    after = _todo_in(ctx, tree)
    ticked = todo.newly_ticked(todo_before, after)
    sha = workspace.commit_tree(tree, green, lap_message(lap, ticked, agent))
    return LapCommit(
        sha=sha,
        parent=green,
        changes=git.changes(ctx.top, green, sha),
        todo_before=todo_before,
        todo_after=after,
        refusal=refusal,
    )


def unjudged(lap: ThisLap, agent: AgentResult) -> LapCommit:
    """The lap's commit when its files could not be staged (or a split lap's without a split):
    the last green tree, nothing of the lap's."""
    green, todo_before = lap.state.green, lap.prepared.todo_before
    sha = lap.ctx.workspace.commit_tree(f"{green}^{{tree}}", green, lap_message(lap, [], agent))
    return LapCommit(sha=sha, parent=green, changes={}, todo_before=todo_before, todo_after=todo_before)


def lap_message(lap: ThisLap, ticked: list[str], agent: AgentResult) -> str:
    """The lap commit's message: its trailers say which issue the run is of, when agent.escalate
    ran it, or which item it split."""
    message = commit_message(lap.ctx.run_name, lap.number, ticked, agent)
    if lap.state.record.issue is not None:
        message += f"Ralph-Issue: {lap.state.record.issue.url}\n"
    if lap.turn.escalated:
        message += f"Ralph-Escalated: {agent.name or agent.kind}\n"
    if lap.turn.split is not None:
        message += f"Ralph-Split: {unlinked(lap.turn.split)}\n"
    return printable(message)


def _hooks_refusal(lap: ThisLap, agent: AgentResult) -> tuple[str, str] | None:
    """The repository's hooks on the staged lap, when it has any and commit.verify is on: they see
    the message the commit will have."""
    ctx, workspace = lap.ctx, lap.ctx.workspace
    if not (ctx.config.commit.verify and workspace.has_hooks()):
        return None
    staged = workspace.stage(lap.state.green, ctx.config.limits.check_timeout)[0]
    ticked = todo.newly_ticked(lap.prepared.todo_before, _todo_in(ctx, staged))
    return commit_hooks.run_on_lap(lap, staged, lap_message(lap, ticked, agent))


def _todo_in(ctx: RunContext, tree: str) -> list[todo.Item]:
    return todo.parse(git.show_file(ctx.top, tree, ctx.config.files.todo))
