"""A lap's status: the one type every lap outcome is made of and compared with.

The values are stored, in every lap's git note and in the events: they are the words older
rallies wrote, kept byte for byte, so a note of any format reads back as the same status.
"""

from __future__ import annotations

from enum import StrEnum


class LapStatus(StrEnum):
    GREEN = "green"  # the checks passed (and the judge, if any): the green line may advance to it
    RED = "red"  # judged and discarded: the next lap starts from the last green commit again
    ERROR = "error"  # the agent failed before it could work (an endpoint down): the lap judges nothing
    LIMITED = "limited"  # the agent hit a usage or rate limit: the lap counts for nothing
