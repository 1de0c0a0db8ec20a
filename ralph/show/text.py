"""Text from outside (an agent, a model, a server, a lap's files) made fit to show a person:
terminal sequences and control characters removed, so it can only ever print as itself."""

from __future__ import annotations

import re

# ESC sequences (CSI, OSC and the like, 7-bit and 8-bit), then any control character left:
# C0 but tab and newline, DEL, C1, and the bidirectional overrides that reorder what is shown.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # any other ESC
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` without terminal sequences and control characters (tab and newline stay)."""
    return _CONTROL.sub("", _SEQUENCE.sub("", text))
