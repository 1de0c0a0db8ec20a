"""Any coding-agent CLI (Claude Code, Codex, aider, a script) run as a shell command."""

from __future__ import annotations

import re
import time

from ralph import events, proc
from ralph.agents.base import AgentResult, LapTask

LINES_PER_SECOND = 20  # agent output lines told as events; the rest is in agent.log
LINE_CHARS = 200
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f]")


class CommandAgent:
    kind = "command"

    def __init__(self, command: str):
        self.command = command

    def check_endpoint(self, deadline: float) -> None:
        """Nothing to check ahead: a command's own failures show in its laps."""

    def run_lap(self, task: LapTask) -> AgentResult:
        """The prompt goes on stdin and into the file named by RALPH_PROMPT_FILE."""
        prompt_file = task.log_dir / "prompt.md"
        prompt_file.write_text(task.prompt, encoding="utf-8")
        env = dict(
            task.env,
            RALPH_RUN=task.run,
            RALPH_LAP=str(task.lap),
            RALPH_WORKTREE=str(task.worktree),
            RALPH_PROMPT_FILE=str(prompt_file),
        )
        done = proc.run(
            self.command,
            task.worktree,
            env=env,
            timeout=task.timeout,
            input=task.prompt,
            spill=task.log_dir / "agent.log",
            jail=task.jail,
            on_output=OutputLines(),
        )
        if done.timed_out:
            outcome, detail = "timeout", f"agent timed out after {task.timeout:g}s and was killed"
        elif done.exit_code != 0:
            outcome, detail = "failed", f"agent exited with code {done.exit_code}"
        else:
            outcome, detail = "ok", ""
        tail = done.tail(2000)
        lines = [line for line in tail.splitlines() if line.strip()]
        return AgentResult(
            kind=self.kind,
            outcome=outcome,
            duration_s=round(done.duration, 3),
            exit_code=done.exit_code,
            summary=lines[-1][:300] if lines else "",
            detail=(detail + "\n" + tail).strip(),
        )


class OutputLines:
    """A command agent's output as `agent_output` events: whole lines, terminal codes removed,
    cut to LINE_CHARS, at most LINES_PER_SECOND of them."""

    def __init__(self) -> None:
        self.partial = b""
        self.second, self.told = 0, 0

    def __call__(self, data: bytes) -> None:
        *lines, self.partial = (self.partial + data).split(b"\n")
        self.partial = self.partial[-4096:]
        for raw in lines:
            line = _CONTROL.sub("", raw.decode("utf-8", "replace")).strip()
            now = int(time.monotonic())
            if now != self.second:
                self.second, self.told = now, 0
            if line and self.told < LINES_PER_SECOND:
                self.told += 1
                events.emit("agent_output", line=line[:LINE_CHARS])
