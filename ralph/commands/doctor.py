"""`ralph doctor`: what this machine gives a run, the sandbox first; inside a repository with a
ralph.yaml, also what its checks give: setup and each check run once on HEAD, as a lap would."""

from __future__ import annotations

import platform
import shutil
import sys
from pathlib import Path

from ralph import config, git
from ralph.commands.doctor_agent import agent_lines
from ralph.config.sections import CheckSpec
from ralph.errors import Exit, RalphError
from ralph.isolation import jail, proc, sandbox
from ralph.lap.checks_at import checks_at
from ralph.show import ui
from ralph.verdict import could_not_run, failure_lines, readers
from ralph.verdict.checks import CheckResult
from ralph.workspace.provision import SetupFailed

MIN_GIT = (2, 38)  # merge-tree --write-tree replays a lap onto a green line that moved


def doctor(cwd: Path, *, ask_agent: bool = False) -> Exit:
    missing = sandbox.why_unavailable()
    bwrap = shutil.which(jail.BWRAP)
    version = _first_line([bwrap, "--version"]) if bwrap else "not installed"
    ui.say(f"system       {platform.system()} {platform.release()}, Python {sys.version.split()[0]}")
    ui.say(f"git          {_first_line(['git', '--version'])}{_git_note()}")
    ui.say(f"bubblewrap   {version}")
    if missing is None:
        ui.say("sandbox      works: laps run sandboxed (sandbox: auto or required)")
    else:
        ui.say(f"sandbox      [bold red]unavailable[/]: {missing}")
        ui.say("             sandbox: auto runs laps unsandboxed with a warning; sandbox: required refuses to run")
        if platform.system() == "Darwin":
            ui.say("             on macOS there is no bubblewrap: laps run unsandboxed (docs/sandbox.md)")
    checks_ran = _try_checks(cwd, ask_agent=ask_agent)
    return Exit.DONE if missing is None and checks_ran is not False else Exit.ERROR


def _try_checks(cwd: Path, *, ask_agent: bool) -> bool | None:
    """Setup and every check once on HEAD, in a workspace and sandbox of their own; whether all
    of them could run (None: no repository or ralph.yaml here to try)."""
    try:
        repo = git.open_repo(cwd)
    except RalphError:
        ui.say("checks       not in a git repository: run `ralph doctor` inside one to try its checks")
        return None
    path = repo.top / config.CONFIG_FILE
    if not path.is_file():
        ui.say(f"checks       no {config.CONFIG_FILE} in {ui.safe(str(repo.top))}: `ralph init` writes one")
        return None
    cfg = config.load(path)
    sandboxed = sandbox.decide(cfg.sandbox.mode)
    how = "sandboxed" if sandboxed else "unsandboxed"
    ui.say(f"checks       on HEAD {repo.head[:10]}, {how}, in a workspace of their own")
    try:
        results = checks_at(repo, cfg, repo.head, "doctor", sandboxed=sandboxed)
    except SetupFailed as failed:
        ui.say(f"setup        [bold red]failed[/]: {failed.reason}: {ui.safe(ui.one_line(failed.output, 300))}")
        return False
    usable = True
    for index, (spec, result) in enumerate(zip(cfg.checks, results, strict=True), 1):
        verdict, judges = _verdict(spec, result)
        ui.say(f"check {index:<6} {verdict}")
        usable = usable and judges
    return agent_lines(cfg, ask=ask_agent) and usable


def _verdict(spec: CheckSpec, result: CheckResult) -> tuple[str, bool]:
    """A check's line, and whether a run could be judged by it: it ran, and it passes, gives
    per-test results, or is marked `expect_red`."""
    command = ui.safe(result.command)
    if result.could_not_run:
        why = result.could_not_run
        return f"`{command}` [bold red]could not run[/]: {ui.safe(why)} — {could_not_run.fix(why)}", False
    outcome = "[green]passes[/]" if result.passed else f"[red]fails[/] (exit {result.exit_code})"
    failing = result.tests.failing_ids if result.tests else []
    first = (
        failing[0] if failing else failure_lines.first(result.output_tail) or could_not_run.cause(result.output_tail)
    )
    shown = "" if result.passed else f"; first failure: {ui.safe(first)}"
    refused = readers.judges_nothing(spec, passed=result.passed, has_tests=result.tests is not None)
    if result.tests is not None:
        counts = result.tests.counts
        line = f"`{command}` ran, {outcome}; per-test results: {counts.passed} passing, {len(failing)} failing{shown}"
    else:
        how = readers.hint(command)
        line = f"`{command}` ran, {outcome}; no per-test results (judged by its exit code alone: {how}){shown}"
    if refused:
        return f"{line} — [bold red]a run refuses it[/]: it {refused} (or mark it `expect_red: true`)", False
    return line + ("; marked expect_red: it judges no lap" if spec.expect_red and not result.passed else ""), True


def _first_line(argv: list[str]) -> str:
    try:
        done = proc.run(argv, "/", timeout=30, sweep=False)
    except OSError as exc:
        return f"cannot run {argv[0]}: {exc}"
    return next(iter(done.output.strip().splitlines()), "?")


def _git_note() -> str:
    words = _first_line(["git", "--version"]).split()
    try:
        found = tuple(int(part) for part in words[2].split(".")[:2])
    except (IndexError, ValueError):
        return ""
    return "" if found >= MIN_GIT else f" — ralph needs git {MIN_GIT[0]}.{MIN_GIT[1]} or newer"
