"""A bug in ralph: one line on stderr naming the crash log, which holds the versions, the command
line and the traceback, where the user's runs live (ralph/commands/crash_log.py)."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from helpers.repos import git, make_repo
from helpers.running import ralph

import ralph as ralph_package
from ralph.commands import crash_log

CONFIG = {"goal": "g", "agent": {"kind": "command", "command": "true"}, "checks": ["true"], "sandbox": "off"}
BUG = "RuntimeError: RALPH_DEBUG_STOP_AT=workspace:RAISE: a bug, as asked for"


def _crash(cwd: Path, *args: str, cache: Path) -> subprocess.CompletedProcess:
    """ralph as a process that hits an exception no code expects at its first lap's workspace."""
    env = {"RALPH_DEBUG_STOP_AT": "workspace:RAISE", "XDG_CACHE_HOME": str(cache)}
    return ralph(cwd, *args, env=env)


def _named_log(result: subprocess.CompletedProcess) -> Path:
    """The exit code and the one line a user reads; the path it names."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "internal error" in line]
    assert len(lines) == 1 and lines[0] == result.stderr.strip().splitlines()[-1], result.stderr
    assert lines[0].startswith(f"ralph: internal error (a bug in ralph): {BUG} — the versions and traceback are in ")
    return Path(lines[0].split(" are in ")[1].split("; ")[0])


def _assert_whole(log: str, command: str) -> None:
    assert f"ralph     {metadata.version('git-ralph')}\n" in log
    assert f"git       {subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.strip()}\n" in log
    assert f"python    {sys.version.split()[0]}" in log and f"platform  {platform.platform()}\n" in log
    assert f"command   {Path(ralph_package.__file__).parent / '__main__.py'} {command}\n" in log  # python -m ralph
    assert "Traceback (most recent call last):" in log and log.endswith(f"{BUG}\n")
    assert 'crashpoint.reached("workspace")' in log  # where it happened, as the traceback says


def test_a_crash_in_a_run_is_logged_in_the_repositorys_git_dir(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", config=CONFIG, todo=["one"])
    path = _named_log(_crash(repo, "run", "--max-laps", "1", cache=tmp_path / "cache"))
    assert path == Path(git(repo, "rev-parse", "--absolute-git-dir")) / "ralph" / "crash.log"
    _assert_whole(path.read_text(), command="run --max-laps 1")
    assert not (tmp_path / "cache" / "ralph" / "crash.log").exists()


def test_a_crash_outside_a_repository_is_logged_in_the_cache(tmp_path: Path):
    # `ralph demo` makes its repository elsewhere: the user's folder is no repository.
    (tmp_path / "here").mkdir()
    path = _named_log(_crash(tmp_path / "here", "demo", str(tmp_path / "demo"), cache=tmp_path / "cache"))
    assert path == tmp_path / "cache" / "ralph" / "crash.log"
    _assert_whole(path.read_text(), command=f"demo {tmp_path / 'demo'}")


def test_a_git_dir_that_cannot_be_written_sends_the_log_to_the_cache(tmp_path: Path, monkeypatch):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (repo / ".git" / "ralph").write_text("a file where the folder would be\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = crash_log.write(ValueError("boom"), repo, ["ralph", "status"])
    assert path == tmp_path / "cache" / "ralph" / "crash.log"
    assert path.read_text().endswith("ValueError: boom\n")


def test_a_link_planted_where_the_log_goes_is_replaced_not_followed(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    (repo / ".git" / "ralph").mkdir()
    (repo / ".git" / "ralph" / "crash.log").symlink_to(victim)
    path = crash_log.write(ValueError("boom"), repo, ["ralph", "status"])
    assert path == repo / ".git" / "ralph" / "crash.log" and not path.is_symlink()
    assert path.read_text().endswith("ValueError: boom\n")
    assert victim.read_text() == "mine\n"


def test_with_no_folder_to_write_the_log_goes_to_a_new_file_in_the_temp_folder(tmp_path: Path, monkeypatch):
    """A fixed name in /tmp would be anyone's to plant first: each log is a file of its own."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    first = crash_log.write(ValueError("one"), tmp_path, ["ralph", "status"])
    second = crash_log.write(ValueError("two"), tmp_path, ["ralph", "status"])
    assert first is not None and second is not None and first != second
    assert first.parent == tmp_path / "tmp" and first.read_text().endswith("ValueError: one\n")
