"""What a sandboxed lap can reach by path. A socket on a read-only mount still takes connections,
so a read-only view of the machine is not enough: a hostile lap tries a real gpg-agent (to sign
with the user's key), a real ssh-agent named only by IdentityAgent in ~/.ssh/config and started
while the lap runs, Docker's and Podman's sockets (stand-ins that count who connects), a socket
in a folder the sandbox binds back from /run, git credentials in a submodule's and a worktree's
config, and a URL with a password in the environment. Only what `sandbox.sockets` lists is
reached, and that the same attacks then work shows they are real."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph

pytestmark = needs_bwrap
MESSAGE = "signed by whoever reached the agent\n"

ATTACKS = r"""
import json, os, pathlib, shutil, socket, subprocess, tempfile, time
out, home = pathlib.Path(os.environ["OUT"]), pathlib.Path(os.environ["USERS_HOME"])
run = lambda *args, **kw: subprocess.run(list(map(str, args)), capture_output=True, text=True, **kw)
seen = {}
(out / "message").write_text(os.environ["MESSAGE"])

# gpg: the user's public keyring beside a link to the user's agent, which holds the secret key.
gnupg, mine = home / ".gnupg", pathlib.Path(tempfile.mkdtemp())
for name in ("pubring.kbx", "trustdb.gpg"):
    try:
        shutil.copy(gnupg / name, mine / name)
    except OSError:
        pass
os.symlink(gnupg / "S.gpg-agent", mine / "S.gpg-agent")
signing = run("gpg", "--homedir", mine, "--batch", "--yes", "--no-autostart", "--detach-sign", "-o", out / "gpg.sig", out / "message")
seen["gpg"] = signing.returncode

def connect(path):
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))
            client.sendall(b'POST /containers/create HTTP/1.1\r\nHost: d\r\n\r\n{"HostConfig": {"Privileged": true, "Binds": ["/:/host"]}}')
        return "connected"
    except OSError as exc:
        return type(exc).__name__
for name in ("S.gpg-agent.extra", "S.gpg-agent.browser", "S.gpg-agent.ssh"):
    seen[name] = connect(gnupg / name)
for name, path in json.loads((out / "services.json").read_text()).items():
    seen[name] = connect(path)

# ssh: the agent 1Password's setup names, started (outside) while this lap runs.
(out / "ready").touch()
deadline = time.monotonic() + 60
while not (out / "started").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
agent = dict(os.environ, SSH_AUTH_SOCK=str(home / ".1password" / "agent.sock"))
keys = run("ssh-add", "-L", env=agent)
seen["ssh-add"] = keys.returncode
if keys.returncode == 0:
    (mine / "key.pub").write_text(keys.stdout.splitlines()[0] + "\n")
    run("ssh-keygen", "-Y", "sign", "-f", mine / "key.pub", "-n", "file", out / "message", env=agent)

# git credentials by path: the user's submodules' and worktree's configs (a CI checkout's token).
alternates = run("git", "rev-parse", "--git-path", "objects/info/alternates").stdout.strip()
users = pathlib.Path(pathlib.Path(alternates).read_text().strip()).parent
configs = [users / "modules/lib/config", users / "modules/lib/modules/inner/config", users / "worktrees/wt/config.worktree"]
# ... and what the repository's own config names or holds: a cookie file, a proxy's password.
configs += [out.parent / "gitcookies", users / "config"]
seen["read"] = [str(path) for path in configs if b"canary" in (path.read_bytes() if path.is_file() else b"")]
configs = configs[:3]
seen["config"] = [run("git", "config", "--file", path, "--list").returncode for path in configs]
seen["env"] = sorted(name for name, value in os.environ.items() if "canary" in value)
(out / "seen.json").write_text(json.dumps(seen))

calc = pathlib.Path("calc.py")
calc.write_text("def add(a, b):\n    return a + b\n")
pathlib.Path("TODO.md").write_text("- [x] add\n")
"""


class Listener:
    """A stand-in for a unix-socket service (Docker's API): it only counts who connected."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()


@dataclass
class UsersMachine:
    home: Path
    services: dict[str, Path]  # name: the path a lap would use
    listeners: dict[str, Listener]
    run_folder: Path  # under /run, bound back into the sandbox: a folder on PATH


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """A user's HOME with a running gpg-agent holding a key, an ssh config naming an agent, and
    services on unix sockets: Docker's under HOME, Podman's deep in a folder HOME links to, and
    one in a folder under /run that the sandbox binds back (it is on PATH)."""
    # Short paths: a unix socket's path has at most 107 bytes (pytest-xdist's folders are long).
    users = Path(tempfile.mkdtemp(prefix="reach-"))
    home = users / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[user]\n\tname = T\n\temail = t@example.com\n")
    env = dict(os.environ, HOME=str(home))
    env.pop("GNUPGHOME", None)
    key = ["--quick-gen-key", "User <user@example.com>", "ed25519", "sign", "never"]
    subprocess.run(["gpg", "--batch", "--passphrase", "", *key], env=env, check=True, capture_output=True)
    ssh = home / ".ssh"
    (ssh / "conf.d").mkdir(parents=True)
    (ssh / "config").write_text("Include conf.d/*.conf\n")
    (ssh / "conf.d" / "1password.conf").write_text('Host *\n    IdentityAgent "%d/.1password/agent.sock"\n')
    (home / ".1password").mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / "id")], check=True)
    elsewhere = users / "elsewhere"
    elsewhere.mkdir()
    (home / ".local" / "share").mkdir(parents=True)
    (home / ".local" / "share" / "containers").symlink_to(elsewhere)
    run_folder = Path("/run") / f"ralphtest-reach-{os.getpid()}"
    services = {
        "docker": home / ".docker" / "run" / "docker.sock",
        # Deeper than ralph's look on disk reads: found in the kernel's list of bound sockets.
        "podman": home / ".local" / "share" / "containers" / "podman" / "machine" / "qemu" / "podman.sock",
        "run": run_folder / "bin" / "helper.sock",
    }
    listeners = {name: Listener(path) for name, path in services.items()}
    try:
        yield UsersMachine(home, services, listeners, run_folder)
    finally:
        for listener in listeners.values():
            listener.close()
        subprocess.run(["gpgconf", "--kill", "all"], env=env, capture_output=True)
        shutil.rmtree(run_folder, ignore_errors=True)
        shutil.rmtree(users, ignore_errors=True)


@dataclass
class Attempt:
    result: subprocess.CompletedProcess
    out: Path  # what the lap left: signatures, and seen.json (what it saw)
    connections: dict[str, int]  # by each service, during the run


def attack(
    tmp_path: Path, machine: UsersMachine, sockets: list[str], monkeypatch, readable: tuple[str, ...] = ()
) -> Attempt:
    """One sandboxed lap that runs ATTACKS, with `sandbox.sockets: sockets`, ralph's HOME the
    user's; an ssh-agent is started at IdentityAgent's path once the lap is under way. (In the
    test's process unless a secret is in the environment.)"""
    out = tmp_path / "out"
    out.mkdir()
    # In a file: a socket the environment names is hidden, found or not otherwise.
    (out / "services.json").write_text(json.dumps({name: str(path) for name, path in machine.services.items()}))
    (tmp_path / "agent.py").write_text(ATTACKS)
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"{PY} {tmp_path / 'agent.py'}"},
        "checks": [{"run": "grep -q 'a + b' calc.py", "expect_red": True}],  # red until the lap's fix
        "limits": {"max_laps": 1},
        "env": {"pass": ["OUT", "USERS_HOME", "MESSAGE"]},  # the lap is given nothing else of the test's
        "sandbox": {
            "mode": "required",
            "writable": [str(out)],
            # The nested submodule's source, a folder outside the repository: laps see only what is listed.
            "readable": [str(tmp_path / "inner"), *readable],
            **({"sockets": sockets} if sockets else {}),
        },
    }
    repo = repository_with_tokens(tmp_path, config)
    before = {name: listener.connections for name, listener in machine.listeners.items()}
    env = {
        "HOME": str(machine.home),
        "USERS_HOME": str(machine.home),
        "OUT": str(out),
        "MESSAGE": MESSAGE,
        "XDG_RUNTIME_DIR": str(machine.run_folder),
        "PATH": f"{machine.run_folder / 'bin'}:{os.environ['PATH']}",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    agent = threading.Thread(target=ssh_agent_when_ready, args=(machine.home, out))
    agent.start()
    try:
        result = ralph(repo, "run", "--name", "r")
    finally:
        (out / "ready").touch()  # the lap never got there: the agent starts and ends anyway
        agent.join()
        kill_ssh_agent(out)
    return Attempt(result, out, {name: machine.listeners[name].connections - before[name] for name in before})


def repository_with_tokens(tmp_path: Path, config: dict) -> Path:
    """A repository whose submodule (and that one's own) and worktree configs hold a CI's token."""
    inner = make_repo(tmp_path / "inner", {"inner.txt": "inner\n"})
    lib = make_repo(tmp_path / "lib", {"lib.txt": "lib\n"})
    git(lib, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "inner")
    git(lib, "commit", "-qm", "inner")
    calc = {"calc.py": "def add(a, b):\n    raise NotImplementedError\n"}
    repo = make_repo(tmp_path / "repo", calc, config=config, todo=["add"])
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init", "--recursive")
    git(repo, "commit", "-qm", "lib")
    header = "AUTHORIZATION: basic canary-xyz"  # as actions/checkout writes it
    for module in ("lib", "lib/modules/inner"):
        git(repo, "config", "--file", f".git/modules/{module}/config", "http.https://github.com/.extraheader", header)
    git(repo, "config", "extensions.worktreeConfig", "true")
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))
    git(tmp_path / "wt", "config", "--worktree", "http.https://github.com/.extraheader", header)
    (tmp_path / "gitcookies").write_text(".googlesource.com\tTRUE\t/\tTRUE\t2147483647\to\tcanary-cookie\n")
    git(repo, "config", "http.cookiefile", str(tmp_path / "gitcookies"))  # Gerrit's login
    git(repo, "config", "http.proxy", "http://me:canary-proxy@proxy.example:3128")
    return repo


def ssh_agent_when_ready(home: Path, out: Path) -> None:
    deadline = time.monotonic() + 120
    while not (out / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sock = home / ".1password" / "agent.sock"
    started = subprocess.run(["ssh-agent", "-s", "-a", str(sock)], capture_output=True, text=True, check=True)
    (out / "agent-pid").write_text(started.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    subprocess.run(["ssh-add", "-q", str(home / "id")], env=dict(os.environ, SSH_AUTH_SOCK=str(sock)), check=True)
    (out / "started").touch()


def kill_ssh_agent(out: Path) -> None:
    """Unless ralph did: run in this process, it ends the orphans it adopted (the daemon)."""
    pid = out / "agent-pid"
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        os.kill(int(pid.read_text()), signal.SIGTERM)


def test_a_lap_reaches_no_agent_no_service_and_no_token_of_the_users(
    tmp_path: Path, machine: UsersMachine, monkeypatch
):
    monkeypatch.setenv("CACHE_URL", "redis://:canary-redis@localhost:6379/0")  # a password, no user name
    monkeypatch.setenv("REPO_URL", "https://canary-ghp123@github.com/me/repo")  # a token as the user
    monkeypatch.setenv("SENTRY_DSN", "https://canary-key@o1.ingest.sentry.io/1")
    monkeypatch.setenv("DB_PASS", "canary-db")
    monkeypatch.setenv("MYSQL_PWD", "canary-mysql")
    attempt = attack(tmp_path, machine, [], monkeypatch)
    assert attempt.result.returncode == 0, attempt.result.stdout + attempt.result.stderr
    (lap,) = lap_notes(tmp_path / "repo", "r")
    assert lap["status"] == "green"
    out = attempt.out
    assert not (out / "gpg.sig").exists() and not (out / "message.sig").exists()  # nothing signed
    assert attempt.connections == {"docker": 0, "podman": 0, "run": 0}
    seen = json.loads((out / "seen.json").read_text())
    assert seen["gpg"] != 0 and seen["ssh-add"] == 2  # 2: could not connect to an agent
    tried = ("S.gpg-agent.extra", "S.gpg-agent.browser", "S.gpg-agent.ssh", "docker", "podman", "run")
    assert "connected" not in {seen[name] for name in tried}
    assert seen["read"] == [] and seen["config"] == [0, 0, 0]  # hidden configs read as empty
    assert seen["env"] == []


def test_what_sandbox_sockets_lists_is_reachable_and_only_that(tmp_path: Path, machine: UsersMachine, monkeypatch):
    home = machine.home
    # The ssh-agent starts during the lap: its folder is listed, its socket is not there yet.
    listed = [str(home / ".gnupg" / "S.gpg-agent"), "~/.1password", "~/.docker/run"]
    keyring = ("~/.gnupg/pubring.kbx", "~/.gnupg/trustdb.gpg")  # HOME is not there: gpg's public keys listed too
    attempt = attack(tmp_path, machine, listed, monkeypatch, keyring)
    assert attempt.result.returncode == 0, attempt.result.stdout + attempt.result.stderr
    out = attempt.out
    gnupg = dict(os.environ, HOME=str(home))
    verified = subprocess.run(["gpg", "--verify", str(out / "gpg.sig"), str(out / "message")], env=gnupg)
    assert verified.returncode == 0
    check = ["ssh-keygen", "-Y", "check-novalidate", "-n", "file", "-s", str(out / "message.sig")]
    assert subprocess.run(check, input=MESSAGE, text=True, capture_output=True).returncode == 0
    assert attempt.connections == {"docker": 1, "podman": 0, "run": 0}
    seen = json.loads((out / "seen.json").read_text())
    assert seen["S.gpg-agent.extra"] != "connected"  # beside a listed socket, the others stay hidden
