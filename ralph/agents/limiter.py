"""One request limiter for a whole ralph process: the agent, the planner and the judge share it.

`limits.requests_per_minute` caps the model requests of every role together (a provider's rate
limit is per key, not per role, and one role can fire many calls): a request waits until
fewer than that many were sent in the last 60 seconds. None: no cap.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

WINDOW = 60.0


class RequestLimiter:
    def __init__(
        self,
        per_minute: int | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.per_minute, self.clock, self.sleep = per_minute, clock, sleep
        self.sent: deque[float] = deque()
        self.lock = threading.Lock()

    def wait_turn(self) -> float:
        """Block until a request may go; returns the seconds waited."""
        if not self.per_minute:
            return 0.0
        with self.lock:
            waited = 0.0
            while True:
                now = self.clock()
                while self.sent and now - self.sent[0] >= WINDOW:
                    self.sent.popleft()
                if len(self.sent) < self.per_minute:
                    self.sent.append(now)
                    return waited
                pause = WINDOW - (now - self.sent[0])
                self.sleep(pause)
                waited += pause


shared = RequestLimiter(None)  # configured by `ralph run` and `ralph plan` from limits.requests_per_minute


def configure(per_minute: int | None) -> None:
    """A new run's cap, with no memory of an earlier run's requests in the same process."""
    with shared.lock:
        shared.per_minute = per_minute
        shared.sent.clear()
