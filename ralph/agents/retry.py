"""ralph's own retry for one model request (the client's is off, so waits are visible and bounded).

429 waits as long as `Retry-After` says (capped); 408, 409, 5xx, timeouts and connection
errors back off exponentially with jitter; anything else (400, 401, 403, 404, …) fails at
once, since asking again cannot help. No wait ever runs past the lap's deadline.
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

import openai

MAX_ATTEMPTS = 5
BACKOFF_BASE = 1.0  # seconds before the first retry; doubles each time
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 120.0
RETRYABLE_STATUS = {408, 409, 429}  # and every 5xx

T = TypeVar("T")


class RequestFailed(Exception):
    """The request cannot succeed within this lap; `message` names the endpoint and the last error."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status  # the last HTTP status, when there was one


def call_with_retry(request: Callable[[], T], *, endpoint: str, deadline: float,
                    sleep: Callable[[float], None] = time.sleep,
                    on_retry: Callable[[int, str, float], None] = lambda attempt, error, wait: None,
                    attempts: int = MAX_ATTEMPTS) -> T:
    """`request()`, retried on transient failures; `deadline` is a time.monotonic() value."""
    status = None
    for attempt in range(1, attempts + 1):
        try:
            return request()
        except openai.APIStatusError as exc:
            error, status = describe(exc), exc.status_code
            if not retryable(exc):
                raise RequestFailed(f"model request to {endpoint} failed: {error}", exc.status_code) from None
            wait = retry_after(exc)
            wait = backoff(attempt) if wait is None else wait
        except openai.APIConnectionError as exc:  # APITimeoutError included: a hang ended by the timeout
            error, status, wait = describe(exc), None, backoff(attempt)
        if attempt == attempts:
            break
        if time.monotonic() + wait > deadline:
            raise RequestFailed(f"model request to {endpoint} failed: {error} "
                                f"(not retried: waiting {wait:g}s would pass the lap's deadline)", status)
        on_retry(attempt, error, wait)
        sleep(wait)
    raise RequestFailed(f"model request to {endpoint} failed {attempts} times; last error: {error}", status)


def retryable(exc: openai.APIStatusError) -> bool:
    if exc.code == "insufficient_quota":
        return False  # OpenAI sends this as a 429, but waiting does not refill a quota
    return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500


def retry_after(exc: openai.APIStatusError) -> float | None:
    """The server's requested wait in seconds, capped; None when it gave none we can read.

    Only the delta-seconds form is read; an HTTP-date falls back to backoff.
    """
    if exc.status_code != 429:
        return None
    try:
        seconds = float(exc.response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def backoff(attempt: int) -> float:
    """Exponential, with jitter so that parallel runs do not retry in lockstep."""
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))
    return round(ceiling * random.uniform(0.5, 1.0), 3)


def describe(exc: openai.APIError) -> str:
    """One line: the HTTP status and the server's message, or the connection problem."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        detail = body.get("message") if isinstance(body, dict) else body  # a proxy's page is text
        detail = detail if isinstance(detail, str) and detail.strip() else exc.message
        return f"HTTP {exc.status_code}: {_one_line(detail)}"
    cause = f" ({exc.__cause__})" if exc.__cause__ else ""
    return _one_line(f"{exc.message}{cause}")


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
