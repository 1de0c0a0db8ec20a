"""How agent CLIs say they hit a usage or rate limit, and when they say it resets."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

TAIL = 4000  # characters of the end of an agent's output searched: where a tool says why it stopped
MOST = timedelta(days=7)  # a reset further away than this is no reset time ralph waits for

_UNITS = {"h": 3600, "m": 60, "s": 1}  # by the unit's first letter: h, hours; m, min, minutes; s, sec
_EPOCH = re.compile(r"limit reached\|(\d{10})\b", re.IGNORECASE)  # Claude Code: "…usage limit reached|<epoch>"
# "try again in 20s", "reset after 2h52m39s", "retry after 5 minutes"
_AFTER = re.compile(
    r"(?:try again|retry|retrying|resets?) (?:in|after) "
    r"((?:\d+(?:\.\d+)? ?(?:hours?|h|minutes?|min|m|seconds?|sec|s) ?)+)",
    re.IGNORECASE,
)
_PART = re.compile(r"(\d+(?:\.\d+)?) ?([hms])", re.IGNORECASE)
# "resets 4:50am (Europe/Rome)", "try again at 3:28 PM": a time of day, local
_CLOCK = re.compile(r"(?:resets?|try again)(?: at)? (\d{1,2})(?::(\d{2}))? ?([ap]m)\b", re.IGNORECASE)


def limit_hit(output: str, patterns: list[str]) -> bool:
    tail = output[-TAIL:]
    return any(re.search(pattern, tail, re.IGNORECASE) for pattern in patterns)


def reset_at(output: str, now: datetime) -> datetime | None:
    """When the tool said its limit resets, if it said (in its own words or as a Unix time) and
    it is a moment of the next week: anything else is no reset time."""
    try:
        found = _said_reset(output[-TAIL:], now)
    except (OverflowError, ValueError):  # "in 10^400 hours", "resets 4:99am"
        return None
    return found if found is not None and now < found <= now + MOST else None


def _said_reset(tail: str, now: datetime) -> datetime | None:
    if found := _EPOCH.search(tail):
        return datetime.fromtimestamp(int(found[1]), now.tzinfo)
    if found := next(reversed(list(_AFTER.finditer(tail))), None):  # the tool's last word on it
        seconds = sum(float(number) * _UNITS[unit.lower()] for number, unit in _PART.findall(found[1]))
        return now + timedelta(seconds=seconds)
    if found := _CLOCK.search(tail):
        hour = int(found[1]) % 12 + (12 if found[3].lower() == "pm" else 0)
        at = now.replace(hour=hour, minute=int(found[2] or 0), second=0, microsecond=0)
        return at if at > now else at + timedelta(days=1)
    return None
