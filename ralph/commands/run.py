"""`ralph run`: lap until done or a fuse blows."""

from __future__ import annotations

import sys

from ralph import api
from ralph.errors import Exit
from ralph.isolation.hardening import harden
from ralph.run.options import RunOptions


def run(options: RunOptions) -> Exit:
    """The run, in a process hardened first: it may start again (same pid) without the secrets
    of its environment, so this comes before anything else of the run."""
    harden(sys.argv[1:])
    return api.run_with(options)
