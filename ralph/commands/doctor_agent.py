"""`ralph doctor`'s lines on the lap's agent: can it start inside the sandbox, is its tool the
version its preset was written for, can it log in — and with `--agent`, does it answer one tiny
request, run as a lap runs it (sandboxed, in a scratch work tree, its login copied in)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from ralph.agents.base import LapTask
from ralph.agents.kinds import make_agent
from ralph.config import Config
from ralph.config.agent import AgentConfig
from ralph.errors import RalphError
from ralph.facts.presets import PRESETS, Preset
from ralph.isolation import proc, sandbox
from ralph.show import ui

TINY = "This is a test of your setup. Do not read, change or run anything: reply with the one word READY."
TINY_TIMEOUT = 300.0  # seconds: a CLI's first start may be slow (a node tool loading, a login refreshed)
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?")


def agent_lines(cfg: Config, *, ask: bool) -> bool:
    """Says what the agent gives a run; False when it cannot start (or, asked, did not answer)."""
    agent = cfg.agent
    if agent.kind == "openai":
        found = bool(os.environ.get(agent.api_key_env)) or bool(agent.base_url or os.environ.get("OPENAI_BASE_URL"))
        ui.say(
            f"agent        built-in, model {ui.safe(str(agent.model))}: "
            + ("its key or endpoint is set" if found else f"[bold red]no key[/]: set {agent.api_key_env}")
        )
        return found and (not ask or _asked(cfg, agent))
    preset = PRESETS.get(agent.preset or "")
    if preset is None:
        ui.say(f"agent        the command `{ui.safe(agent.shell_command)}` (its failures show in its laps)")
        return not ask or _asked(cfg, agent)
    started = _starts(cfg, agent, preset)
    return started and _logs_in(preset, cfg.kept_from_agent_clis) and (not ask or _asked(cfg, agent))


def _starts(cfg: Config, agent: AgentConfig, preset: Preset) -> bool:
    found = shutil.which(preset.executable)
    if found is None:
        ui.say(f"agent        [bold red]cannot start[/]: `{preset.executable}` (preset {preset.name}) is not on PATH")
        return False
    inside = sandbox.missing_inside(agent.shell_command, os.environ) if sandbox.decide(cfg.sandbox.mode) else None
    if inside:
        ui.say(f"agent        [bold red]cannot start in the sandbox[/]: {ui.safe(inside)}")
        return False
    ui.say(f"agent        preset {preset.name}: `{ui.safe(found)}`{_version_note(preset, found)}")
    return True


def _version_note(preset: Preset, program: str) -> str:
    """The tool's version, and a warning when it is not the one the preset was written for."""
    try:
        with tempfile.TemporaryDirectory(prefix="ralph-doctor-") as home:  # it writes to its HOME as it starts
            done = proc.run([program, "--version"], home, env=proc.lap_env() | {"HOME": home}, timeout=60)
    except OSError:
        return ""
    said = _VERSION.search(done.output)
    written = _VERSION.search(preset.written_for)
    if said is None or written is None:
        return ", its version unknown"
    version, wanted = said.group(), written.group()
    if _parts(version)[: len(_parts(wanted))] == _parts(wanted):
        return f", version {version}"
    newer = "newer" if _parts(version) > _parts(wanted) else "older"
    return (
        f", version {version} — [yellow]warning[/]: the preset was written for {preset.written_for}; a {newer} "
        "version may have changed its flags or output (laps still run)"
    )


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _logs_in(preset: Preset, kept: tuple[str, ...]) -> bool:
    """Its credential variable (one laps pass it) or login file; a tool of many providers may keep
    its key in its own config (opencode's, aider's) instead, which is not checked: a warning."""
    found = preset.logged_in_by(os.environ, kept)
    if found:
        copied = " (a copy of it in each lap's private HOME)" if found.startswith("its login file") else ""
        ui.say(f"login        by {ui.safe(found)}{copied}")
    elif preset.login:
        ui.say(f"login        [bold red]none[/]: {ui.safe(preset.no_login())}")
        return False
    else:
        ui.say(
            "login        [yellow]warning[/]: no provider key is set (docs/agents.md: Presets) nor a login file: "
            "it needs its key in a config of its own"
        )
    return True


def _asked(cfg: Config, agent: AgentConfig) -> bool:
    """One tiny request, as a lap would make it."""
    if agent.kind == "openai":
        try:
            make_agent(agent).check_endpoint(time.monotonic() + TINY_TIMEOUT)
        except RalphError as exc:
            ui.say(f"asked        [bold red]no answer[/]: {ui.safe(str(exc))}")
            return False
        ui.say("asked        the endpoint answered")
        return True
    sandboxed = sandbox.decide(cfg.sandbox.mode)
    with tempfile.TemporaryDirectory(prefix="ralph-doctor-") as scratch:
        tree, logs = Path(scratch) / "tree", Path(scratch) / "logs"
        tree.mkdir()
        logs.mkdir()
        keep = (*sandbox.needed(commands=[agent.shell_command]), logs)  # the prompt's files, read-only, as a lap's
        jail = sandbox.phase_jail(Path(scratch) / "agent", tree, writable=(tree,), keep=keep) if sandboxed else None
        env = proc.lap_env(tuple(cfg.env.pass_))
        task = LapTask("doctor", 1, tree, TINY, TINY_TIMEOUT, logs, env, jail=jail)
        result = make_agent(agent, cfg.kept_from_agent_clis).run_lap(task)
    if result.outcome != "ok":
        ui.say(f"asked        [bold red]{result.outcome}[/]: {ui.safe(ui.one_line(result.detail, 300))}")
        return False
    preset = PRESETS.get(agent.preset or "")
    if preset is not None and preset.reports != "text" and not (result.usage.requests or result.usage.total):
        said = ui.one_line(result.detail, 300)
        ui.say(f"asked        [bold red]no request reached its model[/], though it exited 0: {ui.safe(said)}")
        return False
    said = ui.one_line(result.summary, 80) or "(nothing)"
    ui.say(f"asked        it answered: {ui.safe(said)} ({_usage_words(result.usage.requests, result.usage.total)})")
    return True


def _usage_words(requests: int, tokens: int) -> str:
    if not requests and not tokens:
        return "no usage reported"
    return f"{ui.many(requests, 'request')}, {ui.many(tokens, 'token')}"
