"""What the repository's git hooks said of a commit: pre-commit's report read from a hook's output,
which hook could not run and why, and the message every lap's commit gets (forge references
unlinked). Running the hooks on a lap, and trying them before lap 1, is ralph.lap.commit_hooks'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ralph.agents.base import AgentResult
from ralph.show.text import printable
from ralph.verdict import could_not_run

# What a forge reads in a commit message once it lands: `Fixes #13` (or `GH-13`, `owner/repo#13`,
# an issue's URL) closes that issue, `@name` notifies a person. An agent's summary, and items a
# lap added and ticked, may hold any of them: they stay readable, but no forge links them.
_FORGE_REFERENCES = (
    (re.compile(r"#(?=\d)"), "# "),
    (re.compile(r"\bGH-(?=\d)", re.IGNORECASE), "GH- "),
    (re.compile(r"(?<![\w.+-])@(?=[A-Za-z0-9])"), "@ "),
    (re.compile(r"\bhttps?://(?=\S+/(?:issues|pull|pulls|merge_requests|-/issues)/\d)"), ""),
)


def unlinked(text: str) -> str:
    """`text` with every reference a forge would act on broken up (`# 13`, `@ name`)."""
    for pattern, replacement in _FORGE_REFERENCES:
        text = pattern.sub(replacement, text)
    return text


def commit_message(run: str, number: int, ticked: list[str], agent: AgentResult) -> str:
    subject = unlinked("; ".join(ticked)) if ticked else f"ralph lap {number}"
    if len(subject) > 72:
        subject = subject[:71].rstrip() + "…"
    summary = unlinked(agent.summary.strip())
    body = f"{summary}\n\n" if summary else ""
    trailers = f"Ralph-Run: {run}\nRalph-Lap: {number}\nRalph-Agent: {agent.name or agent.kind}\n"
    message = f"{subject}\n\n{body}{trailers}" + (f"Ralph-Model: {agent.model}\n" if agent.model else "")
    # An agent's output may hold NULs (git refuses them) or terminal escapes (shown by git log).
    return printable(message)


# --- pre-commit's report ----------------------------------------------------------------

_STATUS = re.compile(r"\.+(?:\([^)]*\))?(Passed|Failed|Skipped)$")
_FIELD = re.compile(r"^- (hook id|exit code): (\S+)")
_SETTING_UP = re.compile(r"^\[INFO\] (?:Initializing|Installing) environment for (.+?)\.?$")
# pre-commit's own errors: a fatal one (an invalid configuration), an unexpected one (git could
# not fetch a hook repository, pip could not install its environment), one it logs and exits on.
_CRASHED = re.compile(r"^(?:An (?:unexpected )?error has occurred|\[ERROR\]):? ")
_TOOL_SAID = re.compile(r"^\s*(?:fatal|error|ERROR)[: ]")
_CANNOT = re.compile(r"^Executable `[^`]+` (?:not found|is not executable)|^`pre-commit` not found")


@dataclass
class FailedHook:
    id: str = "?"
    exit_code: int | None = None
    first: str = ""  # the first line it printed
    unrunnable: str | None = None  # the first line it printed that says a program could not be run

    def could_not_run(self) -> str | None:
        """Why it could not run, in one line; None when it ran (and refused)."""
        if self.exit_code in (126, 127):
            return could_not_run.reason("", self.exit_code, self.first, None)
        return self.unrunnable


@dataclass
class Report:
    """What a commit's hooks printed, read whole from their log: the hooks pre-commit says
    failed, pre-commit's own error (a hook repository it could not fetch, an environment it
    could not install), and what any other hook said of a program it could not run."""

    failed: list[FailedHook] = field(default_factory=list)
    error: str | None = None
    setting_up: str | None = None  # the hook repository pre-commit was setting up when it failed
    unrunnable: str | None = None  # outside pre-commit's hooks: a line saying a program could not be run

    @property
    def ids(self) -> str:
        return ", ".join(hook.id for hook in self.failed)

    def hook_that_could_not_run(self) -> tuple[str, str] | None:
        """pre-commit's id of the first failed hook that could not run, and why."""
        return next(((hook.id, why) for hook in self.failed if (why := hook.could_not_run())), None)


def read_report(log: Path) -> Report:
    """The report in a commit's hooks' log, read line by line (a hook may print without end)."""
    report = Report()
    try:
        with open(log, encoding="utf-8", errors="replace") as lines:
            _read(report, (line.rstrip("\n") for line in lines))
    except FileNotFoundError:  # git stopped before any hook ran
        pass
    return report


def _read(report: Report, lines: Iterator[str]) -> None:
    current: FailedHook | None = None
    for line in lines:
        status, crashed = _STATUS.search(line), _CRASHED.match(line)
        if crashed and not current:
            report.error = _crash_cause(line[crashed.end() :], lines)
            return
        if status:
            current = FailedHook() if status.group(1) == "Failed" else None
            report.failed += [current] if current else []
        elif current and (found := _FIELD.match(line)):
            if found.group(1) == "hook id":
                current.id = found.group(2)
            elif found.group(2).isdigit():
                current.exit_code = int(found.group(2))
        elif current:
            current.first = current.first or line.strip()
            current.unrunnable = current.unrunnable or _unrunnable(line)
        elif setting_up := _SETTING_UP.match(line):
            report.setting_up = setting_up.group(1)
        else:
            report.unrunnable = report.unrunnable or _unrunnable(line)


def _unrunnable(line: str) -> str | None:
    """What the line says of a program that could not be run: pre-commit's words, or the
    shell's, env's, python's, … (could_not_run's, with no test runner of its own to read: "")."""
    if _CANNOT.match(line):
        return line.strip()
    return could_not_run.reason("", 1, line, None) if line.strip() else None


def _crash_cause(error: str, lines: Iterator[str]) -> str:
    """pre-commit's error, by the first line of git's or pip's own words after it when there is
    one (`fatal: … does not appear to be a git repository`)."""
    for line, _ in zip(lines, range(50), strict=False):
        if line.startswith(("Check the log", "Failed to write", "### ")):
            break
        if _TOOL_SAID.match(line):
            return line.strip()[:200]
    return error[:200]
