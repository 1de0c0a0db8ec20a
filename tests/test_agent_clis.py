"""The agent CLIs people pay for, for real: each preset's tool, installed from npm or PyPI at a
pinned version (helpers/agent_clis.py), does one sandboxed `ralph run` lap against a scripted
model server that speaks its API (helpers/model_apis.py). What a user would see: the lap green
with the tool's edit on the run branch, the prompt (over 200 KiB) sent once, the lap's tokens and requests those
the server counted, a rate limit a "limited" lap, and `ralph doctor --agent` answered.

The lap runs as whoever runs the tests: in CI and containers, root."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import agent_clis
from helpers.model_apis import ModelApis, user_text
from helpers.repos import git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph

pytestmark = [pytest.mark.slow, needs_bwrap]

MARKER = "ITEM-MARK-39"  # in the TODO item, so in the prompt: its copies at the server are the prompt's
ITEM = f"write notes.txt ({MARKER})"
TICK = "sed -i 's/- \\[ \\]/- [x]/' TODO.md && echo hi > notes.txt"
PRESETS = ["claude", "codex", "gemini", "opencode", "aider", "mini-swe-agent"]
PROGRAMS = {"mini-swe-agent": "mini"}
LAP_SECONDS = 600
# Where the tools keep their logins and settings in a HOME: a lap writes none of it in the user's.
TOOL_FILES = (".claude", ".claude.json", ".codex", ".gemini", ".config/opencode", ".local/share/opencode", ".aider")


@dataclass
class Setup:
    """How a preset's tool is pointed at the server: ralph.yaml's agent.args, the variables the
    test gives ralph (credentials and endpoints, which presets pass on) and those ralph.yaml passes."""

    args: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    passed: dict[str, str] = field(default_factory=dict)


def setup(preset: str, server: ModelApis, limited: bool = False) -> Setup:
    if preset == "claude":
        # Its own retries of a 429 take 3 minutes (11 tries): none, so a limited lap ends at once.
        retries = {"CLAUDE_CODE_MAX_RETRIES": "0"} if limited else {}
        return Setup(env={"ANTHROPIC_BASE_URL": server.origin, "ANTHROPIC_API_KEY": "sk-ant-test"}, passed=retries)
    if preset == "codex":
        # --ignore-user-config drops a provider of config.toml: the local endpoint comes by -c.
        provider = "model_providers.scripted"
        args = (
            f"-c model_provider=scripted -c {provider}.name=scripted -c {provider}.base_url={server.base_url} "
            f"-c {provider}.wire_api=responses -c {provider}.env_key=OPENAI_API_KEY -m gpt-5.1-codex"
        )
        if limited:
            args += f" -c {provider}.request_max_retries=0 -c {provider}.stream_max_retries=0"
        return Setup(args=args, env={"OPENAI_API_KEY": "sk-codex-test"})
    if preset == "gemini":
        # GOOGLE_GEMINI_BASE_URL alone makes the auth type "gateway", which Gemini CLI 0.61 refuses
        # ("Invalid auth method selected.", exit 41): the API key login is chosen in the user's
        # settings (the test's HOME), which ralph copies into the lap's private HOME.
        settings = Path(os.environ["HOME"], ".gemini", "settings.json")
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
        return Setup(env={"GOOGLE_GEMINI_BASE_URL": server.origin, "GEMINI_API_KEY": "gm-test"})
    if preset == "opencode":
        scripted: dict[str, object] = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "scripted",
            "options": {"baseURL": server.base_url, "apiKey": "sk-opencode-test"},
            "models": {"scripted": {"name": "scripted"}},
        }
        config = {"$schema": "https://opencode.ai/config.json", "provider": {"scripted": scripted}}
        return Setup(env={"OPENCODE_CONFIG_CONTENT": json.dumps(config | {"model": "scripted/scripted"})})
    if preset == "aider":
        return Setup(
            args="--model openai/scripted",
            env={"OPENAI_API_BASE": server.base_url, "OPENAI_API_KEY": "sk-aider-test"},
            passed={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
    assert preset == "mini-swe-agent"
    return Setup(
        args="--model openai/scripted",
        env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-mini-test"},
        passed={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1"},
    )


def program(preset: str) -> Path:
    name = PROGRAMS.get(preset, preset)
    found = agent_clis.program(name)
    if found is None:
        pytest.skip(agent_clis.skip_reason(name))
    return found


def lap(
    tmp_path: Path, preset: str, server: ModelApis, *, files: dict[str, str] | None = None, **limits: object
) -> tuple[Path, dict]:
    """One sandboxed `ralph run --name lap` of the preset's real tool: the repo and its lap notes' run."""
    executable = program(preset)
    chosen = setup(preset, server, limited=server.limited > 0)
    agent = {"kind": "command", "preset": preset} | ({"args": chosen.args} if chosen.args else {})
    config = {
        "goal": "g",
        "agent": agent,
        "checks": ["true"],
        "limits": {"stagnation": 5, "max_laps": 1, "lap_timeout": LAP_SECONDS, **limits},
        "env": {"pass": sorted(chosen.passed)},
        # Nothing of the tool's install is listed: ralph finds its install root and shows it to the lap.
        "sandbox": {"mode": "auto"},
    }
    repo = make_repo(tmp_path / "repo", files or {}, config=config, todo=[ITEM])
    env = {"PATH": f"{executable.parent}{os.pathsep}{os.environ['PATH']}", **chosen.env, **chosen.passed}
    before = tool_files()
    result = ralph(repo, "run", "--name", "lap", env=env, timeout=LAP_SECONDS + 120)
    return repo, {"result": result, "laps": lap_notes(repo, "lap"), "tool files before": before}


def served(todo: str = f"- [ ] {ITEM}\n") -> ModelApis:
    """The server, scripted to tick the item and write notes.txt with the tool's own shell tool
    (aider: in its whole-file edit format, TODO.md whole)."""
    return ModelApis(TICK, files={"notes.txt": "hi\n", "TODO.md": todo.replace("- [ ]", "- [x]", 1)})


def tool_files() -> dict[str, bytes]:
    """The tools' files in the user's HOME (the test's), by path, with their contents."""
    home = Path(os.environ["HOME"])
    found = [home / name for name in TOOL_FILES]
    files = [path for top in found for path in ([top] if top.is_file() else top.rglob("*")) if path.is_file()]
    return {str(path.relative_to(home)): path.read_bytes() for path in files}


# The prompt holds TODO.md and PROGRESS.md (up to 64,000 and 16,000 characters of them): in
# three-byte characters, a prompt past 200 KiB, past the kernel's 128 KiB for one argument.
TODO = f"- [ ] {ITEM}\n" + "".join(f"  {'—' * 70}\n" for _ in range(900))  # the item's note: 63,900 characters
PROGRESS = "# Progress\n" + "".join(f"- {'—' * 70}\n" for _ in range(220))


@pytest.mark.parametrize("preset", PRESETS)
def test_a_real_lap_of_a_200_kib_prompt_edits_sends_it_once_and_counts_what_the_server_served(
    tmp_path: Path, preset: str
):
    with served(TODO) as server:
        repo, run = lap(tmp_path, preset, server, files={"TODO.md": TODO, "PROGRESS.md": PROGRESS})
    result = run["result"]
    said = result.stdout + result.stderr
    (note,) = run["laps"] or [None]
    assert note is not None and note["status"] == "green", said
    assert git(repo, "show", "ralph/lap:notes.txt") == "hi"
    sent = [user_text(request.dialect, request.body) for request in server.model_requests()]
    assert max(len(text.encode()) for text in sent) > 200 * 1024
    calls = [number for number, request in enumerate(server.model_requests()) if request.step in ("call", "files")]
    assert calls, [(request.path, request.step) for request in server.requests]
    usage, counted = note["agent"]["usage"], server.totals
    # One comparison, so a failure shows both: the prompt's copies in the first request that does
    # the work, and the lap's requests and tokens beside those the server served.
    seen = {
        "copies of the prompt": server.copies(MARKER)[calls[0]],
        "usage": (usage["requests"], usage["prompt_tokens"], usage["completion_tokens"]),
        "the user's tool files": tool_files(),
    }
    assert seen == {
        "copies of the prompt": 1,
        "usage": (counted.requests, counted.prompt_tokens, counted.completion_tokens),
        "the user's tool files": run["tool files before"],
    }


@pytest.mark.parametrize("preset", PRESETS)
def test_a_rate_limited_model_makes_a_limited_lap(tmp_path: Path, preset: str):
    """Every request answered 429 (the dialect's error body, Retry-After): the lap is "limited",
    and with no time to wait (limit_wait 0) the run stops with exit 6."""
    with ModelApis(TICK, limited=10**6) as server:
        repo, run = lap(tmp_path, preset, server, limit_wait=0, lap_timeout=180)
    result = run["result"]
    assert [note["status"] for note in run["laps"]] == ["limited"], result.stdout + result.stderr
    assert result.returncode == 6, result.stdout + result.stderr
    assert server.model_requests(), "the tool never reached the server"


@pytest.mark.parametrize("preset", PRESETS)
def test_ralph_doctor_finds_the_real_tool_and_asks_it_once(tmp_path: Path, preset: str):
    """`ralph doctor --agent`: the tool found, its version the preset's, one tiny request answered."""
    with ModelApis("echo READY", final="READY") as server:
        executable = program(preset)
        chosen = setup(preset, server)
        agent = {"kind": "command", "preset": preset} | ({"args": chosen.args} if chosen.args else {})
        config = {"goal": "g", "agent": agent, "checks": ["true"], "env": {"pass": sorted(chosen.passed)}}
        repo = make_repo(tmp_path / "repo", config=config | {"sandbox": {"mode": "auto"}}, todo=[ITEM])
        env = {"PATH": f"{executable.parent}{os.pathsep}{os.environ['PATH']}", **chosen.env, **chosen.passed}
        result = ralph(repo, "doctor", "--agent", env=env, timeout=LAP_SECONDS)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    if preset != "mini-swe-agent":  # a dev dependency: whatever version the venv has
        assert f"version {agent_clis.version(PROGRAMS.get(preset, preset))}" in said, said
    assert "it answered" in said and server.model_requests(), said
