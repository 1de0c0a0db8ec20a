"""The request limiter shared by every role, on a clock the test moves."""

from __future__ import annotations

from ralph.agents.limiter import RequestLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_requests_beyond_the_cap_wait_for_the_oldest_to_leave_the_minute():
    clock = Clock()
    limiter = RequestLimiter(3, clock=clock, sleep=clock.sleep)
    for gap in (0, 10, 10):  # three requests at 0 s, 10 s and 20 s
        clock.now += gap
        assert limiter.wait_turn() == 0
    clock.now += 5  # 25 s: the fourth must wait until the first is 60 s old
    assert limiter.wait_turn() == 35 and clock.slept == [35]
    assert limiter.wait_turn() == 10  # the fifth: until the second (at 10 s) leaves the window


def test_no_cap_never_waits():
    clock = Clock()
    limiter = RequestLimiter(None, clock=clock, sleep=clock.sleep)
    assert all(limiter.wait_turn() == 0 for _ in range(1000)) and clock.slept == []
