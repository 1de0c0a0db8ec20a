"""ralph's own retry for one model request (the client's is off, so waits are visible and bounded).

408, 409, 429, 5xx, silence (`NoAnswer`), a stream cut short and connection errors are
retried, waiting as long as the server's hints say (`retry-after-ms`, `Retry-After` in
seconds or as an HTTP date; capped), else backing off exponentially with jitter;
`x-should-retry` overrules the status, as in the OpenAI SDK. Anything else (400, 401, 403,
404, …), and a 500 whose body is a validation error of the request, fails at once: asking
again cannot help. No wait runs past the deadline.

Not tenacity (tried for issue 40; every retry test passed): it would replace only the loop,
and what it cannot do stays ralph's: three failures told apart (not retryable; the wait would
pass the deadline; N attempts), and a reply that ran out of time told with the error of the
attempt before it. Through its wait, stop and before_sleep hooks and its per-attempt state,
that came to 50 lines more, not fewer.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, TypeVar

from ralph.show.ui import one_line

if TYPE_CHECKING:
    import openai

MAX_ATTEMPTS = 5
BACKOFF_BASE = 1.0  # seconds before the first retry; doubles each time
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 120.0
RETRYABLE_STATUS = {408, 409, 429}  # and every 5xx
SUMMARY_CHARS = 300  # of a server's error, in the one-line summary (the transcript keeps it whole)

T = TypeVar("T")


class RequestFailed(Exception):
    """The request cannot succeed within this lap; `message` names the endpoint and the last error."""

    def __init__(self, message: str, status: int | None = None, body: str = ""):
        super().__init__(message)
        self.message = message  # one line, for notes and `ralph log`
        self.status = status  # the last HTTP status, when there was one
        self.body = body  # the server's whole answer to the last attempt, for the transcript and `ralph show`


class Transient(Exception):
    """One attempt failed in a way that asking again may cure; its text says how."""


class StreamBroken(Transient):
    """The connection broke, or closed, before the streamed reply's end."""


class NoAnswer(Transient):
    """Nothing came from the endpoint for `seconds` (agent.request_timeout): down or stuck. A
    streamed reply sends a chunk per token, so silence means that; a reply in one piece cannot
    tell a busy server from a stuck one, and says so."""

    def __init__(self, seconds: float, *, streamed: bool, received: int = 0):
        said = f"no answer for {round(seconds, 1):g} s (the endpoint may be down or stuck)"
        if received:
            said += f", about {received} tokens into its reply"
        if not streamed:
            said += "; it does not stream, so a reply slower than that looks the same (docs/agents.md: Slow servers)"
        super().__init__(said)


class StillAnswering(Exception):
    """The time for the request ran out before its reply's end: a slow server, not a dead one,
    when the reply (or a keep-alive) was arriving; when nothing had come, a server that had not
    answered yet, the time left having been shorter than agent.request_timeout. Not retried:
    asking again would be as slow, and there is no time left to."""

    def __init__(self, seconds: float, tokens: int, generating: float, *, answered: bool = True):
        self.seconds, self.tokens, self.answered = seconds, tokens, answered
        rate = tokens / generating if generating > 0 else 0.0
        digits = 0 if rate >= 10 else 1
        if not answered:
            said = f"not answering yet after {seconds:.1f} s"
        else:
            said = f"still answering after {seconds:.0f} s at about {rate:.{digits}f} tokens/s"
        if answered and not tokens:
            said += " (nothing but keep-alives yet: it was still reading the prompt)"
        super().__init__(said)


def call_with_retry(
    request: Callable[[], T],
    *,
    endpoint: str,
    deadline: float,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, str, float], None] = lambda attempt, error, wait: None,
    attempts: int = MAX_ATTEMPTS,
) -> T:
    """`request()`, retried on transient failures; `deadline` is a time.monotonic() value."""
    import openai  # here, not at the top: a run of an agent CLI never pays for importing it

    status, body, error = None, "", ""
    for attempt in range(1, attempts + 1):
        try:
            return request()
        except openai.APIStatusError as exc:
            error, status, body = describe(exc), exc.status_code, exc.response.text
            if not retryable(exc):
                raise RequestFailed(f"model request to {endpoint} failed: {error}", status, body) from None
            wait = retry_after(exc)
            wait = backoff(attempt) if wait is None else wait
        except openai.APIConnectionError as exc:
            error, status, body, wait = describe(exc), None, "", backoff(attempt)
        except Transient as exc:  # a hang ended by agent.request_timeout, a stream cut short
            error, status, body, wait = str(exc), None, "", backoff(attempt)
        except StillAnswering as slow:
            if slow.answered or attempt == 1:
                raise
            # Silent again, with less time than request_timeout left: the failures before this
            # one, not the lap's time, are what the endpoint did
            raise RequestFailed(
                f"model request to {endpoint} failed {_times(attempt - 1)}, then ran out of time before "
                f"it answered again; last error: {error}",
                status,
                body,
            ) from None
        if attempt == attempts:
            break
        if time.monotonic() + wait > deadline:
            raise RequestFailed(
                f"model request to {endpoint} failed: {error} "
                f"(not retried: waiting {wait:g}s would pass the lap's deadline)",
                status,
                body,
            )
        on_retry(attempt, error, wait)
        sleep(wait)
    raise RequestFailed(f"model request to {endpoint} failed {attempts} times; last error: {error}", status, body)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


_VALIDATION = re.compile(r"validation error|ValidationError|Input should be", re.IGNORECASE)


def retryable(exc: openai.APIStatusError) -> bool:
    said = exc.response.headers.get("x-should-retry", "").lower()
    if said in ("true", "false"):
        return said == "true"
    if exc.code == "insufficient_quota":
        return False  # OpenAI sends this as a 429, but waiting does not refill a quota
    if exc.status_code >= 500:
        return not _VALIDATION.search(exc.response.text)  # the same request fails the same way
    return exc.status_code in RETRYABLE_STATUS


def retry_after(exc: openai.APIStatusError) -> float | None:
    """The server's requested wait in seconds, capped; None when it gave none we can read."""
    headers = exc.response.headers
    try:
        return _capped(float(headers["retry-after-ms"]) / 1000)
    except (KeyError, ValueError):
        pass
    given = headers.get("retry-after", "").strip()
    try:
        return _capped(float(given))
    except ValueError:
        pass
    try:
        return _capped(parsedate_to_datetime(given).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def _capped(seconds: float) -> float | None:
    """Between 0 and the cap; None for a server's "nan" or "inf", which no wait can honour."""
    return min(max(seconds, 0.0), RETRY_AFTER_CAP) if math.isfinite(seconds) else None


def backoff(attempt: int) -> float:
    """Exponential, with jitter so that parallel runs do not retry in lockstep."""
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))
    return round(ceiling * random.uniform(0.5, 1.0), 3)


def describe(exc: openai.APIError) -> str:
    """One line: the HTTP status and the server's message, or the connection problem."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        detail = body.get("message") if isinstance(body, dict) else body  # a proxy's page is text
        detail = detail if isinstance(detail, str) and detail.strip() else exc.message
        return f"HTTP {exc.status_code}: {one_line(detail, SUMMARY_CHARS)}"
    cause = f" ({exc.__cause__})" if exc.__cause__ else ""
    return one_line(f"{exc.message}{cause}", SUMMARY_CHARS)
