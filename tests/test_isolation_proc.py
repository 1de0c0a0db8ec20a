"""The one door to subprocesses, on real processes: nothing left running, output capped, exit codes kept.

Leftovers are found by a unique `sleep 999.<digits>` argument in /proc/*/cmdline, the
way a user would find them with `ps`, never by asking proc how it tracks them.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.repos import make_repo

from ralph.config.sections import CheckSpec
from ralph.isolation import proc
from ralph.verdict.checks import run_checks

OUT_OF_BAND = 8.0  # seconds: generous, the suite runs under xdist on a small machine


def processes_with(mark: str) -> dict[int, str]:
    """Live processes whose command line holds `mark` (a zombie's cmdline reads empty)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue  # gone meanwhile
            if mark in cmdline:
                found[int(entry.name)] = cmdline
    return found


def left_running(mark: str, grace: float = 1.0) -> list[str]:
    """What still runs; a KILLed process gets `grace` seconds to finish dying (a `sleep 999` never will)."""
    give_up = time.monotonic() + grace
    while (found := processes_with(mark)) and time.monotonic() < give_up:
        time.sleep(0.05)
    return sorted(found.values())


def kill_leftovers(mark: str) -> None:
    for pid in processes_with(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_until(condition, seconds: float = 15.0) -> None:
    give_up = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < give_up, "timed out waiting"
        time.sleep(0.05)


def escaped(command: str) -> str:
    """Shell for: start `command` under setsid in the background and wait until it has left our session.

    Without the wait the group KILL can beat setsid() and the sweep would go untested.
    """
    session = "$(cut -d' ' -f6 /proc/$!/stat 2>/dev/null || echo $!)"  # gone counts as escaped
    return f'setsid {command} & until [ "{session}" = $! ]; do sleep 0.01; done'


@contextlib.contextmanager
def watched(mark: str, seconds: float = 30):
    """Kill what carries `mark` after `seconds`, and on the way out.

    So a regression that makes `run` wait forever fails its test (too slow) instead of
    hanging the suite, and a failing test leaves no `sleep 999` behind for the others.
    """
    watchdog = threading.Timer(seconds, kill_leftovers, [mark])
    watchdog.daemon = True
    watchdog.start()
    try:
        yield mark
    finally:
        watchdog.cancel()
        kill_leftovers(mark)


@pytest.fixture
def mark():
    """A `sleep` argument unique to this test: whatever carries it is ours."""
    with watched(f"999.{random.randrange(10**8, 10**9)}") as mark:
        yield mark


# --- nothing left running ---------------------------------------------------------------


def test_timeout_kills_the_group_and_the_setsid_escapee(tmp_path, mark):
    # killpg reaches the backgrounded sleep; only the token sweep reaches the setsid one
    started = time.monotonic()
    done = proc.run(f"sleep {mark} & {escaped(f'sleep {mark}')}; wait", tmp_path, timeout=1)
    assert time.monotonic() - started < OUT_OF_BAND
    assert done.timed_out and not done.ok
    assert left_running(mark) == []


@pytest.mark.parametrize(
    "command, sweep",
    [
        ("sleep {mark} & echo started", False),  # the group KILL alone must do it
        (escaped("sleep {mark}") + "; echo started", True),  # holds the pipe: drained, then swept
        (escaped("sleep {mark} >/dev/null 2>&1") + "; echo started", True),  # EOF at once, still swept
    ],
    ids=["background", "setsid", "setsid-detached"],
)
def test_a_command_that_exits_at_once_leaves_nothing_behind(tmp_path, mark, command, sweep):
    started = time.monotonic()
    done = proc.run(command.format(mark=mark), tmp_path, timeout=30, sweep=sweep)
    assert time.monotonic() - started < OUT_OF_BAND
    assert (done.exit_code, done.timed_out, done.output) == (0, False, "started\n")
    assert left_running(mark) == []


def test_without_the_sweep_a_setsid_escapee_survives(tmp_path, mark):
    # sweep=False is for git plumbing only; this also proves left_running() can see a leftover
    proc.run(escaped(f"sleep {mark} >/dev/null 2>&1"), tmp_path, timeout=30, sweep=False)
    assert len(left_running(mark, grace=0)) == 1


# --- output -----------------------------------------------------------------------------

FLOOD = "head -c 100000000 /dev/zero | tr '\\0' a; echo THE-END"
FLOOD_BYTES = 100_000_000 + len("THE-END\n")

# In a child interpreter, so its peak RSS measures this one call and nothing the worker did before.
MEASURE_FLOOD = """
import json, resource, sys, time
from pathlib import Path
from ralph.isolation import proc
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
done = proc.run(sys.argv[1], ".", spill=Path(sys.argv[2]))
seconds = time.monotonic() - started
growth_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps(dict(seconds=seconds, growth_kb=growth_kb, output=done.output, cut=done.cut_bytes,
                      spill=str(done.spill_path), code=done.exit_code)))
"""


def test_100_mb_of_output_is_capped_in_memory_and_spilled_whole(tmp_path):
    spill = tmp_path / "flood.log"
    child = subprocess.run(
        [sys.executable, "-c", MEASURE_FLOOD, FLOOD, str(spill)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    done = json.loads(child.stdout)
    try:
        assert done["code"] == 0
        assert done["seconds"] < 30
        assert done["growth_kb"] < 60 * 1024, f"peak RSS grew {done['growth_kb']} kB"
        half = proc.OUTPUT_CAP // 2
        assert done["output"].startswith("a" * half)
        assert done["output"].endswith("a" * 100 + "THE-END\n")
        assert len(done["output"]) < proc.OUTPUT_CAP + 200
        assert done["cut"] == FLOOD_BYTES - proc.OUTPUT_CAP
        assert f"[... {FLOOD_BYTES - proc.OUTPUT_CAP} bytes cut; the full output is in {spill} ...]" in done["output"]
        assert done["spill"] == str(spill)
        assert spill.stat().st_size == FLOOD_BYTES
        with spill.open("rb") as whole:
            assert whole.read(4) == b"aaaa"
            whole.seek(-9, os.SEEK_END)
            assert whole.read() == b"aTHE-END\n"
    finally:
        spill.unlink(missing_ok=True)  # 100 MB in tmp is not worth keeping


def test_cut_without_a_spill_file_says_so_and_short_output_is_whole(tmp_path):
    done = proc.run("seq 1 100000", tmp_path, cap=1000)
    assert done.output.startswith("1\n2\n3\n") and done.output.endswith("99999\n100000\n")
    total = len("".join(f"{n}\n" for n in range(1, 100001)))
    assert done.cut_bytes == total - 1000
    assert f"\n[... {total - 1000} bytes cut ...]\n" in done.output
    assert done.spill_path is None
    assert proc.run("seq 1 5", tmp_path, cap=1000).output == "1\n2\n3\n4\n5\n"


def test_timeout_while_output_keeps_flooding(tmp_path, mark):
    # select() is always ready: the deadline must be checked on every read, not only when idle
    started = time.monotonic()
    done = proc.run(f"yes {mark}", tmp_path, timeout=1)
    assert time.monotonic() - started < OUT_OF_BAND
    assert done.timed_out
    assert done.cut_bytes > 0 and len(done.output) < proc.OUTPUT_CAP + 200
    assert left_running(mark) == []


def test_an_escapee_flooding_after_the_command_exited_is_stopped(tmp_path, mark):
    # no timeout at all: only the drain grace and the sweep end this
    started = time.monotonic()
    done = proc.run(escaped(f"yes {mark}") + "; echo started", tmp_path)
    assert time.monotonic() - started < OUT_OF_BAND
    assert (done.exit_code, done.timed_out) == (0, False)
    assert done.cut_bytes > 0 and len(done.output) < proc.OUTPUT_CAP + 200
    assert left_running(mark) == []


# --- exit codes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, code",
    [
        ("exit 0", 0),
        ("echo hi; exit 3", 3),
        ("kill -KILL $$", -signal.SIGKILL),
        ("kill -TERM $$", -signal.SIGTERM),
    ],
)
def test_exit_codes(tmp_path, command, code):
    done = proc.run(command, tmp_path, timeout=30)
    assert (done.exit_code, done.timed_out, done.ok) == (code, False, code == 0)


@pytest.mark.parametrize("timeout", [None, 30])
def test_closing_stdout_early_is_not_the_end(tmp_path, timeout):
    # EOF comes 0.3 s before the exit: proc must wait for the exit, not TERM the command
    done = proc.run("exec >&- 2>&-; sleep 0.3; exit 4", tmp_path, timeout=timeout)
    assert (done.exit_code, done.timed_out) == (4, False)


def test_closing_stdout_then_hanging_still_times_out(tmp_path, mark):
    started = time.monotonic()
    done = proc.run(f"exec >&- 2>&-; sleep {mark}", tmp_path, timeout=1)
    assert time.monotonic() - started < OUT_OF_BAND
    assert done.timed_out
    assert left_running(mark) == []


# --- input, stderr ----------------------------------------------------------------------

MEGABYTE_OF_TEXT = "".join(f"line {n}\n" for n in range(120_000))[: 1 << 20]


def test_input_larger_than_a_pipe_reaches_the_command_intact(tmp_path, mark):
    # `tee` writes back while it reads: feeding stdin from the waiting thread would deadlock
    # (the mark in its file name lets the watchdog end that deadlock)
    echoed = proc.run(f"tee copy-{mark}", tmp_path, input=MEGABYTE_OF_TEXT, cap=4 << 20, timeout=30)
    assert (echoed.exit_code, echoed.timed_out, echoed.cut_bytes) == (0, False, 0)
    assert echoed.output == MEGABYTE_OF_TEXT
    assert (tmp_path / f"copy-{mark}").read_text() == MEGABYTE_OF_TEXT
    counted = proc.run("wc -c", tmp_path, input=MEGABYTE_OF_TEXT.encode(), timeout=30)
    assert counted.output.strip() == str(1 << 20)


def test_a_command_that_ignores_its_input_does_not_hang(tmp_path, mark):
    started = time.monotonic()
    done = proc.run("sleep 0.3; echo done", tmp_path, input=MEGABYTE_OF_TEXT, timeout=30)
    assert (done.exit_code, done.output) == (0, "done\n")
    hung = proc.run(f"sleep {mark}", tmp_path, input=MEGABYTE_OF_TEXT, timeout=1)
    assert hung.timed_out
    assert time.monotonic() - started < OUT_OF_BAND
    assert left_running(mark) == []


def test_stderr_apart_or_interleaved(tmp_path):
    command = "echo out; echo err >&2; echo more"
    apart = proc.run(command, tmp_path, stderr_apart=True)
    assert (apart.output, apart.stderr) == ("out\nmore\n", "err\n")
    together = proc.run(command, tmp_path)
    assert (together.output, together.stderr) == ("out\nerr\nmore\n", "")


# --- environment ------------------------------------------------------------------------

SECRET_LOOKING = [
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "npm_token",
    "DB_PASSWORD",
    "SMTP_PASSWD",
    "PGPASSWORD",
    "SMTP_PASS",
    "GPG_PASSPHRASE",
    "SSHPASS",
    "BORG_PASSCOMMAND",
    "DUO_PASSCODE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "MY_KEYRING",
    "SSH_AUTH_SOCK",
]
GIT_REDIRECTION = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG_PARAMETERS",
    "GIT_PREFIX",
]


def test_clean_env_drops_secrets_and_git_redirection(monkeypatch):
    for name in SECRET_LOOKING + GIT_REDIRECTION + ["LLM_CREDS", "DEPLOY_KEY_PATH"]:
        monkeypatch.setenv(name, f"value-of-{name}")
    monkeypatch.setenv("MY_ORDINARY_SETTING", "ordinary")
    monkeypatch.setenv("TOX_TESTENV_PASSENV", "OPENBLAS_*")  # names what tox passes on: no secret
    monkeypatch.setenv("PAGER", "less")
    monkeypatch.setenv("GIT_PAGER", "delta")

    env = proc.clean_env(allow=("DEPLOY_KEY_PATH",))

    assert [name for name in SECRET_LOOKING + GIT_REDIRECTION if name in env] == []
    assert env["DEPLOY_KEY_PATH"] == "value-of-DEPLOY_KEY_PATH"  # allowed although secret-looking
    assert env["MY_ORDINARY_SETTING"] == "ordinary" and env["TOX_TESTENV_PASSENV"] == "OPENBLAS_*"
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == os.environ["HOME"]
    assert env["GIT_AUTHOR_NAME"] == os.environ["GIT_AUTHOR_NAME"]
    assert (env["PAGER"], env["GIT_PAGER"]) == ("cat", "cat")
    assert proc.clean_env(extra={"PAGER": "more", "X": "1"})["PAGER"] == "more"


def test_a_laps_environment_is_built_from_a_list_not_filtered(monkeypatch):
    monkeypatch.setenv("MY_ORDINARY_SETTING", "ordinary")
    monkeypatch.setenv("DATABASE_URL", "postgres://host/db?password=s3cret")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "s3cret")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("CARGO_HOME", "/opt/cargo")
    monkeypatch.setenv("GOPROXY", "https://me:s3cret@proxy.example")  # a toolchain's variable with a login
    monkeypatch.setenv("DEPLOY_KEY_PATH", "/keys/deploy")

    env = proc.lap_env(("DEPLOY_KEY_PATH",), extra={"X": "1"})

    given = {"PATH", "HOME", "LANG", "LC_TIME", "CARGO_HOME", "DEPLOY_KEY_PATH", "X"} & set(os.environ) | {"X"}
    assert given <= set(env)
    assert not {"MY_ORDINARY_SETTING", "DATABASE_URL", "GIT_CONFIG_COUNT", "GIT_CONFIG_VALUE_0", "GOPROXY"} & set(env)
    assert "s3cret" not in "".join(env.values())
    assert (env["GIT_CONFIG_NOSYSTEM"], env["GIT_CONFIG_GLOBAL"], env["PAGER"]) == ("1", os.devnull, "cat")


def test_clean_env_drops_every_variable_git_calls_local(monkeypatch):
    names = subprocess.run(
        ["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "GIT_DIR" in names
    for name in names:
        monkeypatch.setenv(name, "/nonexistent")
    env = proc.clean_env()
    assert [name for name in names if name in env] == []


def test_git_in_a_child_sees_the_repo_in_cwd_not_the_hooks_redirection(tmp_path, monkeypatch):
    # as when ralph runs from inside a git hook of another repository
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere" / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "elsewhere" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path / "elsewhere"))
    done = proc.run(["git", "rev-parse", "--show-toplevel"], repo, env=proc.clean_env(), timeout=30)
    assert (done.exit_code, done.output.strip()) == (0, str(repo.resolve()))


def test_a_child_with_the_clean_env_never_sees_the_canary(tmp_path, monkeypatch):
    canary = f"canary-{random.randrange(10**12)}"
    monkeypatch.setenv("RALPH_TEST_API_KEY", canary)
    monkeypatch.setenv("SOME_SERVICE_TOKEN", canary)
    monkeypatch.setenv("ODDLY_NAMED", canary)
    done = proc.run("env", tmp_path, env=proc.lap_env(), timeout=30)
    assert done.exit_code == 0 and "PAGER=cat" in done.output
    assert canary not in done.output


# --- interrupt --------------------------------------------------------------------------

# A real ralph process gets a real SIGINT; running it in a child keeps a stray KeyboardInterrupt
# away from pytest. The command comes in the environment so that this script's own command
# line does not carry the mark.
INTERRUPTIBLE = """
import os, sys
from ralph.isolation import proc
try:
    proc.run(os.environ["PROBE_COMMAND"], ".")
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("returned", flush=True)
"""


def start_interruptible(tmp_path: Path, command: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", INTERRUPTIBLE],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PROBE_COMMAND=command),
    )


def test_interrupt_propagates_and_kills_everything(tmp_path, mark):
    ralph = start_interruptible(tmp_path, f"sleep {mark} & {escaped(f'sleep {mark}')}; touch escaped; wait")
    wait_until((tmp_path / "escaped").exists)
    ralph.send_signal(signal.SIGINT)
    out, _ = ralph.communicate(timeout=30)
    assert (ralph.returncode, out) == (130, "interrupted\n")
    assert left_running(mark) == []


def test_a_second_interrupt_during_the_grace_still_kills_everything(tmp_path, mark):
    # The impatient user: Ctrl-C, then Ctrl-C again while a slow-to-die command gets its grace.
    ralph = start_interruptible(tmp_path, f"trap '' TERM; sleep {mark}")
    wait_until(lambda: processes_with(mark))
    ralph.send_signal(signal.SIGINT)
    time.sleep(1.0)  # mid-way through the 2 s KILL_GRACE
    ralph.send_signal(signal.SIGINT)
    out, _ = ralph.communicate(timeout=30)
    assert out == "interrupted\n"
    assert left_running(mark) == []


# --- a command that ignores TERM ----------------------------------------------------------


def runnable_seconds() -> float:
    """Time this thread spent on a CPU or waiting for one: a busy loop scores its wall time however loaded
    the machine is, a thread asleep in select() next to nothing."""
    on_cpu, waiting, _ = Path("/proc/thread-self/schedstat").read_text().split()
    return (int(on_cpu) + int(waiting)) / 1e9


@pytest.fixture(scope="module")
def term_ignored_timeout(tmp_path_factory):
    """One timed-out run of a command that ignores TERM: what it left, its wall time and its busyness."""
    with watched(f"999.{random.randrange(10**8, 10**9)}") as mark, pytest.MonkeyPatch.context() as patch:
        patch.setattr(proc, "KILL_GRACE", 1.0)  # half the wait; the bugs below show as well
        busy, wall = runnable_seconds(), time.monotonic()
        done = proc.run(f"trap '' TERM; sleep {mark}", tmp_path_factory.mktemp("ignores-term"), timeout=0.3)
        measured = dict(
            wall=time.monotonic() - wall, busy=runnable_seconds() - busy, done=done, left=left_running(mark)
        )
    return measured


def test_a_command_that_ignores_term_is_killed(term_ignored_timeout):
    assert term_ignored_timeout["done"].timed_out
    assert term_ignored_timeout["done"].exit_code == -signal.SIGKILL
    assert term_ignored_timeout["left"] == []


def test_kill_comes_one_grace_after_the_timeout(term_ignored_timeout):
    assert term_ignored_timeout["wall"] < 0.3 + 1.0 + 0.7  # now 0.3 + 2 x 1.0


def test_waiting_out_the_grace_does_not_spin(term_ignored_timeout):
    assert term_ignored_timeout["busy"] < 0.4  # ~1.0 (the whole grace) now; ~0.05 asleep in select


def test_a_silent_check_is_stopped_as_idle_and_one_that_writes_is_not(tmp_path: Path):

    specs = [CheckSpec(run="echo start; sleep 30"), CheckSpec(run="for i in 1 2 3 4 5 6; do touch f; sleep 0.3; done")]
    started = time.monotonic()
    silent, writing = run_checks(specs, tmp_path, timeout=60, env=dict(os.environ), log_dir=tmp_path, idle_timeout=0.8)
    assert time.monotonic() - started < 15
    assert silent.timed_out and not silent.passed and silent.duration_s < 5
    assert silent.output_tail.endswith("[ralph: idle — printed nothing and changed no file for 0.8s, and was stopped]")
    assert writing.passed and writing.duration_s > 1.5
