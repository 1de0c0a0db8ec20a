"""`ralph status`, `log` and `show` answered from what the same command printed before
(ralph/commands/answers.py, issue 41): byte for byte what reading the records prints, and never
once anything it answers from has changed, a run is under way, or the kept file is not what was
kept. `asked` counts the commands that read the records; a kept answer reads none."""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from helpers.repos import git, make_repo
from helpers.running import ralph

import ralph as ralph_package
from ralph.commands import answers
from ralph.git import layout
from ralph.records.ledger import RUN_NAME

READING = (
    ["status"],
    ["status", "--json"],
    ["status", "--run", "one"],
    ["log"],
    ["log", "--json"],
    ["show", "1"],
    ["show", "2", "--json"],
)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The commands that read the records, in the order they ran (a kept answer is none of them)."""
    calls: list[str] = []
    for name in ("status", "log", "show"):
        module = importlib.import_module(f"ralph.commands.{name}")
        real = getattr(module, name)

        def reading(*args: object, _real=real, _name=name, **kwargs: object) -> int:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, reading)
    return calls


def with_a_run(tmp_path: Path, laps: int = 2) -> Path:
    """A repository with run `one` of `laps` green laps (a command agent, the check `true`)."""
    config = {"goal": "g", "agent": {"kind": "command", "command": "echo x >> x.txt"}, "checks": ["true"]}
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] a\n- [ ] b\n"}, config=config)
    ran = ralph(repo, "run", "--name", "one", "--max-laps", str(laps))
    assert ran.returncode == 3, ran.stdout + ran.stderr  # max laps, items left open
    return repo


def kept(repo: Path) -> dict[str, str]:
    folder = repo / ".git" / "ralph" / ".answers"
    return {path.name: path.read_text() for path in sorted(folder.glob("*.json"))}


def read_anew(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """What the command prints with no answer kept: it reads the records."""
    shutil.rmtree(repo / ".git" / "ralph" / ".answers", ignore_errors=True)
    return ralph(repo, *args)


def test_each_command_answers_again_byte_for_byte_what_it_printed(tmp_path: Path, asked: list[str]):
    repo = with_a_run(tmp_path)
    for args in READING:
        first = read_anew(repo, *args)
        assert first.returncode == 0 and first.stderr == "", (args, first.stderr)
        asked.clear()
        again = ralph(repo, *args)
        assert asked == [], args  # answered without reading the records
        assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, ""), args
    assert len(kept(repo)) == 1  # read_anew left only the last one


def test_the_first_status_after_a_run_is_answered_and_the_run_printed_nothing_more(tmp_path: Path, asked: list[str]):
    config = {"goal": "g", "agent": {"kind": "command", "command": "echo x >> x.txt"}, "checks": ["true"]}
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] a\n"}, config=config)
    ran = ralph(repo, "run", "--name", "one", "--max-laps", "1")
    assert ran.returncode == 3 and "review " not in ran.stdout  # status's lines were kept, not printed
    asked.clear()
    said = ralph(repo, "status")
    assert asked == []
    ralph(repo, "log")  # the run printed its table: `ralph log` reads the records, once
    assert asked == ["log"]
    assert (said.stdout, said.stderr) == (read_anew(repo, "status").stdout, "")


def test_a_new_lap_a_new_run_a_landing_and_a_deleted_ref_are_read_anew(tmp_path: Path, asked: list[str]):
    repo = with_a_run(tmp_path, laps=1)
    assert "laps        1 of max 1" in ralph(repo, "status").stdout
    assert ralph(repo, "run", "--name", "one", "--max-laps", "2").returncode == 3  # a second lap
    assert "laps        2 of max 1" in ralph(repo, "status").stdout  # the record keeps the first max
    assert ralph(repo, "run", "--name", "two", "--max-laps", "1").returncode == 3
    assert ralph(repo, "status").stdout.startswith("run two: not done")
    for args in (["status", "--run", "one"], ["log", "--run", "one"]):
        ralph(repo, *args)  # kept
    assert ralph(repo, "land", "--run", "one", "--partial").returncode == 0  # refs/ralph/one/landed
    asked.clear()
    assert ralph(repo, "status", "--run", "one").stdout == read_anew(repo, "status", "--run", "one").stdout
    assert asked == ["status", "status"]
    ralph(repo, "log", "--run", "one")  # kept
    git(repo, "update-ref", "-d", "refs/ralph/one/laps/2")
    shown = ralph(repo, "log", "--run", "one").stdout
    assert shown == read_anew(repo, "log", "--run", "one").stdout and "\n2 " not in shown and "\n1 " in shown


@pytest.mark.parametrize("folder", ["claims", "started", "workers"])
def test_a_run_under_way_is_read_every_time_and_never_kept(tmp_path: Path, asked: list[str], folder: str):
    repo = with_a_run(tmp_path, laps=1)
    before = kept(repo)
    holder = tmp_path / "holder.json"
    holder.write_text(json.dumps({"slot": 1, "items": ["a"], "worker": "w", "at": time.time()}))
    git(repo, "update-ref", f"refs/ralph/one/{folder}/1", git(repo, "hash-object", "-w", str(holder)))
    asked.clear()
    for _ in range(2):
        assert ralph(repo, "status").returncode == 0 and ralph(repo, "log").returncode == 0
    assert asked == ["status", "log"] * 2 and kept(repo) == before


def test_a_kept_file_that_is_not_what_was_kept_is_never_printed(tmp_path: Path, asked: list[str]):
    repo = with_a_run(tmp_path, laps=1)
    truth = read_anew(repo, "status").stdout
    ((name, text),) = kept(repo).items()
    stored = json.loads(text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("x")
    tampered = [
        "",
        "not json",
        text[: len(text) // 2],
        "[]",
        "{}",
        json.dumps(stored | {"key": "0" * 64}),
        json.dumps(stored | {"text": truth.replace("not done", "done")}),  # the key covers the text
        json.dumps(stored | {"text": 5}),
        json.dumps(stored | {"watched": 3}),
        json.dumps(stored | {"watched": [str(elsewhere)]}),
    ]
    file = repo / ".git" / "ralph" / ".answers" / name
    for planted in tampered:
        file.write_text(planted)
        asked.clear()
        said = ralph(repo, "status")
        assert (said.returncode, said.stdout, said.stderr, asked) == (0, truth, "", ["status"]), planted[:40]
    # The key covers the refs: the answer kept before a lap is not the answer after it.
    git(repo, "update-ref", "refs/ralph/one/laps/2", git(repo, "rev-parse", "refs/ralph/one/laps/1"))
    file.write_text(text)
    asked.clear()
    assert ralph(repo, "status").stdout == read_anew(repo, "status").stdout != truth
    assert asked == ["status", "status"]


def test_what_was_read_while_the_refs_moved_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A lap that lands while status reads: its answer is of neither state, so none is kept."""
    repo = with_a_run(tmp_path, laps=1)
    status = importlib.import_module("ralph.commands.status")
    real, lap = status.status, git(repo, "rev-parse", "refs/ralph/one/laps/1")

    def landing_meanwhile(*args: object, **kwargs: object) -> int:
        git(repo, "update-ref", "refs/ralph/one/laps/2", lap)
        return real(*args, **kwargs)

    monkeypatch.setattr(status, "status", landing_meanwhile)
    shutil.rmtree(repo / ".git" / "ralph" / ".answers")
    assert "laps        2 of max 1" in ralph(repo, "status").stdout
    assert kept(repo) == {}
    git(repo, "update-ref", "-d", "refs/ralph/one/laps/2")  # back as it was before the read
    monkeypatch.setattr(status, "status", real)
    assert "laps        1 of max 1" in ralph(repo, "status").stdout


def test_a_failure_a_warning_or_another_repository_is_never_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = with_a_run(tmp_path, laps=1)
    shutil.rmtree(repo / ".git" / "ralph" / ".answers")
    assert ralph(repo, "show", "9").returncode == 1 and kept(repo) == {}
    git(repo, "update-ref", "refs/ralph/zz/run", git(repo, "rev-parse", "HEAD^{tree}"))  # a record that is no blob
    for _ in range(2):
        said = ralph(repo, "status")
        assert said.returncode == 0 and "refs/ralph/zz/run: the record of run 'zz' is not a blob" in said.stderr
    assert kept(repo) == {}
    git(repo, "update-ref", "-d", "refs/ralph/zz/run")
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))  # as a hook is called: ralph sets it apart
    assert ralph(repo, "status").returncode == 0 and kept(repo) == {}


def test_a_command_that_ends_other_than_0_keeps_nothing(tmp_path: Path):
    """status, log and show raise what goes wrong (RalphError: nothing is kept as it passes); one that
    printed and then returned another code keeps nothing either."""
    repo = with_a_run(tmp_path, laps=1)
    shutil.rmtree(repo / ".git" / "ralph" / ".answers")

    def half_said() -> int:
        sys.stdout.write("half of it\n")
        return 1

    assert answers.answer(repo, ["status", None, False], half_said) == 1 and kept(repo) == {}


def test_show_is_read_anew_when_the_lap_s_output_log_is_gone(tmp_path: Path, asked: list[str]):
    repo = with_a_run(tmp_path, laps=1)
    log = repo / ".git" / "ralph" / "one" / "lap-1" / "agent.log"
    assert f"output  {log}\n" in ralph(repo, "show", "1").stdout
    asked.clear()
    assert f"output  {log}\n" in ralph(repo, "show", "1").stdout and asked == []
    log.unlink()
    shown = ralph(repo, "show", "1").stdout
    assert asked == ["show"] and "output " not in shown and shown == read_anew(repo, "show", "1").stdout


def on_a_terminal(repo: Path, columns: int, *args: str) -> bytes:
    """`ralph ARGS` with its stdout on a terminal `columns` wide that takes colour."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "LINES", "NO_COLOR")}
    started = subprocess.Popen(
        [sys.executable, "-m", "ralph", *args],
        cwd=repo,
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env | {"TERM": "xterm-256color"},
    )
    os.close(follower)
    printed = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        printed += chunk
    started.wait(timeout=60)
    os.close(leader)
    return printed


def test_on_a_terminal_the_colours_are_kept_and_another_width_is_another_answer(tmp_path: Path):
    repo = with_a_run(tmp_path, laps=1)
    git(repo, "update-ref", "refs/ralph/one/laps/2", git(repo, "rev-parse", "refs/ralph/one/laps/1"))  # none kept
    for columns in (100, 60):
        before = len(kept(repo))
        first = on_a_terminal(repo, columns, "log")
        assert b"\x1b[" in first and len(kept(repo)) == before + 1
        assert on_a_terminal(repo, columns, "log") == first and len(kept(repo)) == before + 1


def test_an_answer_loads_neither_rich_nor_pydantic_nor_gitpython(tmp_path: Path):
    repo = with_a_run(tmp_path, laps=1)
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(*sys.modules, file=sys.stderr))\n"
        "from ralph.cli import main\nmain(['status'])"
    )
    for _ in range(2):  # the first one keeps the answer for this kind of stdout
        ran = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.startswith("run one: not done")
    loaded = {name.split(".")[0] for name in ran.stderr.split()}
    assert loaded & {"rich", "pydantic", "markdown_it", "git", "openai"} == set()


def test_the_names_are_layouts_and_rich_reads_no_variable_the_key_does_not_hold():
    assert answers.READ_REFS[:3] == (layout.RUNS, layout.BRANCHES, layout.NOTES)
    assert not RUN_NAME.match(layout.answers_dir(Path("/r")).name)  # no run's folder
    assert answers._live("refs/ralph/r/claims/1 0") and not answers._live("refs/ralph/r/laps/1 0")
    assert Path(ralph_package.__file__).parent / "commands" / "answers.py" == Path(answers.__file__)
    console = Path(importlib.import_module("rich.console").__file__ or "").read_text()
    read = set(re.findall(r"""(?:environ\.get|getenv)\(\s*["']([A-Z_]+)["']""", console))
    assert read - {*answers.PRINTING, *answers.PRINTING_TOO} == {"DATABRICKS_RUNTIME_VERSION"}  # in Jupyter only


def test_a_fifo_or_a_link_where_answers_are_kept_neither_hangs_nor_reaches_past_the_git_dir(tmp_path: Path):
    """What an unsandboxed lap can plant in the git dir: a FIFO in an answer's place (reading it
    would wait for ever), the answers' folder a link to a folder of the user's (where the oldest
    files beyond KEPT would be deleted)."""
    repo = with_a_run(tmp_path)
    expected = read_anew(repo, "status").stdout
    for answer in (repo / ".git" / "ralph" / ".answers").glob("*.json"):
        answer.unlink()
        os.mkfifo(answer)
    asked = [sys.executable, "-m", "ralph", "status"]
    said = subprocess.run(asked, cwd=repo, capture_output=True, text=True, timeout=60)
    assert (said.returncode, said.stdout) == (0, expected)
    users = tmp_path / "users"
    users.mkdir()
    for number in range(70):
        (users / f"{number:02d}.json").write_text("mine")
    shutil.rmtree(repo / ".git" / "ralph" / ".answers")
    (repo / ".git" / "ralph" / ".answers").symlink_to(users)
    said = subprocess.run(asked, cwd=repo, capture_output=True, text=True, timeout=60)
    assert (said.returncode, said.stdout) == (0, expected)
    assert sorted(path.name for path in users.iterdir()) == [f"{number:02d}.json" for number in range(70)]
