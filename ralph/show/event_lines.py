"""`--events FILE`: a run's events for programs to read, as JSON lines.

The lines outlive the ralph that wrote them (a CI job's artifact, a dashboard's input), so each
carries `format`: FORMAT, raised when a field changes meaning or goes. A warning is an event
too: a file that can no longer be written is said by ui, which is why this listener is not in
events.py, which ui imports.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO

from ralph.errors import RalphError
from ralph.show import ui
from ralph.show.events import Event

FORMAT = 1


class JsonLines:
    """`--events FILE` (`-`: stdout): one JSON object a line, flushed as it happens, each
    stamped with FORMAT first."""

    def __init__(self, target: str):
        self.target = target
        self.out: IO[str] | None = None

    def __enter__(self) -> JsonLines:
        try:
            self.out = sys.stdout if self.target == "-" else open(Path(self.target), "a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise RalphError(f"--events: cannot write {self.target}: {exc.strerror}") from None
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.out is not None and self.out is not sys.stdout:
            try:
                self.out.close()
            except OSError:
                pass

    def __call__(self, event: Event) -> None:
        if self.out is None:
            return
        try:
            self.out.write(json.dumps({"format": FORMAT, **event}, default=str) + "\n")
            self.out.flush()
        except OSError as exc:  # a full disk, a closed pipe: the run goes on without its events
            self.out = None
            ui.warn(f"--events: cannot write {self.target} ({exc.strerror}); no more events are written")
