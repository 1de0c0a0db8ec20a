"""Run the repository's own checks, and the ratchet that compares them with the last green."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ralph import proc

TAIL_CHARS = 4000


class CheckResult(BaseModel):
    command: str
    exit_code: int
    duration_s: float
    timed_out: bool = False
    output_tail: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def run_checks(commands: list[str], worktree: Path, *, timeout: float, env: dict[str, str],
               log_dir: Path) -> list[CheckResult]:
    """Each check through the shell in `worktree`; full output spilled under `log_dir`."""
    results = []
    for index, command in enumerate(commands, 1):
        done = proc.run(command, worktree, env=env, timeout=timeout, spill=log_dir / f"check-{index}.log")
        tail = done.tail(TAIL_CHARS)
        if done.timed_out:
            tail += f"\n[ralph: timed out after {timeout:g}s and was killed]"
        results.append(CheckResult(command=command, exit_code=done.exit_code, duration_s=round(done.duration, 3),
                                   timed_out=done.timed_out, output_tail=tail))
    return results


def regressions(last_green: list[CheckResult], now: list[CheckResult]) -> list[CheckResult]:
    """Checks that passed on the last green commit and fail now: the ratchet."""
    passed_before = {result.command for result in last_green if result.passed}
    return [result for result in now if result.command in passed_before and not result.passed]


def all_pass(results: list[CheckResult]) -> bool:
    return all(result.passed for result in results)
