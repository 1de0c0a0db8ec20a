"""Red team, issue 39: what a lap's agent (or its checks) can make of the agent CLIs' logins, report
files, prompt channels and `ralph doctor --agent`. Each test is a promise of the change that a
lap, or a plain setup, breaks. The tools are stand-ins named like the real ones, as in
test_agents_logins.py, but where a real tool is needed (mini-swe-agent, a dev dependency)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.repos import git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph

TICK = "sed -i 's/- \\[ \\]/- [x]/' TODO.md && echo hi > notes.txt"
CLAUDE_DONE = json.dumps({"type": "result", "is_error": False, "result": "done", "num_turns": 1})


def stand_in(tmp_path: Path, name: str, body: str) -> Path:
    """A shell script named like the real tool, on a PATH of its own: the folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text("#!/bin/sh\n" + body)
    (bin_dir / name).chmod(0o755)
    return bin_dir


def repo_for(tmp_path: Path, agent: dict, sandbox: dict | str = "required", **more: object) -> Path:
    config = {"goal": "g", "agent": {"kind": "command", **agent}, "checks": ["true"], "sandbox": sandbox, **more}
    return make_repo(tmp_path / "repo", config=config, todo=["item 1"])


def path_with(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


# --- the login copy -------------------------------------------------------------------------------

# preset: (the login files ralph copies, relative to HOME; what the tool's settings folder is)
LOGIN_FOLDERS = {
    "claude": ((".claude/.credentials.json",), ".claude"),
    "codex": ((".codex/auth.json",), ".codex"),
    "gemini": ((".gemini/oauth_creds.json", ".gemini/settings.json"), ".gemini"),
}
DONE_BY = {"claude": CLAUDE_DONE, "codex": "", "gemini": json.dumps({"response": "done", "stats": {}})}


@needs_bwrap
@pytest.mark.parametrize("preset", list(LOGIN_FOLDERS))
def test_a_lap_cannot_make_ralph_delete_the_users_own_login_through_a_symlinked_folder(tmp_path: Path, preset: str):
    """Inside the sandbox the lap's agent turns its private ~/.claude (~/.codex, ~/.gemini) into a
    symlink to the user's real one (a path it need not see, only name: /root, /home/$USER). When
    the phase ends ralph, outside the sandbox and as the user, removes "the copy" through that
    symlink: the user's own login file (and gemini's settings.json) is deleted — logged out."""
    files, folder = LOGIN_FOLDERS[preset]
    home = Path.home()
    for relative in files:
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(json.dumps({"security": {"auth": {"selectedType": "oauth-personal"}}}))
    bin_dir = stand_in(
        tmp_path,
        preset,
        f'cat > /dev/null\nrm -rf "$HOME/{folder}" && ln -s "$USERS_HOME/{folder}" "$HOME/{folder}"\n'
        f"{TICK}\necho '{DONE_BY[preset]}'\n",
    )
    repo = repo_for(tmp_path, {"preset": preset}, env={"pass": ["USERS_HOME"]})
    result = ralph(repo, "run", "--name", "r", env={**path_with(bin_dir), "USERS_HOME": str(home)})
    assert result.returncode == 0, result.stdout + result.stderr
    gone = [relative for relative in files if not (home / relative).exists()]
    assert not gone, f"ralph deleted the user's own {gone} when it removed the lap's copy"


@needs_bwrap
@pytest.mark.parametrize("what", ["a folder where the copy was", "a file where its folder was"])
def test_a_lap_that_replaces_its_login_copy_cannot_crash_ralph(tmp_path: Path, what: str):
    """The copy is removed with Path.unlink(missing_ok=True): a folder in its place (EISDIR) or a
    file in place of its folder (ENOTDIR) is no missing file, and the error ends the whole run
    with a traceback instead of a lap."""
    (Path.home() / ".claude").mkdir()
    (Path.home() / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "a"}}')
    swap = (
        'rm "$HOME/.claude/.credentials.json" && mkdir "$HOME/.claude/.credentials.json"'
        if what.startswith("a folder")
        else 'rm -rf "$HOME/.claude" && touch "$HOME/.claude"'
    )
    bin_dir = stand_in(tmp_path, "claude", f"cat > /dev/null\n{swap}\n{TICK}\necho '{CLAUDE_DONE}'\n")
    repo = repo_for(tmp_path, {"preset": "claude"})
    result = ralph(repo, "run", "--name", "r", env=path_with(bin_dir))
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert [note["status"] for note in lap_notes(repo, "r")] == ["green"], said
