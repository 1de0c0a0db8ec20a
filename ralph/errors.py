"""The errors ralph raises and the exit codes they become (only cli.py turns them into exits)."""

from enum import IntEnum


class Exit(IntEnum):
    """`ralph run` exit codes, documented in docs/commands.md (tests/test_docs.py holds it to these)."""

    DONE = 0
    ERROR = 1
    MAX_LAPS = 3
    STAGNATION = 4
    TIME_SPENT = 5  # limits.max_minutes, or an agent's usage limit that resets after it
    AGENT_UNUSABLE = 6  # the endpoint fails or an agent stays limited or keeps erring
    BUDGET_SPENT = 7  # limits.max_tokens or max_cost_usd, or a cost that can no longer be known
    INTERRUPTED = 130

    @property
    def status(self) -> str:
        """The word hooks get in RALPH_STATUS when the run ends: the name in lower case, but the
        words 5, 6 and 7 had before their names said what they cover, since scripts match on them."""
        return _HOOK_WORDS.get(self, self.name.lower())


_HOOK_WORDS = {Exit.TIME_SPENT: "max_minutes", Exit.AGENT_UNUSABLE: "api_errors", Exit.BUDGET_SPENT: "max_tokens"}


class RalphError(Exception):
    """A problem the user can act on: the message says what went wrong and what to do."""

    exit_code = Exit.ERROR


class EndpointUnusable(RalphError):
    """The model endpoint failed the check made before a run starts."""

    exit_code = Exit.AGENT_UNUSABLE


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; a BaseException so that `except Exception` cannot swallow it."""
