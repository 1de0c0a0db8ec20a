"""`ralph run`: lap until done or a fuse blows."""

from __future__ import annotations

import sys

from ralph import api
from ralph.commands import answers
from ralph.errors import Exit
from ralph.isolation.hardening import harden
from ralph.run.options import RunOptions


def run(options: RunOptions) -> Exit:
    """The run, in a process hardened first: it may start again (same pid) without the secrets
    of its environment, so this comes before anything else of the run."""
    harden(sys.argv[1:])
    code = api.run_with(options)
    if options.slot is None:  # (a slot's end is not the run's: its coordinator keeps them)
        answers.after_run(options.cwd)  # the first `ralph status` after the run is answered at once
    return code
