"""`--events` lines (ralph/show/event_lines.py): each one says which format it is in."""

from __future__ import annotations

import json
from pathlib import Path

from ralph.show import events
from ralph.show.event_lines import FORMAT, JsonLines


def test_every_event_line_carries_the_format_version_first(tmp_path: Path):
    target = tmp_path / "events.jsonl"
    with JsonLines(str(target)) as lines, events.listening(lines):
        events.naming("r")
        events.emit("warning", message="one")
        events.emit("lap_started", lap=1, max_laps=2)
    written = [json.loads(line) for line in target.read_text().splitlines()]
    assert [next(iter(event)) for event in written] == ["format", "format"]
    assert [event["format"] for event in written] == [FORMAT, FORMAT] == [1, 1]
    assert [(event["type"], event["run"], event["lap"]) for event in written] == [
        ("warning", "r", 0),
        ("lap_started", "r", 1),
    ]
