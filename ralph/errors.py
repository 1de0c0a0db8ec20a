"""The errors ralph raises and the exit codes they become (only cli.py turns them into exits)."""

from enum import IntEnum


class Exit(IntEnum):
    """`ralph run` exit codes, documented in docs/commands.md (tests/test_docs.py holds it to these)."""

    DONE = 0
    ERROR = 1
    MAX_LAPS = 3
    STAGNATION = 4
    MAX_MINUTES = 5
    API_ERRORS = 6
    MAX_TOKENS = 7
    INTERRUPTED = 130


class RalphError(Exception):
    """A problem the user can act on: the message says what went wrong and what to do."""

    exit_code = Exit.ERROR


class EndpointUnusable(RalphError):
    """The model endpoint failed the check made before a run starts."""

    exit_code = Exit.API_ERRORS


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; a BaseException so that `except Exception` cannot swallow it."""
