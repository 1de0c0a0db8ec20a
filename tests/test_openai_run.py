"""`ralph run` with the built-in openai agent: the ralph process talks real HTTP to a
scripted OpenAI-compatible server on loopback, and laps commit and check for real."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from pathlib import Path

from helpers.repos import PY, git, make_repo
from helpers.running import lap_notes, ralph

from ralph.agents.scripted import Hang, HttpError, Reply, ScriptedServer, Step, bash, finish, text, tool_call

CANARY = "sk-canary-9f8e7d6c5b4a"
FILES = {
    "calc.py": "def mul(a, b):\n    raise NotImplementedError\n",
    "TODO.md": "# TODO\n- [ ] Implement mul\n- [ ] Write NOTES.md\n",
    "PROGRESS.md": "nothing yet\n",
}
MUL = f"{PY} -c 'import calc; assert calc.mul(2, 3) == 6'"
# Red at the base with no per-test results: marked expected red, as a user would.
MUL_CHECK = {"run": MUL, "expect_red": True}


def edit(command: str, path: str, **arguments: object) -> Reply:
    return tool_call("str_replace_based_edit_tool", dict(command=command, path=path, **arguments))


def repo_for(tmp_path: Path, base_url: str, checks: list[str | dict[str, object]], **limits) -> Path:
    config = {
        "goal": "Finish calc",
        "agent": {"kind": "openai", "model": "scripted-1", "base_url": base_url},
        "checks": checks,
        "limits": {"stagnation": 5, **limits},
    }
    return make_repo(tmp_path / "repo", FILES, config=config)


def laps(repo: Path) -> list[dict]:
    return lap_notes(repo, "o")


def test_a_lap_with_every_tool_ends_done(tmp_path: Path):
    script: list[Step] = [
        edit("view", "calc.py"),
        edit("str_replace", "calc.py", old_str="raise NotImplementedError", new_str="return a * b"),
        edit("create", "NOTES.md", file_text="calc: mul\n"),
        edit("insert", "PROGRESS.md", insert_line=0, new_str="done: mul, notes"),
        edit("str_replace", "TODO.md", old_str="- [ ] Implement mul", new_str="- [x] Implement mul"),
        edit("str_replace", "TODO.md", old_str="- [ ] Write NOTES.md", new_str="- [x] Write NOTES.md"),
        bash(f"{PY} -c 'import calc; print(calc.mul(6, 7))'; env"),
        finish("implemented mul and wrote NOTES.md"),
    ]
    with ScriptedServer(script) as server:
        checks: list[str | dict[str, object]] = [
            MUL_CHECK,
            f"! env | grep -q {CANARY[-12:]}",
            'test -z "$OPENAI_API_KEY"',
        ]
        repo = repo_for(tmp_path, server.base_url, checks)
        result = ralph(repo, "run", "--name", "o", env={"OPENAI_API_KEY": CANARY})
        assert result.returncode == 0, result.stdout + result.stderr
        assert len(server.requests) == len(script)
        # The key reached the endpoint, and only the endpoint.
        assert server.requests[0].headers["authorization"] == f"Bearer {CANARY}"
        bash_result = server.requests[7].body["messages"][-1]["content"]
        assert "42" in bash_result and "PATH=" in bash_result and CANARY not in bash_result

    (lap,) = laps(repo)
    assert lap["status"] == "green" and lap["done"] is True
    assert [check["exit_code"] for check in lap["checks"]] == [0, 0, 0]
    assert lap["agent"]["kind"] == "openai" and lap["agent"]["summary"] == "implemented mul and wrote NOTES.md"
    assert lap["agent"]["usage"]["requests"] == 8 and lap["agent"]["usage"]["prompt_tokens"] > 0
    message = git(repo, "log", "-1", "--format=%B", "ralph/o")
    assert message.startswith("Implement mul; Write NOTES.md\n\nimplemented mul and wrote NOTES.md")
    assert "Ralph-Model: scripted-1" in message and "Ralph-Agent: openai" in message
    assert git(repo, "show", "ralph/o:PROGRESS.md") == "done: mul, notes\nnothing yet"
    assert git(repo, "show", "ralph/o:NOTES.md") == "calc: mul"
    run_dir = repo / ".git" / "ralph" / "o"
    transcript = (run_dir / "lap-1" / "transcript.jsonl").read_text()
    assert "return a * b" in transcript and CANARY not in transcript
    assert not any(CANARY in path.read_text(errors="replace") for path in run_dir.rglob("*") if path.is_file())
    assert CANARY not in git(repo, "notes", "--ref", "ralph", "show", "ralph/o")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_endpoint_that_cannot_be_used_is_exit_6_before_any_run_is_made(tmp_path: Path):
    endpoint = f"http://127.0.0.1:{_closed_port()}/v1"
    repo = repo_for(tmp_path, endpoint, ["true"], lap_timeout=2)  # the check retries within one lap's time
    result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 6, result.stdout + result.stderr
    assert f"model scripted-1: model request to {endpoint} failed: Connection error." in result.stderr
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""


def test_an_endpoint_that_refuses_the_request_shape_names_what_it_refused(tmp_path: Path):
    refusal = HttpError(
        500,
        {
            "error": {
                "message": "Traceback: " + "frame; " * 100 + "1 validation error for "
                "ChatRequest: tool_choice Input should be 'none'"
            }
        },
    )
    with ScriptedServer([], preflight=refusal) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"])
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 6, result.stdout + result.stderr
    assert len(server.preflights) == 1  # a validation error is not asked again
    assert "tool_choice Input should be 'none'" in result.stderr and "no run was started" in result.stderr
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""


def test_a_server_that_hangs_then_recovers_within_outage_wait_lets_the_run_finish(tmp_path: Path):
    recovers: list[float] = []  # the moment the server answers again: 4 s after the first lap's first request

    def script(body: dict, index: int) -> Step:
        if not recovers:
            recovers.append(time.monotonic() + 4)
        if time.monotonic() < recovers[0]:
            return Hang(recovers[0] - time.monotonic())  # holds its one slot till then, answering nothing
        worked = body["messages"][-1]["role"] == "tool"
        return finish("all done") if worked else bash("echo notes > NOTES.md && sed -i 's/- \\[ \\]/- [x]/' TODO.md")

    with ScriptedServer(script) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"], lap_timeout=3, outage_wait=4)
        config = json.loads((repo / "ralph.yaml").read_text())
        config["agent"]["request_timeout"] = 1
        (repo / "ralph.yaml").write_text(json.dumps(config))
        git(repo, "commit", "-qam", "short timeouts")
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 0, result.stdout + result.stderr
    statuses = [lap["status"] for lap in laps(repo)]
    assert statuses[0] == "error" and statuses[-1] == "green" and "red" not in statuses
    assert "the model endpoint failed; the next lap starts in" in result.stdout


def test_a_model_that_never_calls_a_tool_stops_the_run_with_exit_6_saying_so(tmp_path: Path):
    with ScriptedServer(lambda body, index: text("Sure! I will implement mul.")) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"])
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 6, result.stdout + result.stderr
    assert "3 agent errors in a row" in result.stdout and "does not do tool calls" in result.stdout
    assert [lap["status"] for lap in laps(repo)] == ["error"] * 3
    assert len(server.requests) == 9  # three replies a lap, not max_turns


def test_max_tokens_is_a_fuse_with_exit_7(tmp_path: Path):
    def script(body: dict, index: int):
        return edit("create", f"f{index}.txt", file_text="x") if index % 2 == 0 else finish("one file")

    with ScriptedServer(script) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"], max_tokens=1500)
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 7, result.stdout + result.stderr
    assert "max_tokens (1500) spent" in result.stdout
    used = sum(
        lap["agent"]["usage"]["prompt_tokens"] + lap["agent"]["usage"]["completion_tokens"] for lap in laps(repo)
    )
    assert used >= 1500


def test_status_and_show_draw_the_context_bars(tmp_path: Path):
    def script(body: dict, index: int):
        lap = sum(1 for m in body["messages"] if m["role"] == "assistant")
        todo = next(m for m in body["messages"] if m["role"] == "user")["content"]
        if lap == 0:
            return edit("create", f"part-{index}.txt", file_text="x" * 400)
        item = "Implement mul" if "- [ ] Implement mul" in todo else "Write NOTES.md"
        if lap == 1:
            return edit("str_replace", "TODO.md", old_str=f"- [ ] {item}", new_str=f"- [x] {item}")
        return finish(f"did {item}")

    with ScriptedServer(script) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"])
        assert ralph(repo, "run", "--name", "o").returncode == 0
    first, second = laps(repo)
    largest = [first["agent"]["usage"]["largest_prompt_tokens"], second["agent"]["usage"]["largest_prompt_tokens"]]
    status = json.loads(ralph(repo, "status", "--json").stdout)
    assert status["context"] == {"this_lap": largest[1], "one_session": sum(largest)}
    assert status["tokens"] == sum(
        lap["agent"]["usage"]["prompt_tokens"] + lap["agent"]["usage"]["completion_tokens"] for lap in (first, second)
    )
    text = ralph(repo, "status").stdout
    assert "this lap" in text and "one session" in text and f"{sum(largest):,} tokens" in text
    shown = ralph(repo, "show", "1").stdout
    assert f"{largest[0]:,} tokens" in shown and "3 requests" in shown


def test_finish_on_a_lap_that_changed_nothing_or_while_checks_fail_is_pushed_back_once(tmp_path: Path):
    # docs/agents.md promises the built-in agent sees what is left before its lap ends: here a
    # finish with no edit, then one while the check still fails; each is answered once.
    script: list[Step] = [
        finish("nothing to do"),
        edit("create", "NOTES.md", file_text="calc: mul\n"),
        finish("wrote notes"),
        edit("str_replace", "calc.py", old_str="raise NotImplementedError", new_str="return a * b"),
        finish("implemented mul"),
    ]
    with ScriptedServer(script) as server:
        repo = repo_for(tmp_path, server.base_url, [MUL_CHECK], max_laps=1)
        config = json.loads((repo / "ralph.yaml").read_text())
        config["agent"]["fix_attempts"] = 2
        (repo / "ralph.yaml").write_text(json.dumps(config))
        git(repo, "commit", "-qam", "two fix attempts")
        ralph(repo, "run", "--name", "o")
        answers = [message["content"] for message in server.requests[-1].body["messages"] if message["role"] == "tool"]
    assert "Not finished: you changed no file, and a lap that changes nothing is red." in answers[0]
    assert f"Not finished: these checks still fail: `{MUL}`" in answers[2]
    assert "If they are for later laps and your slice is done, call finish again." in answers[2]
    (lap,) = laps(repo)
    assert lap["status"] == "green" and lap["agent"]["summary"] == "implemented mul"


def _with_request_timeout(repo: Path, seconds: float) -> None:
    config = json.loads((repo / "ralph.yaml").read_text())
    config["agent"]["request_timeout"] = seconds
    (repo / "ralph.yaml").write_text(json.dumps(config))
    git(repo, "commit", "-qam", "a short request_timeout")


def test_a_slow_server_streaming_longer_than_request_timeout_finishes_the_run(tmp_path: Path):
    """The issue: a CPU server's long reply outlasted request_timeout and counted as an outage."""

    def slowly(step: Reply) -> Reply:
        return dataclasses.replace(step, pace=0.03)  # about 33 tokens a second

    script: list[Step] = [
        slowly(text("Let me look at calc.py first, then implement mul, then tick the item. " * 4)),
        slowly(edit("str_replace", "calc.py", old_str="raise NotImplementedError", new_str="return a * b")),
        edit("str_replace", "TODO.md", old_str="- [ ] Implement mul", new_str="- [x] Implement mul"),
        edit("str_replace", "TODO.md", old_str="- [ ] Write NOTES.md", new_str="- [x] Write NOTES.md"),
        finish("done"),
    ]
    with ScriptedServer(script) as server:
        repo = repo_for(tmp_path, server.base_url, [MUL_CHECK])
        _with_request_timeout(repo, 0.5)
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 0, result.stdout + result.stderr
    (lap,) = laps(repo)
    assert lap["status"] == "green" and lap["agent"]["endpoint_failed"] is False


def test_a_lap_whose_time_runs_out_on_a_slow_reply_says_the_server_was_slow(tmp_path: Path):
    long_reply = " ".join(f"word{n}" for n in range(400))
    with ScriptedServer(lambda body, index: dataclasses.replace(text(long_reply), pace=0.02)) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"], max_laps=1, lap_timeout=2)
        _with_request_timeout(repo, 0.5)
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 3, result.stdout + result.stderr  # max_laps: a red lap, not an outage
    (lap,) = laps(repo)
    assert (lap["status"], lap["agent"]["outcome"], lap["agent"]["endpoint_failed"]) == ("red", "timeout", False)
    assert lap["reason"].startswith("the lap's 2s ran out in model call 1 with the model still answering after 2 s")
    assert "a slow server, not a dead one" in lap["reason"] and "a slow server, not a dead one" in result.stdout
    assert lap["agent"]["usage"]["requests"] == 1 and lap["agent"]["usage"]["completion_tokens"] > 0


def test_an_endpoint_that_answers_nothing_says_it_may_be_down_or_stuck(tmp_path: Path):
    with ScriptedServer(lambda body, index: Hang(30)) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"], lap_timeout=3, outage_wait=1)
        _with_request_timeout(repo, 0.3)
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 6, result.stdout + result.stderr
    first = laps(repo)[0]
    assert (first["status"], first["agent"]["endpoint_failed"]) == ("error", True)
    assert "no answer for 0.3 s (the endpoint may be down or stuck)" in first["reason"]
    assert "no answer for 0.3 s (the endpoint may be down or stuck)" in result.stdout + result.stderr


def test_a_server_still_silent_when_the_lap_runs_out_is_a_timeout_lap_not_an_outage(tmp_path: Path):
    """A CPU server reads a long prompt for longer than the lap has left, though less than
    request_timeout: the lap ran out of time (red), and the run goes on; not an endpoint failure,
    outage waits and exit 6."""
    script: list[Step] = [bash("echo notes > NOTES.md"), Hang(30, then=finish())]
    with ScriptedServer(script) as server:
        repo = repo_for(tmp_path, server.base_url, ["true"], max_laps=1, lap_timeout=5, outage_wait=1)
        _with_request_timeout(repo, 30)
        result = ralph(repo, "run", "--name", "o")
    assert result.returncode == 3, result.stdout + result.stderr  # max_laps: a red lap, not an outage
    (lap,) = laps(repo)
    assert (lap["status"], lap["agent"]["outcome"], lap["agent"]["endpoint_failed"]) == ("red", "timeout", False)
    assert lap["reason"].startswith("the lap's 5s ran out in model call 2 before the server answered (silent for ")
    assert "less than agent.request_timeout's 30 s: too soon to tell a slow server" in lap["reason"]
    assert "the model endpoint failed" not in result.stdout and "may be down or stuck" not in result.stdout
