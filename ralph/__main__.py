"""The `ralph` command as a process runs it (`python -m ralph`, the console scripts, a parallel
run's forked slots)."""

import atexit
import os
import sys
from typing import NoReturn

from ralph.cli import main


def entry() -> NoReturn:
    """`main`, then an exit that does what exiting must (atexit's work: git's batch readers
    closed, a coverage file written; the output flushed) but not the teardown of every module
    and object, which the end of a run waited 0.05-0.1 s for."""
    try:
        main()
        code = 0
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 0 if ended.code is None else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            code = code or 1
    os._exit(code)


if __name__ == "__main__":
    entry()
