"""Agent CLIs by preset: stand-ins named like the real tools on PATH record how ralph runs them
(arguments, stdin, the secret-named variables they get) and answer as the tools do: their
results, usage and cost, and the messages they print when a usage limit is hit."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from helpers.repos import PY, git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph

from ralph.agents.scripted import Reply, ScriptedServer, Step, call, tool_call, tool_calls
from ralph.facts.presets import PRESETS

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-canary",
    "OPENAI_API_KEY": "sk-openai-canary",
    "GEMINI_API_KEY": "gm-canary",
    "CODEX_API_KEY": "cx-canary",
    "MY_DB_PASSWORD": "hunter2",  # nobody's credential: no agent gets it
}

# mini-swe-agent's settings for the real one's lap: its model's address, offline prices, one try.
MINI_SETTINGS = ("OPENAI_BASE_URL", "LITELLM_LOCAL_MODEL_COST_MAP", "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT")

# The stand-in: records its call, does the lap's work (or not), prints what the real tool would.
STAND_IN = r"""#!PYTHON
import json, os, pathlib, re, sys
name = pathlib.Path(sys.argv[0]).name
calls = pathlib.Path(os.environ["STAND_IN_CALLS"])
number = len(list(calls.glob(name + "-*.json"))) + 1
secret = re.compile("KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)
stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
(calls / f"{name}-{number}.json").write_text(json.dumps({
    "argv": sys.argv[1:], "stdin": stdin,
    "secrets": {k: v for k, v in os.environ.items() if secret.search(k) and not k.startswith("RALPH_")},
    "endpoint": os.environ.get("ANTHROPIC_BASE_URL"),
    "task_file": os.environ["RALPH_TASK_FILE"],
    "task": pathlib.Path(os.environ["RALPH_TASK_FILE"]).read_text() if os.path.exists(os.environ["RALPH_TASK_FILE"]) else "",
}))
script = json.loads(pathlib.Path(os.environ["STAND_IN_SCRIPT"]).read_text())
step = script[min(number, len(script)) - 1]
if step.get("work"):
    os.chdir(os.environ["RALPH_WORKTREE"])  # mini-swe-agent's starts elsewhere, its commands run there
    todo = pathlib.Path("TODO.md")
    todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
    pathlib.Path(f"work-{number}.txt").write_text("done\n")
sys.stdout.write(step.get("print", "").replace("NOW+3", str(int(__import__("time").time()) + 3)))
sys.exit(step.get("exit", 0))
"""

CLAUDE_RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "ticked one item",
    "num_turns": 3,
    "total_cost_usd": 0.25,
    "usage": {
        "input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 30,
        "output_tokens": 7,
    },
}


def stand_ins(tmp_path: Path, script: list[dict]) -> dict[str, str]:
    """A folder of stand-ins on PATH, the script they follow, and the folder of their calls."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    for preset in PRESETS.values():
        tool = bin_dir / preset.executable
        tool.write_text(STAND_IN.replace("PYTHON", PY))
        tool.chmod(0o755)
    (tmp_path / "script.json").write_text(json.dumps(script))
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STAND_IN_CALLS": str(calls),
        "STAND_IN_SCRIPT": str(tmp_path / "script.json"),
        **SECRETS,
    }


def repo_with(
    tmp_path: Path, agent: dict, items: int = 1, sandbox: str = "off", progress: str | None = None, **limits: object
) -> Path:
    config = {
        "goal": "g",
        "agent": {"kind": "command", **agent},
        "checks": ["true"],
        "limits": {"stagnation": 5, **limits},
        # Laps are given nothing else of the test's environment, and see no file of it but these.
        "env": {"pass": ["STAND_IN_CALLS", "STAND_IN_SCRIPT", *MINI_SETTINGS]},
        "sandbox": {
            "mode": sandbox,
            "writable": [str(tmp_path / "calls")],
            "readable": [str(tmp_path / "script.json")],
        },
    }
    return make_repo(
        tmp_path / "repo", config=config, todo=[f"item {n}" for n in range(1, items + 1)], progress=progress
    )


def calls(tmp_path: Path, tool: str) -> list[dict]:
    found = sorted((tmp_path / "calls").glob(f"{tool}-*.json"), key=lambda path: int(path.stem.rsplit("-", 1)[1]))
    return [json.loads(path.read_text()) for path in found]


# The arguments each tool receives after the shell, and where it finds the prompt. The switches
# that keep the user's own settings, hooks, MCP servers and extensions out are among them.
EXPECTED = {
    "claude": (
        [
            "-p",
            "--output-format",
            "json",
            "--dangerously-skip-permissions",
            "--setting-sources",
            "project,local",
            "--strict-mcp-config",
        ],
        "stdin",
        ["ANTHROPIC_API_KEY"],
    ),
    "codex": (
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--ignore-user-config",
            "-",
        ],
        "stdin",
        ["CODEX_API_KEY", "OPENAI_API_KEY"],
    ),
    "aider": (
        ["--yes-always", "--message-file", "PROMPT_FILE", "--no-auto-commits", "--no-check-update"],
        "file",
        ["ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"],
    ),
    "gemini": (
        ["--approval-mode", "yolo", "--skip-trust", "--extensions", "none", "--output-format", "json"],
        "stdin",
        ["GEMINI_API_KEY"],
    ),
    "opencode": (
        ["run", "--format", "json", "--auto", "--pure", "--title", "ralph lap 1"],
        "stdin",
        ["ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"],
    ),
    "goose": (
        ["run", "--no-session", "--instructions", "PROMPT_FILE"],
        "file",
        ["ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"],
    ),
    "mini": (
        ["--yolo", "--exit-immediately", "-c", "mini.yaml", "-c", "TASK_FILE"],
        "task-config",
        ["ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"],
    ),
}


@pytest.mark.parametrize("preset", [pytest.param("claude", marks=needs_bwrap), *list(PRESETS)[1:]])
def test_a_preset_runs_its_tool_with_the_prompt_and_only_its_credentials(tmp_path: Path, preset: str):
    """Claude Code's laps run sandboxed: its credentials reach it inside bubblewrap too. The prompt
    is over 200 KiB (a long PROGRESS.md, in Japanese), more than one argument may hold."""
    env = stand_ins(tmp_path, [{"work": True}]) | {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    sandbox = "required" if preset == "claude" else "off"
    progress = "## 引き継ぎ\n" + "前のラップで試したことと、その結果のメモです。\n" * 9000
    repo = repo_with(tmp_path, {"preset": preset, "args": "--model m1"}, sandbox=sandbox, progress=progress)
    notes = "".join(f"  {n}: 前のラップで試したことと、その結果のメモです。\n" for n in range(3000))
    (repo / "TODO.md").write_text((repo / "TODO.md").read_text() + notes)
    git(repo, "commit", "-qam", "a long TODO.md")
    result = ralph(repo, "run", "--name", "p", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    executable = PRESETS[preset].executable
    (call,) = calls(tmp_path, executable)
    arguments, prompt_at, credentials = EXPECTED[executable]
    prompt_file = str(repo / ".git" / "ralph" / "p" / "lap-1" / "prompt.md")
    shown = [arg.replace("PROMPT_FILE", prompt_file).replace("TASK_FILE", call["task_file"]) for arg in arguments]
    assert call["argv"][: len(shown)] == shown, call["argv"]
    assert call["argv"][-2:] == ["--model", "m1"]  # args: appended
    task = yaml.safe_load(call["task"])["run"]["task"] if prompt_at == "task-config" else ""
    where = {"stdin": call["stdin"], "file": Path(prompt_file).read_text(), "task-config": task}
    prompt = Path(prompt_file).read_text()
    assert "- [ ] item 1" in prompt and "引き継ぎ" in prompt and len(prompt.encode()) > 200 * 1024
    assert where[prompt_at] == prompt
    # Once: not on stdin too (gemini and opencode append stdin to a prompt), nor as an argument.
    assert prompt_at == "stdin" or call["stdin"] == ""
    assert not any("- [ ] item 1" in arg for arg in call["argv"])
    assert sorted(call["secrets"]) == credentials  # its own, and no other secret
    assert all(call["secrets"][name] == SECRETS[name] for name in credentials)
    assert call["endpoint"] == "http://127.0.0.1:9"  # where its API is: the agent's, not a secret


def test_a_user_who_wants_their_own_settings_replaces_the_presets_command(tmp_path: Path):
    """The opt-out: `command:` beside the preset runs as written, without the switches that keep
    the user's settings, hooks and MCP servers out, and keeps the preset's credentials and reports."""
    env = stand_ins(tmp_path, [{"work": True, "print": json.dumps(CLAUDE_RESULT) + "\n"}])
    mine = "claude -p --output-format json --dangerously-skip-permissions"
    repo = repo_with(tmp_path, {"preset": "claude", "command": mine})
    result = ralph(repo, "run", "--name", "o", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    (call,) = calls(tmp_path, "claude")
    assert call["argv"] == ["-p", "--output-format", "json", "--dangerously-skip-permissions"]
    assert sorted(call["secrets"]) == ["ANTHROPIC_API_KEY"]
    (lap,) = lap_notes(repo, "o")
    assert lap["agent"]["usage"]["cost_usd"] == 0.25


def test_claudes_result_gives_the_laps_summary_tokens_and_cost_and_max_cost_usd_stops_the_run(tmp_path: Path):
    env = stand_ins(tmp_path, [{"work": True, "print": json.dumps(CLAUDE_RESULT) + "\n"}])
    repo = repo_with(tmp_path, {"preset": "claude"}, items=3, max_cost_usd=0.4)
    result = ralph(repo, "run", "--name", "c", env=env)
    assert result.returncode == 7, result.stdout + result.stderr
    assert "stopped: max_cost_usd (0.4) spent: $0.50 used (exit 7)" in result.stdout
    first, second = lap_notes(repo, "c")
    assert first["agent"]["summary"] == "ticked one item"
    assert first["agent"]["usage"] == dict(
        first["agent"]["usage"], requests=3, prompt_tokens=150, completion_tokens=7, cost_usd=0.25
    )
    status = json.loads(ralph(repo, "status", "--json").stdout)
    assert status["cost_usd"] == 0.5 and status["laps_of_unknown_cost"] == 0
    shown = ralph(repo, "show", "1").stdout
    assert "cost    $0.2500" in shown and "tokens  3 requests, 150 prompt + 7 completion" in shown
    (tmp_path / "codex" / "calls").mkdir(parents=True)
    codex = repo_with(tmp_path / "codex", {"preset": "codex"})
    assert ralph(codex, "run", "--name", "x", env=env).returncode == 0
    assert "cost    unknown (its tool tells no cost)" in ralph(codex, "show", "1").stdout
    assert "one session" not in shown  # no context bars: an agent CLI tells no single request's size


def test_max_cost_usd_without_a_known_cost_is_refused_at_start(tmp_path: Path):
    env = stand_ins(tmp_path, [{"work": True}])
    repo = repo_with(tmp_path, {"preset": "codex"}, max_cost_usd=1)
    result = ralph(repo, "run", env=env)
    assert result.returncode == 1 and result.stderr == (
        "ralph: limits.max_cost_usd needs every lap's cost, but the preset codex reports no cost "
        "(presets that do: aider, claude, mini-swe-agent, opencode) — add prices or drop the fuse\n"
    )


def test_a_usage_limit_waits_for_its_reset_and_the_lap_is_neither_red_nor_counted(tmp_path: Path):
    limited = {"print": "Claude AI usage limit reached|NOW+3\n", "exit": 1}
    env = stand_ins(tmp_path, [limited, {"work": True, "print": json.dumps(CLAUDE_RESULT) + "\n"}])
    repo = repo_with(tmp_path, {"preset": "claude"}, max_laps=1)
    started = time.monotonic()
    result = ralph(repo, "run", "--name", "l", "--plain", env=env)
    assert result.returncode == 0, result.stdout + result.stderr  # max_laps 1: the limited lap did not count
    assert time.monotonic() - started >= 1
    first, second = lap_notes(repo, "l")
    assert first["status"] == "limited" and first["reason"].startswith(
        "the agent hit a usage or rate limit (it resets "
    )
    assert first["progress"] is False and second["status"] == "green" and second["done"] is True
    assert "the next lap starts at" in result.stdout and "lap 1 limited" in result.stdout


def test_a_limit_that_resets_after_max_minutes_stops_the_run_at_once(tmp_path: Path):
    env = stand_ins(tmp_path, [{"print": "You've hit your limit · resets 4:50am (Europe/Rome)\n", "exit": 1}])
    repo = repo_with(tmp_path, {"preset": "claude"}, max_minutes=1)
    now = time.localtime()
    if (now.tm_hour, now.tm_min) in ((4, 49), (4, 50)):
        pytest.skip("the reset named is now")
    result = ralph(repo, "run", "--name", "m", env=env)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "the agent's limit resets after max_minutes (1)" in result.stdout


def test_a_command_agent_that_fails_while_secrets_were_kept_from_it_is_told_which(tmp_path: Path):
    env = stand_ins(tmp_path, [{"print": "error: not logged in\n", "exit": 3}])
    repo = repo_with(tmp_path, {"command": "claude"}, max_laps=1)
    result = ralph(repo, "run", "--name", "h", env=env)
    assert result.returncode == 3, result.stdout + result.stderr
    (lap,) = lap_notes(repo, "h")
    assert lap["status"] == "red" and lap["reason"] == "agent exited with code 3"
    assert (
        "ralph gives the agent only the variables docs/sandbox.md lists, not these of yours: "
        "ANTHROPIC_API_KEY, CODEX_API_KEY, GEMINI_API_KEY, MY_DB_PASSWORD, OPENAI_API_KEY — if the agent needs "
        "one to log in, let it through with `env: {pass: [ANTHROPIC_API_KEY]}`" in lap["output_tail"]
    )
    (call,) = calls(tmp_path, "claude")
    assert call["secrets"] == {}


def test_the_idle_watchdog_stops_a_silent_agent_but_not_one_that_writes_files(tmp_path: Path):
    tick = "sed -i 's/\\[ \\]/[x]/' TODO.md"
    busy = f"for i in 1 2 3 4 5 6 7 8; do echo $i > busy.txt; sleep 0.3; done; {tick}"
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f'if [ "$RALPH_LAP" = 1 ]; then echo start; sleep 60; else {busy}; fi'},
        "checks": ["true"],
        "limits": {"idle_timeout": 1, "lap_timeout": 60, "stagnation": 5},
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["a"])
    started = time.monotonic()
    result = ralph(repo, "run", "--name", "i")
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 30
    first, second = lap_notes(repo, "i")
    assert first["status"] == "red" and first["agent"]["outcome"] == "timeout"
    assert first["reason"] == "idle: the agent printed nothing and changed no file for 1s, and was stopped"
    assert first["agent"]["duration_s"] < 10
    assert second["status"] == "green" and second["agent"]["duration_s"] > 2  # silent, but writing: not idle


def test_a_limited_agent_hands_the_next_lap_to_its_fallback_and_the_note_and_trailer_say_so(tmp_path: Path):
    limited = {"print": "You've hit your usage limit. Upgrade to Pro or try again at 3:28 PM.\n", "exit": 1}
    env = stand_ins(tmp_path, [limited])  # codex is limited, whatever the lap
    (tmp_path / "aider-script.json").write_text(
        json.dumps([{"work": True, "print": "Cost: $0.01 message, $0.02 session.\n"}])
    )
    fallback = {"kind": "command", "command": f"STAND_IN_SCRIPT={tmp_path / 'aider-script.json'} aider"}
    repo = repo_with(tmp_path, {"preset": "codex", "fallback": [fallback]}, max_laps=1)
    started = time.monotonic()
    result = ralph(repo, "run", "--name", "f", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 30  # no wait for codex's reset: another agent was there
    first, second = lap_notes(repo, "f")
    assert (first["status"], first["fallback"], first["agent"]["name"]) == ("limited", 0, "codex")
    assert (second["status"], second["fallback"], second["agent"]["name"]) == ("green", 1, "command")
    trailers = git(repo, "log", "-1", "--format=%(trailers:key=Ralph-Agent,valueonly)", "ralph/f").strip()
    assert trailers == "command" and len(calls(tmp_path, "codex")) == 1 and len(calls(tmp_path, "aider")) == 1


def test_an_agent_that_keeps_failing_hands_over_after_fallback_after_laps(tmp_path: Path):
    env = stand_ins(tmp_path, [{"print": "segfault\n", "exit": 139}])
    working = "sed -i 's/\\[ \\]/[x]/' TODO.md && echo ok > ok.txt"
    agent = {"preset": "gemini", "fallback_after": 2, "fallback": [{"kind": "command", "command": working}]}
    repo = repo_with(tmp_path, agent, max_laps=4)
    result = ralph(repo, "run", "--name", "k", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(lap["status"], lap["fallback"]) for lap in lap_notes(repo, "k")] == [("red", 0), ("red", 0), ("green", 1)]


def test_the_real_mini_swe_agent_does_a_lap_through_its_preset(tmp_path: Path):
    """mini-swe-agent from PyPI (a dev dependency), its model our scripted server: a real agent
    CLI reads the prompt, runs its commands in the lap's work tree and finishes, sandboxed."""
    if shutil.which("mini") is None:
        pytest.fail("mini-swe-agent is not installed: pip install -e '.[dev]' installs it")
    script: list[Step] = [
        tool_calls(
            call("bash", {"command": "sed -i 's/- \\[ \\]/- [x]/' TODO.md && echo hi > notes.txt"}), content="Ticking."
        ),
        tool_calls(call("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}), content="Done."),
    ]
    (tmp_path / "calls").mkdir()
    with ScriptedServer(script, strict=False) as server:  # mini sends tools without tool_choice
        repo = repo_with(tmp_path, {"preset": "mini-swe-agent", "args": "--model openai/scripted"}, sandbox="auto")
        env = {
            "OPENAI_API_KEY": "sk-mini-canary",
            "OPENAI_BASE_URL": server.base_url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # offline: litellm's own price list, not GitHub's
            "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
        }
        result = ralph(repo, "run", "--name", "mini", env=env, timeout=180)
        sent = [request.body for request in server.requests]
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(sent) == 2 and "- [ ] item 1" in json.dumps(sent[0]["messages"])  # the lap's prompt, as its task
    (lap,) = lap_notes(repo, "mini")
    assert lap["status"] == "green" and lap["done"] is True and lap["agent"]["name"] == "mini-swe-agent"
    usage = lap["agent"]["usage"]  # from its trajectory, as the server answered
    written = sum(max(1, len(json.dumps(step.message)) // 4) for step in script if isinstance(step, Reply))
    assert (usage["requests"], usage["completion_tokens"]) == (2, written) and usage["prompt_tokens"] > 0, usage
    assert git(repo, "show", "ralph/mini:notes.txt") == "hi"
    assert server.requests[0].headers["authorization"] == "Bearer sk-mini-canary"


def test_what_an_agent_prints_cannot_crash_the_run_nor_buy_it_endless_laps(tmp_path: Path):
    """Fake limits: far resets, impossible clocks, resets already past. Limited laps stop the run
    once there are more of them than max_laps, and a reset past limit_wait stops it at once."""
    said = [
        "rate limit reached, try again in 100000000 hours",  # no reset time: backoff, past limit_wait
        "You've hit your limit · resets 4:99am",
        "Claude AI usage limit reached|1000000000",  # already past
    ]
    for number, text in enumerate(said):
        (tmp_path / str(number)).mkdir()
        env = stand_ins(tmp_path / str(number), [{"print": text + "\n", "exit": 1}])
        repo = repo_with(tmp_path / str(number), {"preset": "claude"}, max_laps=2, limit_wait=30)
        result = ralph(repo, "run", "--name", "x", env=env)
        assert result.returncode == 6, result.stdout + result.stderr
        assert "internal error" not in result.stderr
        assert "waiting 60s more would pass limits.limit_wait (30s, 0s spent)" in result.stdout, result.stdout
        assert [lap["status"] for lap in lap_notes(repo, "x")] == ["limited"]


def test_a_lap_of_unknown_cost_stops_a_run_with_max_cost_usd(tmp_path: Path):
    nan = json.dumps(CLAUDE_RESULT).replace("0.25", "NaN")
    env = stand_ins(tmp_path, [{"work": True, "print": nan + "\n"}])
    repo = repo_with(tmp_path, {"preset": "claude"}, items=3, max_cost_usd=1)
    result = ralph(repo, "run", "--name", "u", env=env)
    assert result.returncode == 7, result.stdout + result.stderr
    assert "max_cost_usd (1) cannot be kept: 1 lap(s) of unknown cost ($0.00 known)" in result.stdout


def test_counts_past_belief_and_json_nested_past_python_are_no_usage_and_crash_nothing(tmp_path: Path):
    huge = json.dumps(CLAUDE_RESULT).replace('"input_tokens": 100', f'"input_tokens": {"9" * 4000}')
    deep = "{" + '"a": [' * 50000 + "]" * 50000 + "}"  # past Python's recursion limit
    env = stand_ins(tmp_path, [{"work": True, "print": f"{deep}\n{huge}\n"}])
    repo = repo_with(tmp_path, {"preset": "claude"}, items=1)
    result = ralph(repo, "run", "--name", "n", env=env)
    assert result.returncode == 0 and "internal error" not in result.stderr, result.stdout + result.stderr
    (lap,) = lap_notes(repo, "n")
    assert lap["agent"]["usage"]["prompt_tokens"] < 10**12  # the count past belief is no count
    stats = ralph(repo, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["runs"][0]["laps"] == 1


def test_the_judges_key_reaches_no_agent_cli(tmp_path: Path):
    env = stand_ins(tmp_path, [{"work": True}])
    score = {"dimension": "does it", "score": 1, "evidence": "done", "reason": "ok"}
    with ScriptedServer([tool_call("verdict", {"scores": [score]})]) as judge:
        repo = repo_with(tmp_path, {"preset": "codex"}, max_laps=1)
        config = json.loads((repo / "ralph.yaml").read_text())
        config["roles"] = {"judge": {"model": "j", "base_url": judge.base_url, "api_key_env": "OPENAI_API_KEY"}}
        (repo / "ralph.yaml").write_text(json.dumps(config))
        git(repo, "commit", "-qam", "a judge")
        result = ralph(repo, "run", "--name", "j", env=env)
    assert "lap 1 red" in result.stdout and "judge: score" in result.stdout, result.stdout + result.stderr
    (made,) = calls(tmp_path, "codex")
    assert sorted(made["secrets"]) == ["CODEX_API_KEY"]  # OPENAI_API_KEY is the judge's here


def test_limited_laps_past_max_laps_stop_the_run_and_each_lap_waits_for_its_reset(tmp_path: Path):
    env = stand_ins(tmp_path, [{"print": "Claude AI usage limit reached|NOW+3\n", "exit": 1}])
    repo = repo_with(tmp_path, {"preset": "claude"}, max_laps=1)
    result = ralph(repo, "run", "--name", "w", env=env)
    assert result.returncode == 6, result.stdout + result.stderr
    assert "stopped: the agent was limited in 2 laps, more than max_laps (exit 6)" in result.stdout
    first, second = lap_notes(repo, "w")
    waited_until = first["agent"]["limited_until"]
    started = datetime.fromisoformat(second["started_at"]).timestamp()
    assert started >= waited_until  # the second lap began after the reset the tool named
    assert "laps        0 of max 1 (and 2 limited, not counted)" in ralph(repo, "status").stdout


def test_a_long_lap_is_costed_from_its_whole_output(tmp_path: Path):
    step = {"type": "step_finish", "part": {"tokens": {"input": 10, "output": 1}, "cost": 0.01}}
    events = "".join(json.dumps(step) + "\n" for _ in range(2000))  # about 170 KB, past the 64 KiB kept in memory
    env = stand_ins(tmp_path, [{"work": True, "print": events}])
    repo = repo_with(tmp_path, {"preset": "opencode"})
    assert ralph(repo, "run", "--name", "o", env=env).returncode == 0
    (lap,) = lap_notes(repo, "o")
    assert lap["agent"]["usage"]["requests"] == 2000 and lap["agent"]["usage"]["cost_usd"] == 20.0
