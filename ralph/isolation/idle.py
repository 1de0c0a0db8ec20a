"""A command told hung from a slow one: silent, and no file changed, for a while."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ralph.isolation.files import walk


@dataclass
class Idle:
    """Stops a command that prints nothing and changes no file under `watch` for `seconds`
    (`limits.idle_timeout`): a hung agent or check, told apart from a slow one."""

    seconds: float
    watch: Path
    heard: float = field(default_factory=time.monotonic)  # the last sign of life
    fired: bool = False

    def expired(self, now: float) -> bool:
        if now - self.heard < self.seconds:
            return False
        if _changed_since(self.watch, time.time() - (now - self.heard)):
            self.heard = now
            return False
        self.fired = True
        return True


def _changed_since(top: Path, since: float) -> bool:
    """Whether a file or folder under `top` (but .git) was written after `since` (Unix time)."""
    for folder, folders, names in walk(top):
        if folder == str(top):  # the lap's git dir: ralph's own writes; a nested one is the agent's work
            folders[:] = [name for name in folders if name != ".git"]
        for name in [*folders, *names, ""]:
            try:
                if os.lstat(os.path.join(folder, name)).st_mtime > since:
                    return True
            except OSError:
                continue
    return False
