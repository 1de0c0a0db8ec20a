"""What ralph prints: rich on a terminal, plain text in pipes and CI."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:  # ui sits below the modules whose records it prints
    from ralph.checks import CheckResult
    from ralph.ledger import LapRecord

console = Console(highlight=False, soft_wrap=True)
errors = Console(stderr=True, highlight=False, soft_wrap=True)

STATUS_STYLE = {"green": "green", "red": "red", "error": "yellow"}


def say(markup: str) -> None:
    console.print(markup)


def error(message: str) -> None:
    errors.print(f"[bold red]ralph:[/] {escape(message)}")


def warn(message: str) -> None:
    errors.print(f"[bold yellow]ralph: warning:[/] {escape(message)}")


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


def baseline(results: list[CheckResult]) -> None:
    for result in results:
        mark = "[green]pass[/]" if result.passed else "[red]fail[/]"
        console.print(f"  {mark}  {escape(result.command)}  ({result.duration_s:.1f}s)")


def lap_start(number: int, max_laps: int) -> None:
    console.print(f"[bold]lap {number}[/] of at most {max_laps} …")


def lap_end(record: LapRecord) -> None:
    passed = sum(check.passed for check in record.checks)
    checks = f"checks {passed}/{len(record.checks)}" if record.checks else "checks not run"
    console.print(
        f"[bold]lap {record.lap}[/] {status_text(record.status)}  {record.duration_s:.1f}s "
        f"(prepare {record.prepare_s:.1f}s)  "
        f"{checks}  TODO {record.todo.done}/{record.todo.total}  "
        f"{record.commit[:10]}  {escape(record.reason)}"
    )


def agent_step(line: str) -> None:
    console.print(f"  [dim]· {escape(line)}[/]")


@contextmanager
def waiting(label: str, quiet_for: float = 10, every: float = 30) -> Iterator[None]:
    """Shows that `label` is still being waited for: a live line counting seconds on a
    terminal; elsewhere a line once the wait passes `quiet_for` seconds, then every `every`."""
    started, done = time.monotonic(), threading.Event()
    with console.status(f"[dim]{escape(label)} …[/]") if console.is_terminal else nullcontext() as status:

        def tell() -> None:
            next_line = quiet_for
            while not done.wait(1):
                elapsed = time.monotonic() - started
                if status is not None:
                    status.update(f"[dim]{escape(label)} … {elapsed:.0f}s[/]")
                elif elapsed >= next_line:
                    console.print(f"  [dim]· {escape(label)}: waiting {elapsed:.0f}s[/]")
                    next_line += every

        ticker = threading.Thread(target=tell, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()


def stopped(code: int, reason: str, flaky: list[str]) -> None:
    style = "green" if code == 0 else "yellow"
    console.print(f"[bold {style}]stopped:[/] {escape(reason)} (exit {code})")
    if flaky:
        console.print(f"[yellow]flaky checks[/] (failed, then passed on a retry): {escape(', '.join(flaky))}")


def context_bars(this_lap: int, one_session: int, width: int = 30) -> None:
    """The seed's two bars: what a fresh lap carried, against one long session."""
    scale = max(this_lap, one_session, 1)
    for label, tokens in (("this lap", this_lap), ("one session", one_session)):
        filled = round(width * tokens / scale)
        console.print(f"  {label:<12}[cyan]{'█' * filled}[/][dim]{'░' * (width - filled)}[/] {tokens:,} tokens")


def table(columns: list[str], rows: list[list[str]]) -> None:
    grid = Table(*columns, box=None, pad_edge=False, highlight=False)
    for row in rows:
        grid.add_row(*row)
    console.print(grid)
