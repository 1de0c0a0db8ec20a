"""What `ralph run` shows while it works: plain lines, the live view in a terminal, `--quiet`,
the `--events` JSON lines and the table of laps at the end."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from helpers.jobs import mul_repo
from helpers.repos import PY, make_repo
from helpers.running import ralph
from rich.console import Console

from ralph.agents.scripted import Reply, ScriptedServer, Step, bash, finish, tool_call
from ralph.show import events, ui
from ralph.show.view import LiveView, Plain, console_for

ESCAPE = "\x1b"


def tick(item: str) -> object:
    return tool_call(
        "str_replace_based_edit_tool",
        dict(command="str_replace", path="TODO.md", old_str=f"- [ ] {item}", new_str=f"- [x] {item}"),
    )


def write_file(path: str, text: str) -> Reply:
    return tool_call("str_replace_based_edit_tool", dict(command="create", path=path, file_text=text))


def two_laps() -> list:
    """Lap 1 breaks the check (red), lap 2 does the job (green, done)."""
    return [
        write_file("calc.py", "def mul(a, b)\n"),
        finish("tried"),
        bash("sleep 0.6; echo working"),
        write_file("calc.py", "def mul(a, b):\n    return a * b\n"),
        tick("Implement mul"),
        finish("implemented mul"),
    ]


def test_plain_output_events_and_the_table_of_laps(tmp_path: Path):
    events_file = tmp_path / "events.jsonl"
    with ScriptedServer(two_laps()) as server:
        repo = mul_repo(tmp_path, server.base_url)
        result = ralph(repo, "run", "--name", "v", "--plain", "--events", str(events_file))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert ESCAPE not in out + result.stderr
    assert "lap 1 of at most 10 …" in out and "  · agent" in out and "  · write calc.py" not in out
    assert "  · create calc.py" in out and "  · bash: sleep 0.6; echo working" in out
    assert "fail  " in out and "pass  " in out  # the lap's checks as they finish
    # The table, then the stop reason with the exit code, last.
    table = [line.rstrip() for line in out[out.index("lap  status") :].splitlines()]
    assert re.match(r"1 +red +\d+\.\ds +[\d,]+ +1 +0/1 +check .*\(exit 1\)$", table[1]), table
    assert re.match(r"2 +green +\d+\.\ds +[\d,]+ +2 +1/1 \+1 +all checks pass$", table[2]), table
    assert table[-1] == "stopped: done at lap 2: every check passes and every TODO item is ticked (exit 0)"

    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert {event["run"] for event in events} == {"v"}
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$", event["at"]) for event in events)
    kinds = [event["type"] for event in events if event["type"] != "phase_changed"]
    lap_one = ["lap_started", *["model_replied", "tool_called"] * 2, "check_finished", "check_finished", "lap_ended"]
    lap_two = ["lap_started", *["model_replied", "tool_called"] * 4, "check_finished", "check_finished", "lap_ended"]
    # The check marked expected red (it fails at the base with no per-test results) is named: it judges no lap.
    start = ["run_started", "check_finished", "check_finished", "warning"]
    assert kinds == [*start, *lap_one, *lap_two, "run_ended"], kinds
    (warning,) = [event for event in events if event["type"] == "warning"]
    assert "fails on the base commit (expect_red): it judges no lap" in warning["message"]
    phases = [(event["lap"], event["phase"]) for event in events if event["type"] == "phase_changed"]
    assert phases[:4] == [(0, "preparing"), (0, "checks"), (1, "preparing"), (1, "agent")]
    assert phases[4:8] == [(1, "committing"), (1, "preparing"), (1, "checks"), (2, "preparing")]
    first, *_, last = events
    assert first["resumed"] is False and first["max_laps"] == 10 and first["goal"] == "Finish calc"
    assert last == dict(last, exit=0, stopped_by="done", lap=2, flaky=[])
    ended = [event for event in events if event["type"] == "lap_ended"]
    assert [(event["lap"], event["status"], event["ticked"]) for event in ended] == [
        (1, "red", []),
        (2, "green", ["Implement mul"]),
    ]
    assert all(event["tokens"] > 0 and event["largest_prompt_tokens"] > 0 for event in ended)
    checks = [event for event in events if event["type"] == "check_finished"]
    assert [(event["lap"], event["passed"]) for event in checks] == [
        (0, True),
        (0, False),
        (1, False),
        (1, False),
        (2, True),
        (2, True),
    ]


def test_quiet_prints_only_the_result_and_events_can_own_stdout(tmp_path: Path):
    with ScriptedServer(two_laps()[2:]) as server:
        repo = mul_repo(tmp_path, server.base_url)
        quiet = ralph(repo, "run", "--name", "q", "--quiet", "--max-laps", "1")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert quiet.stdout == "stopped: done at lap 1: every check passes and every TODO item is ticked (exit 0)\n"

    with ScriptedServer(two_laps()[2:]) as server:
        repo = mul_repo(tmp_path / "second", server.base_url)
        piped = ralph(repo, "run", "--name", "e", "--events", "-")
    assert piped.returncode == 0, piped.stdout + piped.stderr
    events = [json.loads(line) for line in piped.stdout.splitlines()]  # every line of stdout is an event
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_ended"
    assert "stopped: done at lap 1" in piped.stderr and "lap  status" in piped.stderr


def test_an_error_ends_the_events_with_its_reason(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": "goal: g\nchecks: [true]\nagent: {kind: command}\n"})
    events_file = tmp_path / "events.jsonl"
    result = ralph(repo, "run", "--events", str(events_file))
    assert result.returncode == 1 and "agent.command" in result.stderr, result.stderr
    assert "stopped:" not in result.stdout  # said once, by the error line
    (ended,) = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert ended["type"] == "run_ended" and ended["stopped_by"] == "error" and ended["exit"] == 1
    assert ended["run"] is None and "agent.command" in ended["reason"]

    bad = ralph(repo, "run", "--plain", "--events", str(tmp_path / "no-such-folder" / "e.jsonl"))
    assert bad.returncode == 1 and bad.stderr.startswith("ralph: --events: cannot write")


def test_plain_says_a_silent_phase_is_still_going():

    display = Plain(heartbeat=0.4)
    console = console_for(plain=True)
    console.file = captured = io.StringIO()  # the heartbeat prints from its own thread
    with ui.using(console), events.listening(display), display.shown():
        events.emit(
            "run_started",
            run="r",
            resumed=False,
            base="b" * 40,
            green="b" * 40,
            next_lap=1,
            max_laps=3,
            one_session=0,
            goal="g",
        )
        events.emit("lap_started", lap=1, max_laps=3)
        events.emit("phase_changed", phase="agent")
        time.sleep(1.0)
    lines = captured.getvalue().splitlines()
    assert lines[:3] == ["run r: baseline checks on bbbbbbbbbb", "lap 1 of at most 3 …", "  · agent"]
    assert lines[3:] and all(re.fullmatch(r"  · lap 1: agent for 0:0\d", line) for line in lines[3:]), lines


def test_the_live_view_in_a_terminal_shows_the_phase_and_the_token_bars(tmp_path: Path):
    """A real `ralph run` on a pseudo-terminal: what a person watching it sees."""
    with ScriptedServer(two_laps()[2:]) as server:
        repo = mul_repo(tmp_path, server.base_url)
        screen = _run_in_terminal(repo, ["run", "--name", "t"])
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.replace("\r", ""))
    assert ESCAPE in screen  # drawn, not printed as lines
    assert re.search(r"lap 1/10 +agent \d:\d\d +lap \d:\d\d", text), text
    assert "· bash: sleep 0.6; echo working" in text
    bars = re.findall(r"(this lap|one session) +[█░]{30} ([\d,]+) tokens", text)
    assert {label for label, tokens in bars if tokens != "0"} == {"this lap", "one session"}, bars
    assert "stopped: done at lap 1" in text and "lap  status" in text


def test_plain_in_a_terminal_writes_no_escape_code_even_for_an_error(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] a\n"})
    screen = _run_in_terminal(repo, ["run", "--plain"], expect=1)
    assert screen == f"ralph: {repo / 'ralph.yaml'}: not found — write one with `ralph init` or pass --config\r\n"
    assert ESCAPE in _run_in_terminal(repo, ["run"], expect=1)  # what --plain took away


def _run_in_terminal(repo: Path, args: list[str], timeout: float = 60, expect: int = 0) -> str:
    leader, follower = pty.openpty()
    env = dict(os.environ, COLUMNS="100", LINES="30", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [PY, "-m", "ralph", *args], cwd=repo, stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([leader], [], [], 0.5)[0]:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the terminal closed: ralph exited
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
    finally:
        os.close(leader)
        process.wait(timeout=10)
    assert process.returncode == expect, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_live_view_draws_the_lap_the_phase_the_agents_lines_and_the_bars():

    live = LiveView()
    start = dict(run="r", resumed=True, base="b" * 40, green="c" * 40, next_lap=3, max_laps=9, one_session=1200)
    steps: list[tuple[str, Mapping[str, object]]] = [
        ("run_started", start),
        ("lap_started", dict(lap=3, max_laps=9)),
        ("phase_changed", dict(phase="agent")),
        *[("tool_called", dict(line=f"bash: step {n}")) for n in range(7)],
        ("model_replied", dict(prompt_tokens=600, completion_tokens=50)),
        ("check_finished", dict(command="pytest -q", passed=False, exit_code=1, duration_s=2.0)),
    ]
    for kind, fields in steps:
        live({"type": kind, "lap": fields.get("lap", 3), "at": "", **fields})
    console = Console(width=100, record=True, force_terminal=True, file=io.StringIO())
    console.print(live)
    drawn = console.export_text()
    assert re.match(r"lap 3/9  agent 0:0\d  lap 0:0\d\n", drawn), drawn
    assert "step 0" not in drawn and "step 1" not in drawn and "· bash: step 6" in drawn  # the last five
    assert "fail  pytest -q  (2.0s)" in drawn
    assert re.search(r"this lap +█{10}░{20} 600 tokens\n +one session +█{30} 1,800 tokens", drawn), drawn


HOSTILE = "\x1b]52;c;ZXZpbA==\x1b\\\x1b[31m\x9b2J\u202e\x07"  # clipboard write, colour, C1 CSI, bidi, bell


def test_what_an_agent_says_reaches_the_terminal_without_a_control_character(tmp_path: Path):
    """Tool calls, output lines, file names in a lap's reason, its summary: printed as text, never as codes."""
    script: list[Step] = [
        write_file(f"p{HOSTILE}.txt", "x"),
        bash(f"echo 'out{HOSTILE}put'; ln -s /etc/hostname \"$(printf 'ln\\033]0;PWNED\\033\\\\')\""),
        finish(f"summary{HOSTILE}"),
    ]
    events_file = tmp_path / "events.jsonl"
    with ScriptedServer(script) as server:
        repo = mul_repo(tmp_path, server.base_url)
        result = ralph(repo, "run", "--name", "h", "--plain", "--max-laps", "1", "--events", str(events_file))
    assert result.returncode == 3, result.stdout + result.stderr
    shown = [result.stdout, result.stderr, ralph(repo, "log").stdout, ralph(repo, "show", "1").stdout]
    shown += [ralph(repo, "status").stdout, events_file.read_text()]
    for text in shown:
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text), repr(text)
    assert "create p]52;c;ZXZpbA==2J.txt" not in result.stdout  # the sequences go whole, not their bytes
    assert "  · create p.txt" in result.stdout and "symbolic links to outside the repository: ln" in result.stdout
    lines = [json.loads(line).get("line", "") for line in events_file.read_text().splitlines()]
    assert "bash: echo 'output'; ln -s /etc/hostname \"$(printf 'ln\\033]0;PWNED\\033\\\\')\"" in lines


def test_an_agent_that_says_too_much_is_cut_and_rate_limited(monkeypatch):
    heard: list[dict] = []
    monkeypatch.setattr(events.time, "monotonic", lambda: 1000.0)  # all in one second
    with events.listening(heard.append):
        said = events.Lines("tool_called")
        for _ in range(50):
            said("view " + "x" * 5000)
    assert len(heard) == events.LINES_PER_SECOND
    assert {len(event["line"]) for event in heard} == {events.LINE_CHARS}


def test_a_command_agents_lines_become_events_the_last_one_too_and_a_full_disk_is_a_warning(tmp_path: Path):
    agent = (
        "printf 'first\\n\\033[1mbold\\033[0m\\n' && sed -i 's/\\[ \\]/[x]/' TODO.md && echo x > x.txt && printf last"
    )
    config = {"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": ["true"]}
    repo = make_repo(tmp_path / "repo", config=config, todo=["a"])
    events_file = tmp_path / "events.jsonl"
    assert ralph(repo, "run", "--name", "c", "--events", str(events_file)).returncode == 0
    said = [event["line"] for event in map(json.loads, events_file.read_text().splitlines()) if "line" in event]
    assert said == ["first", "bold", "last"]

    git_commit = ["git", "commit", "-q", "--allow-empty", "-m", "again"]
    subprocess.run(git_commit, cwd=repo, check=True)
    full = ralph(repo, "run", "--name", "d", "--events", "/dev/full")
    assert full.returncode == 0, full.stdout + full.stderr
    assert "ralph: warning: --events: cannot write /dev/full (No space left on device)" in full.stderr
    assert "stopped: done at lap 1" in full.stdout
