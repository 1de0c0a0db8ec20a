"""What ralph prints: rich on a terminal, plain text in pipes and CI."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ralph.show import events
from ralph.show.text import printable


def new_console(*, stderr: bool = False) -> Console:
    """A console as ralph's own are made: drawing for the stream as it is when it prints."""
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


console = new_console()
errors = new_console(stderr=True)

# by the stored words of records.LapStatus (a StrEnum, so its members look up as themselves): what
# ralph prints sits below the records it prints, and the git door prints too
STATUS_STYLE: dict[str, str] = {"green": "green", "red": "red", "error": "yellow", "limited": "blue"}


def safe(text: object) -> str:
    """Text from outside as rich markup that prints as itself: no markup, no control character."""
    return escape(printable(str(text)))


def say(markup: str) -> None:
    console.print(markup)


def error(message: str) -> None:
    errors.print(f"[bold red]ralph:[/] {safe(message)}")


def warn(message: str) -> None:
    errors.print(f"[bold yellow]ralph: warning:[/] {safe(message)}")
    events.emit("warning", message=message)


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def one_line(text: str, limit: int | None = None) -> str:
    """Whitespace folded; past `limit` characters, the start and the end, where an error usually
    says what exactly went wrong."""
    line = " ".join(str(text).split())
    if limit is None or len(line) <= limit:
        return line
    head = limit // 4
    return f"{line[:head]} … {line[-(limit - head - 3) :]}"


def status_text(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


@contextmanager
def using(out: Console, err: Console | None = None) -> Iterator[None]:
    """`console` is `out` (and `errors` is `err`) for a while: a run's, plain, quiet or on stderr."""
    global console, errors
    before = console, errors
    console, errors = out, err or errors
    try:
        yield
    finally:
        console, errors = before


def bars(this_lap: int, one_session: int, width: int = 30) -> list[Text]:
    """The two token bars: what a fresh lap carried, against one long session."""
    scale = max(this_lap, one_session, 1)
    lines = []
    for label, tokens in (("this lap", this_lap), ("one session", one_session)):
        filled = round(width * tokens / scale)
        lines.append(
            Text.from_markup(f"  {label:<12}[cyan]{'█' * filled}[/][dim]{'░' * (width - filled)}[/] {tokens:,} tokens")
        )
    return lines


def many(count: int, noun: str) -> str:
    """`1 request`, `3 requests`."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def context_bars(this_lap: int, one_session: int) -> None:
    for line in bars(this_lap, one_session):
        console.print(line)


def table(columns: list[str], rows: list[list[str]]) -> None:
    grid = Table(*columns, box=None, pad_edge=False, highlight=False)
    for row in rows:
        grid.add_row(*row)
    console.print(grid)
