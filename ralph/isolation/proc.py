"""The one door to subprocesses: own process group, timeout, capped output, clean kill.

Checks, git (and so the repository's hooks), command agents and the built-in agent's
shell tool all run through `run`, so one place decides how a hung or flooding command
is stopped and what its environment may contain.
"""

from __future__ import annotations

import functools
import os
import re
import selectors
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from ralph.isolation import orphans, toolchains
from ralph.isolation.capped_output import CappedOutput
from ralph.isolation.idle import Idle
from ralph.isolation.jail import GIT_CONFIG, Jail

OUTPUT_CAP = 64 * 1024  # bytes kept in memory: the head half and the tail half
KILL_GRACE = 2.0  # seconds between TERM and KILL
DRAIN_GRACE = 1.0  # seconds to keep reading after the command exited (grandchildren)
TOKEN_VAR = "RALPH_PROC_TOKEN"

# Variables that make git look at another repository than the one in cwd
# (`git rev-parse --local-env-vars`); stripped so ralph works from inside a hook.
GIT_LOCAL_VARS = frozenset(
    """GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT
    GIT_OBJECT_DIRECTORY GIT_DIR GIT_WORK_TREE GIT_IMPLICIT_WORK_TREE GIT_GRAFT_FILE
    GIT_INDEX_FILE GIT_NO_REPLACE_OBJECTS GIT_REPLACE_REF_BASE GIT_PREFIX GIT_SHALLOW_FILE
    GIT_COMMON_DIR GIT_INTERNAL_SUPER_PREFIX""".split()
)
# ASKPASS: GIT_ASKPASS and SSH_ASKPASS name programs that hand out a password when run.
# PASS: PASSWORD, PASSWD, DB_PASS, a PASSPHRASE; _PWD: MYSQL_PWD (not PWD, OLDPWD: folders).
# PASS anywhere (DB_PASSWORD, SSHPASS, BORG_PASSCOMMAND, MFA_PASSCODE) but as PASSENV: tox's
# TOX_TESTENV_PASSENV names the variables tox passes on and holds no secret.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS(?!ENV$)|_PWD$|CREDENTIAL|ASKPASS", re.IGNORECASE)


# https://user:token@host (a push credential), redis://:password@host (a password, no user),
# https://token@github.com and a Sentry DSN (a token as the user): any URL with a user in it.
# And a proxy's login written without a scheme (`alice:pass@proxy:3128`), which curl and urllib
# take as well.
_URL_WITH_PASSWORD = re.compile(r"://[^/@\s]+@|^[^/@\s:]+:[^/@\s]*@")
# What a lap is given of ralph's environment, besides the toolchains' variables, LC_* and
# `env.pass` (docs/sandbox.md); the sandbox sets HOME and TMPDIR anew. Who commits: git reads
# no global config in a lap, and a check that commits in a repository of its own needs a name.
LAP_VARIABLES = (
    *("PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "EMAIL"),
    *("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"),
    *("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"),  # switches, no path: how Python writes, not what it runs
    # The network's plumbing, which every tool reads the same way: the proxy (none with a login)
    # and the CA bundle a proxy that inspects TLS needs.
    *("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy"),
    *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"),
)
# Git in a lap reads no config of the user's (system, global and what they include): the lap's own only.
LAP_GIT = dict(GIT_CONFIG)
_QUIET = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}


@functools.lru_cache(maxsize=4096)  # asked for every variable of every git command ralph runs
def is_secret(name: str, value: str = "") -> bool:
    """Whether a variable is kept from ralph's own commands (git, gh) and from ralph's own
    environment block: by its name, or by its value (a URL with a user or password in it)."""
    return bool(_SECRET_NAME.search(name)) or name == "SSH_AUTH_SOCK" or bool(_URL_WITH_PASSWORD.search(value))


def clean_env(allow: tuple[str, ...] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for ralph's own commands (git, gh): no secrets, no GIT_* redirection, no
    pager. `allow` names variables let through all the same.
    What a lap runs gets `lap_env`."""
    env = {}
    for name, value in os.environ.items():
        if name in allow or not (is_secret(name, value) or name in GIT_LOCAL_VARS):
            env[name] = value
    return env | _QUIET | (extra or {})


def lap_env(passed: tuple[str, ...] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of everything a lap runs (agent, setup, hooks, checks), built from a list:
    LAP_VARIABLES, LC_*, the toolchains' variables (none with a login in a URL) and what `passed`
    (`env.pass`) names. Nothing else of the user's: no token, no GIT_CONFIG_*, no DATABASE_URL."""
    listed = (*LAP_VARIABLES, *toolchains.VARIABLES)
    env = {
        name: value
        for name, value in os.environ.items()
        if name in passed or ((name in listed or name.startswith("LC_")) and not _URL_WITH_PASSWORD.search(value))
    }
    return env | _QUIET | LAP_GIT | (extra or {})


@dataclass
class Completed:
    """What a finished command left behind."""

    command: str
    exit_code: int
    output: str  # stdout and stderr interleaved, capped: head, a cut marker, tail
    duration: float
    timed_out: bool = False
    cut_bytes: int = 0
    spill_path: Path | None = None
    stderr: str = ""  # only with stderr_apart=True; otherwise stderr is in `output`

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, chars: int = 4000) -> str:
        return self.output[-chars:]


def run(
    command: str | list[str],
    cwd: Path | str,
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    input: str | bytes | None = None,
    cap: int = OUTPUT_CAP,
    spill: Path | None = None,
    stderr_apart: bool = False,
    sweep: bool = True,
    jail: Jail | None = None,
    on_output: Callable[[bytes], None] | None = None,
    idle: Idle | None = None,
    stop: Callable[[], bool] | None = None,
) -> Completed:
    """Run `command` (a shell string, or an argv list) and wait for it, whatever it does.

    The command gets its own session (so its own process group); on timeout or
    interrupt the whole group gets TERM, then KILL. Processes that left the group (setsid)
    are found by a token in their environment and killed too (`sweep`; git plumbing that
    runs no user code skips that scan). With a `jail` the command runs inside the sandbox,
    whose PID namespace ends every process in it when the command's group dies. `on_output`
    hears the output as it comes; `idle` stops it like a timeout when it falls silent, and so
    does `stop`, asked now and then, when it says True (what the command does is not wanted).
    """
    token = uuid.uuid4().hex
    sweep = sweep and jail is None  # a sandbox's PID namespace ends all it holds with its first process
    spare = orphans.children() if sweep and orphans.adopting() else None
    env = dict(os.environ if env is None else env, **{TOKEN_VAR: token})
    started = time.monotonic()
    errors = tempfile.TemporaryFile() if stderr_apart else None
    child = _spawn(command if jail is None else jail.argv(command), cwd, env, stdin=input is not None, errors=errors)
    timed_out = False
    try:  # at once: an interrupt from here on must still reach the cleanup
        output = CappedOutput(cap, spill, on_output)
        if input is not None:
            data = input.encode() if isinstance(input, str) else input
            threading.Thread(target=_feed, args=(child, data), daemon=True).start()
        timed_out = _pump(child, output, None if timeout is None else started + timeout, idle, stop)
    finally:
        _kill_all(child, token if sweep else None, termed=timed_out, spare=spare)
        assert child.stdout is not None  # Popen was given stdout=PIPE
        child.stdout.close()
    text, cut = output.text(spill)
    return Completed(
        command if isinstance(command, str) else " ".join(command),
        child.returncode if child.returncode is not None else -signal.SIGKILL,
        text,
        time.monotonic() - started,
        timed_out,
        cut,
        spill if cut else None,
        _read_and_close(errors, cap),
    )


def _spawn(
    command: str | list[str], cwd: Path | str, env: dict[str, str], *, stdin: bool, errors: IO[bytes] | None
) -> subprocess.Popen:
    """`command` started in a session of its own; its stderr into `errors`, if given, else
    merged into stdout. An interrupt inside Popen, after the child started, leaves no handle to
    it, only the token in its environment: what carries it is killed before the interrupt goes on."""
    try:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            shell=isinstance(command, str),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors or subprocess.STDOUT,
            start_new_session=True,
        )
    except BaseException:
        with signals_held():
            orphans.kill_marked(TOKEN_VAR, env[TOKEN_VAR])
        raise


def start(command: list[str], cwd: Path, env: dict[str, str], output: int | IO = subprocess.PIPE) -> subprocess.Popen:
    """A long-lived child ralph supervises while it goes on (a slot of a parallel run, a
    worker's heartbeat), in a session of its own, its output merged on one pipe (or into
    `output`); `end` stops it."""
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def serve(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """A long-lived child ralph talks to on its stdin and stdout (git's `--batch` readers), in a
    session of its own, its stderr dropped; it ends when its stdin is closed, or when ralph ends
    and the pipe with it."""
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class Child(Protocol):
    """A long-lived child as ralph supervises it: a `subprocess.Popen`, or a fork of ralph's
    (run/forked.py), its output on `stdout`."""

    pid: int
    returncode: int | None

    @property
    def stdout(self) -> IO[bytes] | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def end(children: list[Child], grace: float) -> None:
    """SIGINT to each one's group (they end as after a Ctrl-C), then KILL to those still
    running after `grace` seconds."""
    for child in children:
        _signal_group(child, signal.SIGINT)
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with signals_held():
                _signal_group(child, signal.SIGKILL)
                child.wait()


def _read_and_close(stream: IO[bytes] | None, cap: int) -> str:
    if stream is None:
        return ""
    with stream:
        stream.seek(0)
        return stream.read()[:cap].decode("utf-8", "replace")


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    assert proc.stdin is not None  # Popen was given stdin=PIPE
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, OSError):
        pass  # the command did not want (all of) its input
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _pump(
    proc: subprocess.Popen,
    output: CappedOutput,
    deadline: float | None,
    idle: Idle | None,
    stop: Callable[[], bool] | None = None,
) -> bool:
    """Read output until EOF; returns True when the deadline (silence, `stop`) killed the command."""
    timed_out = False
    drain_until = None  # once the command is gone, grandchildren may hold the pipe open
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            silent = idle is not None and drain_until is None and idle.expired(now)
            unwanted = stop is not None and drain_until is None and stop()
            if not timed_out and (silent or unwanted or (deadline is not None and now >= deadline)):
                timed_out = True
                _signal_group(proc, signal.SIGTERM)
                drain_until = now + KILL_GRACE
            if drain_until is None and proc.poll() is not None:
                drain_until = now + DRAIN_GRACE
            if drain_until is not None and now >= drain_until:
                break
            # Sleep until the next event: the drain's end once it started, else the deadline.
            until = drain_until if drain_until is not None else deadline
            wait = 0.2 if until is None else max(0.0, min(0.2, until - now))
            if sel.select(wait):
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    # EOF can come before the exit (coreutils close stdout in an atexit
                    # handler): wait for the exit itself, or a finished `seq` gets a TERM.
                    return timed_out or _exited_in_time(proc, deadline)
                output.add(chunk)
                if idle is not None:
                    idle.heard = now
    return timed_out


def _exited_in_time(proc: subprocess.Popen, deadline: float | None) -> bool:
    """Wait for the command to exit; True (timed out) when the deadline comes first."""
    try:
        proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return True
    return False


def _signal_group(proc: Child, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_all(proc: subprocess.Popen, token: str | None, *, termed: bool, spare: list[int] | None = None) -> None:
    """Leave nothing running: the process group, then anything that still carries our token.

    `termed`: the timeout already sent TERM and waited out the grace. The KILL is in a
    finally so that a second Ctrl-C during the grace cannot skip it.
    """
    try:
        if not termed and proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE)
            except subprocess.TimeoutExpired:
                pass
    finally:
        # No interrupt may cut the KILL short; one that arrives now is raised right after.
        with signals_held():
            _signal_group(proc, signal.SIGKILL)
            if token:
                orphans.kill_marked(TOKEN_VAR, token)
            proc.wait()
            if spare is not None:
                orphans.end_orphans(set(spare))


@contextmanager
def signals_held() -> Iterator[None]:
    """Meanwhile no SIGINT or SIGTERM reaches this thread (nor a thread it starts); one that
    comes is delivered when it ends. For cleanups that must not be cut short."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
