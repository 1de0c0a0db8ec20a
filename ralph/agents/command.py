"""Any coding-agent CLI (Claude Code, Codex, aider, a script) run as a shell command."""

from __future__ import annotations

from ralph import events, proc
from ralph.agents.base import AgentResult, LapTask


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
        said = OutputLines()
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
            on_output=said,
        )
        said.finish()
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
    """A command agent's output as `agent_output` events, a whole line at a time."""

    def __init__(self) -> None:
        self.partial = b""
        self.said = events.Lines("agent_output")

    def __call__(self, data: bytes) -> None:
        *lines, self.partial = (self.partial + data).split(b"\n")
        self.partial = self.partial[:4096]  # a line's start is what is shown of it
        for line in lines:
            self.said(line.decode("utf-8", "replace"))

    def finish(self) -> None:
        """The last line, when the output did not end with a newline."""
        self.said(self.partial.decode("utf-8", "replace"))
        self.partial = b""
