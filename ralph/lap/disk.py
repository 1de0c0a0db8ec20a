"""A full disk under the lap workspace: told apart from the lap's own failure, and said."""

from __future__ import annotations

import errno
import shutil

from ralph.lap.context import RunContext
from ralph.verdict.checks import DISK_LOW


def full(ctx: RunContext, failed: BaseException | None = None) -> bool:
    """Is the disk of the workspace full (below checks.DISK_LOW free), or did `failed` say so?"""
    said = isinstance(failed, OSError) and failed.errno in (errno.ENOSPC, errno.EDQUOT)
    return said or shutil.disk_usage(ctx.workspace.root).free < DISK_LOW


def free(ctx: RunContext) -> str:
    return f"{shutil.disk_usage(ctx.workspace.root).free / (1 << 20):.0f} MB"


def full_disk(ctx: RunContext) -> str:
    return f"the disk that holds the lap workspace ({ctx.workspace.root.parent}) is full: {free(ctx)} free"
