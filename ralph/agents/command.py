"""Any coding-agent CLI (Claude Code, Codex, aider, a script) run as a shell command."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

import yaml

from ralph.agents import reports
from ralph.agents.base import AgentResult, LapTask
from ralph.agents.limited import limit_hit, reset_at
from ralph.config.agent import AgentConfig
from ralph.errors import RalphError
from ralph.facts import logins
from ralph.facts.presets import ENDPOINTS, PRESETS
from ralph.isolation import proc
from ralph.isolation.files import remove_path
from ralph.show import events

REPORT_FILE = "ralph-agent-report"  # $RALPH_REPORT_FILE: a report the tool writes of itself (aider's, mini's)
TASK_FILE = "ralph-task.yaml"  # $RALPH_TASK_FILE: the prompt as mini-swe-agent's task config


class CommandAgent:
    kind = "command"

    def __init__(self, config: AgentConfig, withheld: tuple[str, ...] = ()):
        self.config, self.withheld = config, withheld
        self.command = config.shell_command
        self.preset = PRESETS[config.preset] if config.preset else None

    def check_endpoint(self, deadline: float) -> None:
        """A preset's tool must be installed; a command's own failures show in its laps."""
        if self.preset and self.config.command is None and shutil.which(self.preset.executable) is None:
            raise RalphError(
                f"agent.preset {self.preset.name}: `{self.preset.executable}` is not on PATH — install it, "
                "or say where it is with agent.command"
            )

    def run_lap(self, task: LapTask) -> AgentResult:
        """The prompt goes into the file named by RALPH_PROMPT_FILE, and on stdin unless the preset's
        tool reads it from a file (a tool that appends stdin to its prompt would read it twice).
        The tool's own files (its report, mini's task config) go where ralph writes and reads them
        and the tool finds them: the phase's private /tmp, or unsandboxed a folder of the lap's own
        (no `=` in its path: mini reads a `-c` with one as a key=value), deleted after it."""
        if task.jail is not None:
            return self._run(task, task.jail.tmp, Path("/tmp"))
        own = Path(tempfile.mkdtemp(prefix="ralph-agent-"))
        try:
            return self._run(task, own, own)
        finally:
            remove_path(own)

    def _run(self, task: LapTask, own: Path, inside: Path) -> AgentResult:
        """The lap, the tool's own folder `own` here and `inside` where the tool runs."""
        prompt_file, channel = self.prompt(task, own)
        copied: list[str] = []
        if self.preset and task.jail is not None:  # the phase's private HOME: ralph.yaml refuses sandbox.home
            copied = logins.copy_into(task.jail.home, self.preset.login_files, os.environ)
        said = OutputLines()
        idle = proc.Idle(task.idle_timeout, task.workspace) if task.idle_timeout else None
        env = self.environment(task, prompt_file, inside)
        try:
            done = proc.run(
                self.command,
                task.workspace,
                env=env,
                timeout=task.timeout,
                input=task.prompt if channel == "stdin" else None,
                spill=task.log_dir / "agent.log",
                jail=task.jail,
                on_output=said,
                idle=idle,
            )
        finally:  # the workspace is readable to the later phases, whose code is the lap's too
            if task.jail is not None:
                logins.remove(task.jail.home, copied)
        said.finish()
        report = self.report(task, own / REPORT_FILE)
        outcome, detail, until = self.outcome(done, report, idle, task.timeout)
        if outcome in ("failed", "timeout"):
            detail += _withheld_hint(env) + self._unsandboxed_hint(task)
        tail = done.tail(2000)
        lines = [line for line in tail.splitlines() if line.strip()]
        summary = report.summary if report.summary is not None else (lines[-1] if lines else "")
        return AgentResult(
            kind=self.kind,
            outcome=outcome,
            duration_s=round(done.duration, 3),
            exit_code=done.exit_code,
            summary=summary[:300],
            detail=(detail + "\n" + tail).strip(),
            usage=report.usage,
            limited_until=until.timestamp() if until else None,
        )

    def prompt(self, task: LapTask, own: Path) -> tuple[Path, str]:
        """The prompt in the lap's log (RALPH_PROMPT_FILE), and as mini-swe-agent's task config in
        the tool's `own` folder; and how the tool gets it (Preset.prompt)."""
        prompt_file = task.log_dir / "prompt.md"
        prompt_file.write_text(task.prompt, encoding="utf-8")
        channel = self.preset.prompt if self.preset else "stdin"
        if channel == "task-config":
            config = {"run": {"task": task.prompt}, "environment": {"cwd": str(task.workspace)}}
            (own / TASK_FILE).write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
        return prompt_file, channel

    def report(self, task: LapTask, kept: Path) -> reports.Report:
        """What the tool reported of the lap: in its whole output (agent.log, not the capped copy in
        memory), in the report file it `kept`, and codex's requests in its session's own log."""
        if self.preset is None:
            return reports.Report()
        report = reports.read_log(self.preset.reports, task.log_dir / "agent.log", kept)
        if report.session and self.preset.reports == "codex-jsonl":
            home = task.jail.home / ".codex" if task.jail else Path(os.environ.get("CODEX_HOME", "~/.codex"))
            report.usage.requests = reports.codex_requests(home.expanduser(), report.session) or report.usage.requests
        return report

    def environment(self, task: LapTask, prompt_file: Path, inside: Path) -> dict[str, str]:
        """The lap's environment; a preset's tool gets its own credentials, and only it: never the checks."""
        credentials = {
            name: os.environ[name]
            for name in ((*self.preset.credentials, *ENDPOINTS) if self.preset else ())
            if name in os.environ and name not in self.withheld
        }
        sandboxed = dict(self.preset.sandboxed) if self.preset and task.jail is not None else {}
        return dict(
            task.env,
            **credentials,
            **sandboxed,
            RALPH_RUN=task.run,
            RALPH_LAP=str(task.lap),
            RALPH_WORKTREE=str(task.workspace),
            RALPH_PROMPT_FILE=str(prompt_file),
            RALPH_REPORT_FILE=str(inside / REPORT_FILE),
            RALPH_TASK_FILE=str(inside / TASK_FILE),
        )

    def _unsandboxed_hint(self, task: LapTask) -> str:
        """Why a tool that must be told it is sandboxed may have refused, when the lap was not."""
        if not (self.preset and self.preset.sandboxed and task.jail is None and os.geteuid() == 0):
            return ""
        told = " ".join(f"{name}={value}" for name, value in self.preset.sandboxed)
        return (
            f"\nas root, {self.preset.executable} skips its permission prompts only when told by {told} that it "
            "runs in a sandbox: ralph says so inside bubblewrap, and this lap ran without it — install bubblewrap "
            f"(sandbox: auto), or, on a machine that is itself a sandbox, export {told} and list it in env.pass"
        )

    def outcome(
        self, done: proc.Completed, report: reports.Report, idle: proc.Idle | None, timeout: float
    ) -> tuple[str, str, datetime | None]:
        """ok, failed, timeout or limited; why; and when a usage limit resets, when the tool said."""
        failed = done.exit_code != 0 or report.failed
        if (failed or done.timed_out) and limit_hit(done.output, self.config.limits):
            until = reset_at(done.output, datetime.now().astimezone())
            resets = f" (it resets {until:%Y-%m-%d %H:%M %Z})" if until else ""
            return "limited", f"the agent hit a usage or rate limit{resets}", until
        if idle is not None and idle.fired:
            return (
                "timeout",
                f"idle: the agent printed nothing and changed no file for {idle.seconds:g}s, and was stopped",
                None,
            )
        if done.timed_out:
            return "timeout", f"agent timed out after {timeout:g}s and was killed", None
        if failed:
            said_so = " (the tool said it failed)" if not done.exit_code else ""
            return "failed", f"agent exited with code {done.exit_code}{said_so}", None
        return "ok", "", None


def _withheld_hint(env: dict[str, str]) -> str:
    """Why an agent CLI may fail or hang without a word: its login was named like a secret."""
    withheld = sorted(name for name, value in os.environ.items() if proc.is_secret(name, value) and name not in env)
    if not withheld:
        return ""
    names = ", ".join(withheld[:8]) + (", …" if len(withheld) > 8 else "")
    return (
        f"\nralph gives the agent only the variables docs/sandbox.md lists, not these of yours: {names} — "
        f"if the agent needs one to log in, let it through with `env: {{pass: [{withheld[0]}]}}` in ralph.yaml "
        "(or use a preset, which passes its tool's own)"
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
