"""Setup and every check once on one commit, outside any run: in a workspace and sandbox of
their own, as a lap's checks run. `ralph doctor` tries a repository's checks this way; `ralph
bench` scores what a run left."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ralph import git
from ralph.config import Config
from ralph.isolation import proc
from ralph.lap.context import RunContext
from ralph.lap.prepare import workspace_at
from ralph.verdict.checks import CheckResult
from ralph.workspace.workspace import Workspace


def checks_at(repo: git.RepoInfo, cfg: Config, commit: str, name: str, *, sandboxed: bool) -> list[CheckResult]:
    """Each check's result on `commit`; raises SetupFailed when setup fails there."""
    env = proc.lap_env(tuple(cfg.env.pass_))
    workspace = Workspace.create(repo.top, repo.common_dir, f"{name}-{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory(prefix=f"ralph-{name}-") as folder:
            logs = Path(folder)
            ctx = RunContext(
                repo=repo,
                run_name=name,
                config=cfg,
                run_dir=logs,
                agents=(),
                env=env,
                workspace=workspace,
                sandboxed=sandboxed,
            )
            workspace_at(ctx, commit, 0, logs)
            return ctx.check(logs)
    finally:
        workspace.release()
