"""An unsandboxed lap's reach into the shared repository: watched, and put back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ralph.lap.context import RunContext
from ralph.workspace import user_state


@contextmanager
def watching_the_repository(ctx: RunContext, number: int) -> Iterator[list[str]]:
    """Yields a list that, on leaving, holds what changed in the shared repository state
    (and was put back). The snapshot is also on disk until then, for a resume after kill -9.
    Sandboxed laps cannot write the repository at all: nothing to watch. A ralph.api caller's
    agent (kind python) runs in the caller's process, outside the sandbox: watched always."""
    if ctx.sandboxed and ctx.config.agent.kind != "python":
        yield []
        return
    saved = user_state.saved_at(ctx.repo.common_dir, ctx.run_name)
    before = user_state.snapshot(ctx.top, ctx.repo.common_dir)
    before.save(saved)
    tampered: list[str] = []
    try:
        yield tampered
    finally:
        tampered += user_state.put_back(ctx.top, ctx.repo.common_dir, before, f"lap {number}")
        saved.unlink(missing_ok=True)
