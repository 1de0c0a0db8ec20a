"""Where ralph keeps what it makes outside the repository, in the user's cache:

    <cache>/ralph/workspaces/<run>-<id>/    a run's workspace while it runs (workspace.py)
    <cache>/ralph/workspaces/idle/<id>/     the workspaces ended runs released (reuse.py)
    <cache>/ralph/pre-commit/<id>-2/        the hooks' environments (hook_cache)
    <cache>/ralph/trash/                    folders deleted in the background (files.use_trash)

<id> names the repository: its git dir, hashed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def workspaces_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).resolve() / "ralph" / "workspaces"


def trash() -> Path:
    """Where folders of ralph's cache go to be deleted in the background (files.use_trash)."""
    return workspaces_root().parent / "trash"


def folder_for(common_dir: Path, run: str) -> Path:
    return workspaces_root() / f"{run}-{repo_id(common_dir)}"


def idle_root(common_dir: Path) -> Path:
    """Where the workspaces that runs of this repository released wait for the next run."""
    return workspaces_root() / "idle" / repo_id(common_dir)


def released(common_dir: Path) -> list[Path]:
    """The workspaces ended runs of this repository released, waiting for the next run."""
    idle = idle_root(common_dir)
    return sorted(idle.iterdir()) if idle.is_dir() else []


def hook_cache(common_dir: Path) -> Path:
    """pre-commit's cache for the hooks that judge this repository's laps: kept across runs so
    hook environments install once, and never the user's own, which code a lap's hook runs
    could otherwise plant a program in for the user's next commit. Written only by the hooks'
    try-out on a run's base commit, read-only to laps (ralph/verdict/commit_hooks.py); `-2`: the
    folders before it were the laps' to write, and a stub one left there is never run again."""
    return workspaces_root().parent / "pre-commit" / f"{repo_id(common_dir)}-2"


def repo_id(common_dir: Path) -> str:
    return hashlib.sha256(str(common_dir).encode()).hexdigest()[:12]
