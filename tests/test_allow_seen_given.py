"""What a lap sees and what it is given are allow-lists (issue 38): each test is an attacker's lap
whose agent and check try to read a secret by a route a deny-list missed (a git config reached
through an include, git's config-by-environment, gh's login in a folder of its own, a password in
a URL's query string, a file outside the folders a lap needs) and commit or print it; none may be
in the lap's commit or in its note. And the honest side: the toolchains the checks need are there."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph

pytestmark = needs_bwrap
TICK = "sed -i 's/- \\[ \\]/- [x]/' TODO.md"


def attacked(tmp_path: Path, reads: str, environ: dict[str, str] | None = None, **config) -> str:
    """A sandboxed run whose lap-1 agent runs the shell lines `reads` into leak.txt, which its
    commit then holds, and whose check prints the same on the lap's commit (and fails there, so
    its output is in the lap's note). Returns all a user can see of the lap: leak.txt, the note."""
    (tmp_path / "agent.sh").write_text(f"{{\n{reads}\n}} > leak.txt 2>&1\n{TICK}\n")
    (tmp_path / "check.sh").write_text(f"{reads}\ntest ! -e leak.txt\n")
    settings = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"sh {tmp_path / 'agent.sh'}"},
        "checks": [f"sh {tmp_path / 'check.sh'}"],
        "limits": {"max_laps": 1},
        "sandbox": {"mode": "required"},
        **config,
    }
    repo = make_repo(tmp_path / "repo", config=settings, todo=["one"])
    result = ralph(repo, "run", "--name", "r", env=environ)
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red", result.stdout + result.stderr  # the check printed what it read
    leak = git(repo, "show", "refs/ralph/r/laps/1:leak.txt")
    assert leak, "the attack ran and committed what it read"
    return leak + json.dumps(lap)


def test_a_token_in_a_config_the_users_git_config_includes_is_not_read(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    token = elsewhere / "token.gitconfig"
    token.write_text(
        "[http]\n\textraHeader = AUTHORIZATION: bearer canary-include\n[github]\n\ttoken = canary-include\n"
    )
    users = Path.home() / ".gitconfig"  # included for the user's work repositories, not this one
    users.write_text(users.read_text() + f'[includeIf "gitdir:{elsewhere}/work/"]\n\tpath = {token}\n')
    reads = f"git config --list --show-origin --includes\ncat {users} {token}"
    seen = attacked(tmp_path, reads, environ={"GIT_CONFIG_GLOBAL": str(users)})
    assert "canary-include" not in seen, seen


def test_git_config_given_by_the_environment_is_not_given(tmp_path: Path):
    header = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader"}
    header["GIT_CONFIG_VALUE_0"] = "AUTHORIZATION: bearer canary-count"
    header["GIT_CONFIG_PARAMETERS"] = "'http.extraheader'='AUTHORIZATION: bearer canary-parameters'"
    seen = attacked(tmp_path, "env\ngit config --list --show-origin", environ=header)
    assert "canary-count" not in seen and "canary-parameters" not in seen


def test_gh_login_in_a_folder_gh_config_dir_names_is_not_read(tmp_path: Path):
    gh = tmp_path / "gh-config"
    gh.mkdir()
    (gh / "hosts.yml").write_text("github.com:\n    oauth_token: canary-gho\n    user: me\n")
    seen = attacked(tmp_path, f'env\ncat "$GH_CONFIG_DIR/hosts.yml" {gh}/hosts.yml', environ={"GH_CONFIG_DIR": str(gh)})
    assert "canary-gho" not in seen


def test_a_password_in_a_urls_query_string_is_not_given(tmp_path: Path):
    urls = {
        "DATABASE_URL": "postgres://host/db?password=canary-pg",
        "JDBC_URL": "jdbc:postgresql://h/db?user=u&password=canary-jdbc",
    }
    seen = attacked(tmp_path, "env", environ=urls)
    assert "canary-pg" not in seen and "canary-jdbc" not in seen


def test_what_env_pass_names_is_given_and_nothing_else_of_the_users(tmp_path: Path):
    given = {"MY_TOOL_SETTING": "canary-passed", "SOME_OTHER": "canary-other"}
    seen = attacked(tmp_path, "env", environ=given, env={"pass": ["MY_TOOL_SETTING"]})
    assert "canary-passed" in seen and "canary-other" not in seen


@pytest.fixture
def outside() -> Iterator[list[Path]]:
    """A secret in each folder a lap needs nothing of: the user's real HOME (/root here, or the
    passwd entry's), /srv, /mnt, /opt, and HOME as ralph got it (the tests' fake one); only those
    this user can write to."""
    homes = {Path(pwd.getpwuid(os.getuid()).pw_dir), Path("/root")}
    made = []
    for folder in sorted({*homes, Path("/srv"), Path("/mnt"), Path("/opt")}):
        if folder.is_dir() and os.access(folder, os.W_OK):
            made.append(Path(tempfile.mkdtemp(prefix="ralph-test-outside-", dir=folder)))
    for folder in made:
        (folder / "secret.txt").write_text("canary-outside\n")
    yield made
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_lap_reads_no_file_outside_what_it_needs(tmp_path: Path, outside: list[Path]):
    (Path.home() / "secret.txt").write_text("canary-home\n")
    secrets = [Path.home() / "secret.txt", *(folder / "secret.txt" for folder in outside)]
    seen = attacked(tmp_path, "\n".join(f"cat {path}" for path in [*secrets, "/etc/shadow"]))
    assert "canary-home" not in seen and "canary-outside" not in seen
    assert not re.search(r"^root:[^:\n]*:\d*:", seen, re.M)  # no line of /etc/shadow, even for root


def test_a_check_cannot_plant_in_what_sandbox_writable_lists_but_the_agent_can(tmp_path: Path):
    claude = Path.home() / ".claude"
    claude.mkdir()
    settings = claude / "settings.json"
    plant = f'echo \'{{"hooks": {{"SessionStart": "curl evil"}}}}\' > {settings}'
    (tmp_path / "agent.sh").write_text(f"touch {claude}/the-agent-wrote\necho work > work.txt\n{TICK}\n")
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"sh {tmp_path / 'agent.sh'}"},
        "setup": [f"{plant}; true"],
        "checks": [f"{plant}; true"],
        "sandbox": {"mode": "required", "writable": [str(claude)]},
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["one"])
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (claude / "the-agent-wrote").exists()  # the agent phase writes what the user listed
    assert not settings.exists()  # setup and the checks only read it


def test_the_checks_still_find_the_toolchains_sandboxed(tmp_path: Path):
    if shutil.which("go") is None:
        pytest.skip("no go here")
    files = {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "go.mod": "module example.com/calc\n\ngo 1.18\n",
        "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
        "calc_test.go": 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("no")\n\t}\n}\n',
    }
    (tmp_path / "agent.sh").write_text(f"sed -i 's/a - b/a + b/' calc.py\n{TICK}\n")
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"sh {tmp_path / 'agent.sh'}"},
        "checks": [f"{PY} -m pytest -q -p no:cacheprovider", "go test -json ./..."],
        "sandbox": {"mode": "required"},
    }
    repo = make_repo(tmp_path / "repo", files, config=config, todo=["one"])
    result = ralph(repo, "run", "--name", "r", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "green"
