"""An agent CLI's login in a sandboxed lap: a copy of its login file alone in the phase's private
HOME, without a single-use refresh token, and nothing of it kept; the read-only HOME refused for
presets; root told it is sandboxed; `ralph doctor` on the agent. The tools here are stand-ins
named like the real ones (tests/test_agent_clis.py runs the real ones)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph

# Reads its login where the real tool would, and records it and its environment; then does what an
# agent set on keeping a foothold would: rewrites the login, plants a hook in the tool's settings.
TOOL = r"""#!PYTHON
import json, os, pathlib, sys
home = pathlib.Path(os.environ["HOME"])
login = home / sys.argv[1]
seen = {
    "login": login.read_text() if login.is_file() else None,
    "home": sorted(str(path.relative_to(home)) for path in home.rglob("*") if path.is_file()),
    "is_sandbox": os.environ.get("IS_SANDBOX"),
    "stdin": sys.stdin.read(),
}
pathlib.Path(os.environ["SEEN"]).write_text(json.dumps(seen))
if login.is_file():
    login.write_text('{"claudeAiOauth": {"accessToken": "rotated-by-the-lap"}}')
settings = home / ".claude" / "settings.json"
settings.parent.mkdir(parents=True, exist_ok=True)
settings.write_text('{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch /tmp/pwned"}]}]}}')
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
pathlib.Path("notes.txt").write_text("hi\n")
"""

LOGINS = {
    "claude": (
        ".claude/.credentials.json",
        {"claudeAiOauth": {"accessToken": "sk-ant-oat-1", "refreshToken": "sk-ant-ort-1", "expiresAt": 1}},
        {"claudeAiOauth": {"accessToken": "sk-ant-oat-1", "refreshToken": "", "expiresAt": 1}},
    ),
    "codex": (
        ".codex/auth.json",
        {"OPENAI_API_KEY": None, "tokens": {"access_token": "a", "refresh_token": "r", "account_id": "x"}},
        {"OPENAI_API_KEY": None, "tokens": {"access_token": "a", "refresh_token": "", "account_id": "x"}},
    ),
    "gemini": (
        ".gemini/settings.json",
        {"security": {"auth": {"selectedType": "oauth-personal"}}, "mcpServers": {"x": {"command": "evil"}}},
        {"security": {"auth": {"selectedType": "oauth-personal"}}},
    ),
    "opencode": (
        ".local/share/opencode/auth.json",
        {"anthropic": {"type": "oauth", "access": "a", "refresh": "r", "expires": 1}, "x": {"type": "api", "key": "k"}},
        {"anthropic": {"type": "oauth", "access": "a", "refresh": "", "expires": 1}, "x": {"type": "api", "key": "k"}},
    ),
}


def tool_on_path(tmp_path: Path, name: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(TOOL.replace("PYTHON", PY))
    (bin_dir / name).chmod(0o755)
    return bin_dir


def users_files(home: Path) -> list[Path]:
    """The user's HOME but ralph's own cache (its workspaces)."""
    return sorted(path for path in home.rglob("*") if (home / ".cache") not in (path, *path.parents))


def repo_for(tmp_path: Path, agent: dict, sandbox: dict | str, checks: tuple[str, ...] = ("true",)) -> Path:
    config = {"goal": "g", "agent": {"kind": "command", **agent}, "checks": list(checks), "env": {"pass": ["SEEN"]}}
    return make_repo(tmp_path / "repo", config=config | {"sandbox": sandbox}, todo=["item 1"])


@needs_bwrap
@pytest.mark.parametrize("preset", list(LOGINS))
def test_a_sandboxed_lap_logs_in_with_a_copy_of_its_login_file_alone_and_the_user_keeps_theirs(
    tmp_path: Path, preset: str
):
    """The copy holds a single-use refresh token empty (and of a settings file, only how it logs
    in); what the lap writes to it, or beside it, stays in the lap."""
    relative, users, copied = LOGINS[preset]
    home = Path.home()
    (home / relative).parent.mkdir(parents=True, exist_ok=True)
    (home / relative).write_text(json.dumps(users))
    before = users_files(home)
    bin_dir = tool_on_path(tmp_path, preset)
    seen = tmp_path / "out" / "seen.json"
    seen.parent.mkdir()
    # The checks run the lap's code too: the agent's HOME, in the workspace they read, has no copy left.
    left = f"test ! -e ../scratch/agent/home/{relative} && test ! -e $HOME/{relative}"
    repo = repo_for(
        tmp_path,
        {"preset": preset, "command": f"{preset} {relative}"},
        {"mode": "required", "writable": [str(seen.parent)]},
        ("test -d ../scratch", left),
    )
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SEEN": str(seen)}
    if preset == "gemini":  # its settings file tells how it logs in; the key is the login
        env["GEMINI_API_KEY"] = "gm-key"
    result = ralph(repo, "run", "--name", "l", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(seen.read_text())
    assert json.loads(found["login"]) == copied
    assert found["home"] == [relative]  # the login file alone: nothing else of the user's HOME
    assert json.loads((home / relative).read_text()) == users  # the user's own, untouched
    assert users_files(home) == before  # and no hook planted beside it
    assert git(repo, "show", "ralph/l:notes.txt") == "hi"


@needs_bwrap
def test_a_tool_that_must_be_told_it_is_sandboxed_is_told_inside_bubblewrap_and_only_there(tmp_path: Path):
    bin_dir = tool_on_path(tmp_path, "claude")
    seen = tmp_path / "out" / "seen.json"
    seen.parent.mkdir()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SEEN": str(seen), "ANTHROPIC_API_KEY": "sk-ant-key"}
    agent = {"preset": "claude", "command": "claude .claude/.credentials.json"}
    inside = repo_for(tmp_path / "in", agent, {"mode": "required", "writable": [str(seen.parent)]})
    assert ralph(inside, "run", env=env).returncode == 0
    assert json.loads(seen.read_text())["is_sandbox"] == "1"
    outside = repo_for(tmp_path / "out-of", agent, "off")
    assert ralph(outside, "run", env=env).returncode == 0
    assert json.loads(seen.read_text())["is_sandbox"] is None


@pytest.mark.skipif(os.geteuid() != 0, reason="Claude Code's refusal is root's")
def test_claude_refusing_root_outside_the_sandbox_is_told_which_variable(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    said = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
    (bin_dir / "claude").write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 1\n")
    (bin_dir / "claude").chmod(0o755)
    repo = repo_for(tmp_path, {"preset": "claude"}, "off")
    result = ralph(repo, "run", "--name", "r", env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "SEEN": "x"})
    assert result.returncode != 0
    (lap,) = lap_notes(repo, "r")[:1]
    assert lap["status"] == "red"
    assert "as root, claude skips its permission prompts only when told by IS_SANDBOX=1" in lap["agent"]["detail"]


@pytest.mark.parametrize("preset", ["claude", "mini-swe-agent"])
def test_a_preset_with_a_read_only_home_is_refused_at_start_in_one_line(tmp_path: Path, preset: str):
    repo = repo_for(tmp_path, {"preset": preset}, {"mode": "auto", "home": "~"})
    result = ralph(repo, "run")
    assert result.returncode == 1
    assert (
        result.stderr.count("\n") == 1
        and (f"sandbox.home: the {preset} preset's tool writes to its HOME, which sandbox.home makes read-only")
        in result.stderr
    )
    assert "ralph/" not in git(repo, "branch", "--list", "ralph/*")


def test_doctor_names_the_agents_version_and_login_and_asks_it_one_tiny_request(tmp_path: Path):
    """Doctor's agent lines: the version the preset was written for (another is a warning), the
    login file it would copy, and with --agent one request, made as a lap makes it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    usage = {"input_tokens": 12, "output_tokens": 1}
    answer = json.dumps({"type": "result", "is_error": False, "result": "READY", "num_turns": 1, "usage": usage})
    (bin_dir / "claude").write_text(
        "#!/bin/sh\n"
        '[ "$1" = --version ] && { echo "9.0.1 (Claude Code)"; exit 0; }\n'
        f"cat > /dev/null; echo '{answer}'\n"
    )
    (bin_dir / "claude").chmod(0o755)
    (Path.home() / ".claude").mkdir()
    (Path.home() / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "a"}}')
    repo = repo_for(tmp_path, {"preset": "claude"}, "auto")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = ralph(repo, "doctor", "--agent", env=env)
    out = result.stdout
    assert "version 9.0.1 — warning: the preset was written for Claude Code 2.1.332; a newer version" in out, out
    assert f"login        by its login file {Path.home() / '.claude' / '.credentials.json'}" in out
    assert "asked        it answered: READY (1 request, 13 tokens)" in out
    (Path.home() / ".claude" / ".credentials.json").unlink()
    result = ralph(repo, "doctor", env=env)
    assert result.returncode == 1
    assert (
        "login        none: the claude preset's tool has no login: set CLAUDE_CODE_OAUTH_TOKEN (made by `claude "
        "setup-token`) or ANTHROPIC_API_KEY, or log in so that ~/.claude/.credentials.json is there"
    ) in result.stdout
    result = ralph(repo, "run", env=env)  # sandboxed, a run without a login does not start
    assert result.returncode == 1 and "the claude preset's tool has no login" in result.stderr, result.stderr
