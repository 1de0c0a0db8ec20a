"""What `ralph run` shows while it works, drawn from its events: a live view on a terminal,
plain lines elsewhere (`--plain`, pipes, CI), only the result (`--quiet`), or nothing at all
(`off`: ralph.api's default, where the caller hears the events instead)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Literal

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from ralph.show import events, ui
from ralph.show.event_lines import JsonLines
from ralph.show.events import Event
from ralph.show.text import printable

Display = Literal["auto", "plain", "quiet", "off"]
HEARTBEAT = 60.0  # plain: a line when nothing was printed for this long, so a CI log shows life
STEPS_SHOWN = 5  # live: the agent's last lines
SCROLLED = ("run_started", "lap_ended", "run_ended")  # live: kept as lines above the view


class Plain:
    """A line for each thing that happened; a heartbeat line while a phase goes on in silence."""

    def __init__(self, heartbeat: float = HEARTBEAT):
        self.heartbeat = heartbeat
        self.phase, self.lap = "", 0
        self.phase_since = self.printed = time.monotonic()
        self.stop = threading.Event()

    def __call__(self, event: Event) -> None:
        if event["type"] == "phase_changed":
            self.phase, self.phase_since, self.lap = event["phase"], time.monotonic(), event["lap"]
        elif event["type"] in ("lap_ended", "run_ended"):
            self.phase = ""
        line = plain_line(event)
        if line is not None:
            self.printed = time.monotonic()
            ui.console.print(line)

    def beat(self) -> None:
        while not self.stop.wait(min(self.heartbeat, 5)):
            now = time.monotonic()
            if self.phase and now - self.printed >= self.heartbeat:
                self.printed = now
                ui.console.print(f"  [dim]· lap {self.lap}: {self.phase} for {_clock(now - self.phase_since)}[/]")

    @contextmanager
    def shown(self) -> Iterator[None]:
        ticker = threading.Thread(target=self.beat, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            self.stop.set()
            ticker.join()


class Quiet:
    """Only the result (warnings and errors still go to stderr)."""

    def __init__(self) -> None:
        self.console = ui.console

    def __call__(self, event: Event) -> None:
        line = plain_line(event) if event["type"] == "run_ended" else None
        if line is not None:
            self.console.print(line)

    @contextmanager
    def shown(self) -> Iterator[None]:
        with ui.using(Console(quiet=True)):
            yield


class LiveView:
    """On a terminal: what finished scrolls up as lines; below them, redrawn four times a second,
    the lap against max_laps, the phase and how long it and the lap have run, the agent's last
    lines, the lap's checks as they finish and the two token bars."""

    def __init__(self) -> None:
        self.max_laps, self.lap = 0, 0
        self.phase, self.phase_since = "preparing", time.monotonic()
        self.lap_since = self.phase_since
        self.steps: deque[str] = deque(maxlen=STEPS_SHOWN)
        self.checks: list[str] = []
        self.largest = 0  # prompt tokens: this lap's largest request so far
        self.earlier = 0  # the largest requests of the laps before, added up
        self.tokens_known = False  # a command agent tells none: no bars

    def __call__(self, event: Event) -> None:
        kind, now = event["type"], time.monotonic()
        if kind == "run_started":
            self.max_laps, self.earlier = event["max_laps"], event["one_session"]
            self.tokens_known = self.earlier > 0
        elif kind == "lap_started":
            self.lap, self.lap_since, self.largest = event["lap"], now, 0
            self.steps.clear()
            self.checks.clear()
        elif kind == "phase_changed":
            self.phase, self.phase_since = event["phase"], now
            if self.phase == "checks":  # the verdict's, after any the agent asked for during its part
                self.checks.clear()
        elif kind in ("tool_called", "agent_output"):
            self.steps.append(event["line"])
        elif kind == "limit_wait":
            self.phase, self.phase_since = "waiting for the agent's limit", now
        elif kind == "model_replied":
            self.largest, self.tokens_known = max(self.largest, event["prompt_tokens"]), True
        elif kind == "check_finished" and event["lap"]:
            self.checks.append(plain_line(event) or "")
        elif kind == "lap_ended":
            self.earlier, self.largest = self.earlier + event["largest_prompt_tokens"], 0
            self.phase, self.phase_since = "between laps", now
        line = plain_line(event) if kind in SCROLLED or (kind == "check_finished" and not event["lap"]) else None
        if line is not None:
            ui.console.print(line)

    def __rich__(self) -> RenderableType:
        now = time.monotonic()
        where = f"lap {self.lap}/{self.max_laps}" if self.lap else "baseline"
        lap_clock = f"  [dim]lap {_clock(now - self.lap_since)}[/]" if self.lap else ""
        head = Text.from_markup(
            f"[bold]{where}[/]  [cyan]{ui.safe(self.phase)}[/] {_clock(now - self.phase_since)}{lap_clock}"
        )
        # Drawn by rich's refresh thread while events arrive: it reads copies.
        steps = [
            Text(f"  · {printable(step)}", style="dim", overflow="ellipsis", no_wrap=True) for step in list(self.steps)
        ]
        checks = [Text.from_markup(line) for line in list(self.checks)]
        bars = ui.bars(self.largest, self.earlier + self.largest) if self.tokens_known else []
        return Group(head, *steps, *checks, *bars)

    @contextmanager
    def shown(self) -> Iterator[None]:
        with Live(self, console=ui.console, refresh_per_second=4, transient=True):
            yield


def plain_line(event: Event) -> str | None:
    """The line an event prints as (rich markup), or None for events that print none."""
    kind = event["type"]
    if kind == "run_started":
        if event["resumed"]:
            return f"resuming run [bold]{event['run']}[/] at lap {event['next_lap']} (last green {event['green'][:10]})"
        return f"run [bold]{event['run']}[/]: baseline checks on {event['base'][:10]}"
    if kind == "lap_started":
        return f"[bold]lap {event['lap']}[/] of at most {event['max_laps']}{_stuck(event)} …"
    ahead = f"  [dim](ahead, on {event['ahead']})[/]" if event.get("ahead") else ""
    if kind == "phase_changed":
        return f"  [dim]· {event['phase']}[/]{ahead}" if event["phase"] else None
    if kind in ("tool_called", "agent_output"):
        return f"  [dim]· {ui.safe(event['line'])}[/]"
    if kind == "check_finished":
        if event.get("could_not_run"):
            return f"  [bold red]could not run[/]  {ui.safe(event['command'])}: {ui.safe(event['could_not_run'])}"
        mark = "[green]pass[/]" if event["passed"] else "[red]fail[/]"
        return f"  {mark}  {ui.safe(event['command'])}  ({event['duration_s']:.1f}s){ahead}"
    if kind == "lap_ended":
        return (
            f"[bold]lap {event['lap']}[/] {ui.status_text(event['status'])}{_stuck(event)}  "
            f"{event['duration_s']:.1f}s  TODO {event['todo_done']}/{event['todo_total']}  {event['commit'][:10]}  "
            f"{ui.safe(event['reason'])}"
        )
    if kind == "run_ended" and event["stopped_by"] in ("done", "fuse"):  # an error: the command line says it
        style = "green" if event["exit"] == 0 else "yellow"
        line = f"[bold {style}]stopped:[/] {ui.safe(event['reason'])} (exit {event['exit']})"
        flaky = f"\n[yellow]flaky checks[/] (failed, then passed on a retry): {ui.safe(', '.join(event['flaky']))}"
        return line + (flaky if event["flaky"] else "")
    return None


def _stuck(event: Event) -> str:
    """A lap on a stuck item (docs/agents.md: Stuck items): escalated to an agent, or splitting the item."""
    if event.get("escalated"):
        return f" [magenta]escalated[/] to {ui.safe(event['escalated'])}"
    if event.get("split"):
        return f" [magenta]split[/] of {ui.safe(ui.one_line(event['split'], 80))}"
    return ""


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}" if minutes >= 60 else f"{minutes}:{seconds:02d}"


@contextmanager
def watching(display: Display, events_to: str | None) -> Iterator[Plain | Quiet | LiveView]:
    """The run's display and its `--events` file for as long as it runs. With `--events -`
    the events own stdout and the display goes to stderr."""
    plain = display == "plain"
    console = console_for(plain=plain, stderr=events_to == "-")
    with ExitStack() as stack:
        silent = Console(quiet=True)
        stack.enter_context(ui.using(silent, silent) if display == "off" else ui.using(console))
        live = console.is_terminal and not console.is_dumb_terminal
        shown: Plain | Quiet | LiveView
        shown = Quiet() if display in ("quiet", "off") else LiveView() if live and not plain else Plain()
        listeners: list[events.Listener] = [shown]
        if events_to:
            listeners.append(stack.enter_context(JsonLines(events_to)))
        stack.enter_context(events.listening(*listeners))
        stack.enter_context(shown.shown())
        yield shown


def plain_consoles() -> tuple[Console, Console]:
    """The consoles of stdout and stderr, with no escape codes at all (`--plain`)."""
    return console_for(plain=True), console_for(plain=True, stderr=True)


def console_for(*, plain: bool, stderr: bool = False) -> Console:
    """`plain`: no escape codes at all, whatever the terminal."""
    if plain:
        return Console(highlight=False, soft_wrap=True, stderr=stderr, color_system=None, force_terminal=False)
    return Console(highlight=False, soft_wrap=True, stderr=stderr)
