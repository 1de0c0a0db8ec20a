"""The built-in agent end to end: the real `openai` client over real HTTP to a scripted server,
tools running in a real git repository. Backoff waits go to a recorder instead of sleeping."""

from __future__ import annotations

import email.utils
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import openai
import pytest
from helpers.repos import make_repo

from ralph.agents import transcript
from ralph.agents.base import AgentResult, LapTask
from ralph.agents.conversation import CUT_OFF, empty_reply
from ralph.agents.kinds import make_agent
from ralph.agents.openai import USE_A_TOOL, OpenAIAgent
from ralph.agents.scripted import Hang, HttpError, ScriptedServer, Step, bash, call, finish, text, tool_call, tool_calls
from ralph.agents.tools import TOOL_SCHEMAS
from ralph.config.agent import AgentConfig
from ralph.errors import RalphError
from ralph.isolation import proc

CALC = "def mul(a, b):\n    raise NotImplementedError\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": CALC})


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    return folder


class Sleeps(list):
    """Stands in for time.sleep: records each wait and returns at once."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def run_lap(
    repo: Path,
    base_url: str,
    *,
    sleeps: Sleeps | None = None,
    timeout: float = 60,
    check: Callable[[], str | None] | None = None,
    **config: object,
) -> AgentResult:
    agent_config = AgentConfig(kind="openai", model="scripted", base_url=base_url, **config)
    log_dir = repo.parent / "logs"
    log_dir.mkdir(exist_ok=True)  # as the lap engine makes it
    task = LapTask(
        "run",
        1,
        repo,
        "Implement mul in calc.py.",
        timeout,
        log_dir,
        proc.lap_env(),
        check=check,
    )
    return OpenAIAgent(agent_config, sleep=Sleeps() if sleeps is None else sleeps).run_lap(task)


def assert_valid_history(body: dict) -> None:
    """What a strict server demands: every tool call answered, by id, before anything else follows."""
    waiting: set[str] = set()
    seen: set[str] = set()
    for message in body["messages"]:
        if message["role"] == "tool":
            assert message["tool_call_id"] in waiting, message
            waiting.remove(message["tool_call_id"])
            continue
        assert not waiting, f"tool calls {waiting} unanswered before a {message['role']} message"
        for tool_call_ in message.get("tool_calls") or []:
            assert tool_call_["type"] == "function" and tool_call_["id"] and tool_call_["id"] not in seen
            assert isinstance(json.loads(tool_call_["function"]["arguments"]), dict)
            waiting.add(tool_call_["id"])
            seen.add(tool_call_["id"])
    assert not waiting


def sent(server: ScriptedServer, index: int) -> list[dict]:
    """The messages of request `index`, after checking they form a valid history."""
    body = server.requests[index].body
    assert_valid_history(body)
    return body["messages"]


def events(logs: Path, kind: str) -> list[dict]:
    lines = (logs / "transcript.jsonl").read_text().splitlines()
    return [event for event in map(json.loads, lines) if event["event"] == kind]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_lap_edits_the_worktree_and_finishes(repo: Path, logs: Path) -> None:
    script: list[Step] = [
        tool_call(
            "str_replace_based_edit_tool",
            {
                "command": "str_replace",
                "path": "calc.py",
                "old_str": "raise NotImplementedError",
                "new_str": "return a * b",
            },
        ),
        bash("python3 -c 'import calc; print(calc.mul(6, 7))'"),
        finish("mul implemented"),
    ]
    with ScriptedServer(script) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, result.summary, result.detail) == ("ok", "mul implemented", "")
    assert (repo / "calc.py").read_text() == "def mul(a, b):\n    return a * b\n"
    assert sent(server, 2)[-1]["content"] == "42\n[exit code 0]"
    assert [m["role"] for m in sent(server, 0)] == ["system", "user"]
    assert server.requests[0].body["tools"][0]["function"]["name"] == "bash"
    reported = [event["prompt_tokens"] for event in events(logs, "response")]
    assert result.usage.requests == 3 and result.usage.prompt_tokens == sum(reported)
    assert not result.usage.estimated
    assert events(logs, "end")[0]["usage"]["largest_prompt_tokens"] == max(reported) == reported[-1]
    body = server.requests[1].body
    assert (body["tool_choice"], body["max_tokens"], body["temperature"]) == ("auto", 4096, 0.2)
    assert sent(server, 1)[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": server.requests[1].body["messages"][2]["tool_calls"][0]["id"],
                "type": "function",
                "function": {
                    "name": "str_replace_based_edit_tool",
                    "arguments": json.dumps(
                        {
                            "command": "str_replace",
                            "path": "calc.py",
                            "old_str": "raise NotImplementedError",
                            "new_str": "return a * b",
                        }
                    ),
                },
            }
        ],
    }


def test_the_strict_server_refuses_what_the_strictest_real_servers_refuse() -> None:
    """So that the agent's tests, run against it, mean something: a null content is a 500, and
    tools without tool_choice are not offered to the model."""
    # Plain JSON, as any client may send it: the SDK's types are not what the server is tested on.
    history: Any = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("bash", {"command": "ls"}, call_id="c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    with (
        ScriptedServer([bash("ls")]) as server,
        openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client,
    ):
        with pytest.raises(openai.InternalServerError, match="messages.1.content Input should be a valid string"):
            client.chat.completions.create(model="m", messages=history)
        reply = client.chat.completions.create(model="m", messages=history[:1], tools=cast(Any, TOOL_SCHEMAS))
    content = reply.choices[0].message.content
    assert reply.choices[0].message.tool_calls is None and content is not None and content.startswith("I would")


def test_compat_names_the_output_limit_and_a_null_temperature_is_not_sent(repo: Path) -> None:
    with ScriptedServer([finish()]) as server:
        run_lap(
            repo,
            server.base_url,
            max_output_tokens=512,
            temperature=None,
            compat={"max_tokens_field": "max_completion_tokens"},
        )
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 512 and "max_tokens" not in body and "temperature" not in body


def test_a_tool_call_without_an_id_gets_one(repo: Path) -> None:
    with ScriptedServer([bash("echo hi", call_id=None), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assistant, answer = sent(server, 1)[-2:]
    call_id = assistant["tool_calls"][0]["id"]
    assert answer == {"role": "tool", "tool_call_id": call_id, "content": "hi\n[exit code 0]"}


def test_repeated_ids_are_made_unique(repo: Path) -> None:
    reply = tool_calls(
        call("bash", {"command": "echo one"}, call_id="0"), call("bash", {"command": "echo two"}, call_id="0")
    )
    with ScriptedServer([reply, finish()]) as server:
        run_lap(repo, server.base_url)
    assert [m["content"] for m in sent(server, 1)[-2:]] == ["one\n[exit code 0]", "two\n[exit code 0]"]


def test_empty_arguments_are_no_arguments(repo: Path) -> None:
    with ScriptedServer([tool_call("str_replace_based_edit_tool", ""), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assistant, answer = sent(server, 1)[-2:]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    assert answer["content"] == "error: `command` is required and must be a non-empty string"


def test_invalid_json_arguments_get_a_format_error(repo: Path) -> None:
    with ScriptedServer([tool_call("bash", '{"command": "touch ran"'), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assistant, answer = sent(server, 1)[-2:]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"  # stored as valid JSON
    assert answer["content"].startswith("format error: the arguments were not valid JSON")
    assert '{"command": "touch ran"' in answer["content"] and not (repo / "ran").exists()


def test_an_unknown_tool_gets_a_format_error(repo: Path) -> None:
    with ScriptedServer([tool_call("python", {"code": "print(1)"}), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assert sent(server, 1)[-1]["content"] == (
        "format error: there is no tool named 'python'; the tools are bash, str_replace_based_edit_tool, finish."
    )


def test_an_empty_reply_gets_a_format_error_and_text_gets_a_nudge(repo: Path) -> None:
    with ScriptedServer([text(None), text("I would now edit calc.py."), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assert sent(server, 1)[-1] == {"role": "user", "content": empty_reply(USE_A_TOOL)}
    assert sent(server, 2)[-2:] == [
        {"role": "assistant", "content": "I would now edit calc.py."},
        {"role": "user", "content": USE_A_TOOL},
    ]


def test_a_model_that_only_answers_in_text_ends_the_lap_with_an_error_early(repo: Path) -> None:
    with ScriptedServer(lambda body, index: text("I will implement mul now.")) as server:
        result = run_lap(repo, server.base_url)
    assert result.outcome == "error" and len(server.requests) == 3
    assert result.detail.startswith(
        f"the model called no tool in 3 replies: scripted at {server.base_url} (server: BaseHTTP"
    )
    assert "does not do tool calls" in result.detail
    assert [m["content"] for m in sent(server, 2)[-4:]] == ["I will implement mul now.", USE_A_TOOL] * 2


def test_three_format_errors_in_a_row_end_the_lap_with_error(repo: Path) -> None:
    script: list[Step] = [tool_call("bash", "{oops"), tool_call("python", {}), text(""), finish()]
    with ScriptedServer(script) as server:
        result = run_lap(repo, server.base_url)
    assert result.outcome == "error" and len(server.requests) == 3
    assert result.detail.startswith(
        "the model sent 3 malformed replies in a row; "
        "the last: format error: your reply had neither text nor a tool call"
    )


def test_a_usable_reply_resets_the_format_error_count(repo: Path) -> None:
    script: list[Step] = [
        tool_call("bash", "{oops"),
        text(""),
        bash("true"),
        tool_call("python", {}),
        text(""),
        finish(),
    ]
    with ScriptedServer(script) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assert len(server.requests) == 6


@pytest.mark.parametrize(
    "reply",
    [
        text("Here is the whole file: def mul(a, b):", finish_reason="length"),
        tool_call("bash", '{"command": "touch ran; echo lo', finish_reason="length"),
    ],
)
def test_a_cut_off_reply_runs_nothing_and_asks_for_brevity(repo: Path, reply) -> None:
    with ScriptedServer([reply, finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assert sent(server, 1)[-1]["content"] == CUT_OFF
    assert not (repo / "ran").exists()


@pytest.mark.parametrize(
    ("status", "headers", "waited"),
    [
        (429, {"Retry-After": "3"}, 3),
        (429, {"Retry-After": "1000"}, 120),
        (503, {"retry-after-ms": "2500"}, 2.5),
        (429, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0),  # a date passed: at once
        (400, {"x-should-retry": "true"}, None),
        (503, {"retry-after-ms": "nan"}, None),  # no wait that can be honoured: back off instead
        (503, {"Retry-After": "inf"}, None),
    ],
)
def test_a_retry_waits_as_the_server_hints(
    repo: Path, logs: Path, status: int, headers: dict, waited: float | None
) -> None:
    sleeps = Sleeps()
    with ScriptedServer([HttpError(status, headers=headers), finish()]) as server:
        result = run_lap(repo, server.base_url, sleeps=sleeps, timeout=600)
    assert (result.outcome, len(sleeps), len(server.requests)) == ("ok", 1, 2)
    assert sleeps[0] == waited if waited is not None else 0.5 <= sleeps[0] <= 1
    assert events(logs, "retry")[0]["error"] == f"HTTP {status}: scripted HTTP {status}"


def test_an_http_date_in_retry_after_is_waited_until(repo: Path) -> None:
    sleeps = Sleeps()
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    with ScriptedServer([HttpError(503, headers={"Retry-After": in_a_minute}), finish()]) as server:
        assert run_lap(repo, server.base_url, sleeps=sleeps, timeout=600).outcome == "ok"
    assert 55 <= sleeps[0] <= 61


def test_a_validation_error_is_not_retried_and_kept_whole(repo: Path, logs: Path) -> None:
    """A 500 whose body says the request is invalid fails the same way every time; the useful
    part of such a body is at its end, past where a one-line summary would cut it."""
    message = (
        "Traceback (most recent call last): " + "frame; " * 80 + "messages.3.content Input should be a valid string"
    )
    with ScriptedServer([HttpError(500, {"error": {"message": message}}), finish()]) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, len(server.requests)) == ("error", 1)
    summary = result.detail.splitlines()[0]
    assert len(summary) < 400 and summary.endswith("messages.3.content Input should be a valid string")
    assert message in result.detail and message in events(logs, "error")[0]["body"]


def test_x_should_retry_false_is_not_retried(repo: Path) -> None:
    with ScriptedServer([HttpError(503, headers={"x-should-retry": "false"}), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "error"
    assert len(server.requests) == 1


def test_a_retry_never_waits_past_the_lap_deadline(repo: Path) -> None:
    sleeps = Sleeps()
    with ScriptedServer([HttpError(429, headers={"Retry-After": "60"}), finish()]) as server:
        result = run_lap(repo, server.base_url, sleeps=sleeps, timeout=30)
    assert (result.outcome, sleeps, len(server.requests)) == ("error", [], 1)
    assert result.detail.splitlines()[0] == (
        f"model request to {server.base_url} failed: HTTP 429: scripted "
        "HTTP 429 (not retried: waiting 60s would pass the lap's deadline)"
    )


@pytest.mark.parametrize("status", [408, 409, 500, 503])
def test_transient_errors_back_off_then_succeed(repo: Path, status: int) -> None:
    sleeps = Sleeps()
    with ScriptedServer([HttpError(status), HttpError(status), finish()]) as server:
        assert run_lap(repo, server.base_url, sleeps=sleeps).outcome == "ok"
    assert len(server.requests) == 3
    assert 0.5 <= sleeps[0] <= 1 and 1 <= sleeps[1] <= 2  # exponential, with jitter


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_a_request_that_cannot_succeed_fails_at_once(repo: Path, status: int) -> None:
    sleeps = Sleeps()
    with ScriptedServer([HttpError(status, {"error": {"message": "no such luck"}}), finish()]) as server:
        result = run_lap(repo, server.base_url, sleeps=sleeps)
    assert (result.outcome, sleeps, len(server.requests)) == ("error", [], 1)
    hint = " ($OPENAI_API_KEY is not set)" if status in (401, 403) else ""
    assert (
        result.detail.splitlines()[0] == f"model request to {server.base_url} failed: HTTP {status}: no such luck{hint}"
    )


def test_a_proxy_error_page_is_quoted_and_a_non_completion_is_refused(repo: Path, logs: Path) -> None:
    page = "<html><body>502 Bad Gateway</body></html>"
    with ScriptedServer([HttpError(502, page), HttpError(200, "<html>Please log in</html>")]) as server:
        result = run_lap(repo, server.base_url)
    assert result.outcome == "error" and len(server.requests) == 2
    assert result.detail == (
        f"model request to {server.base_url} got an answer that is not a chat completion: '<html>Please log in</html>'"
    )
    assert events(logs, "retry")[0]["error"] == f"HTTP 502: {page}"


def test_an_endpoint_that_is_down_ends_the_lap_with_an_error_naming_it(repo: Path, logs: Path) -> None:
    sleeps, endpoint = Sleeps(), f"http://127.0.0.1:{closed_port()}/v1"
    result = run_lap(repo, endpoint, sleeps=sleeps)
    assert result.outcome == "error" and result.usage.requests == 0
    assert result.detail.splitlines()[0].startswith(
        f"model request to {endpoint} failed 5 times; last error: Connection error."
    )
    assert len(sleeps) == 4 and all(2**n / 2 <= wait <= 2**n for n, wait in enumerate(sleeps))
    assert len(events(logs, "retry")) == 4


def test_a_hang_ends_at_the_request_timeout_and_is_retried(repo: Path) -> None:
    sleeps, started = Sleeps(), time.monotonic()
    # (lenient: a strict server's one slot would hold the retry until the hung reply is done)
    with ScriptedServer([Hang(10, then=finish("too late")), finish("second try")], strict=False) as server:
        result = run_lap(repo, server.base_url, sleeps=sleeps, request_timeout=1)
    assert (result.outcome, result.summary, len(sleeps)) == ("ok", "second try", 1)
    assert 1 <= time.monotonic() - started < 4


def test_a_retry_waits_for_the_one_slot_a_hung_reply_still_holds(repo: Path) -> None:
    def script(body: dict, index: int):
        return Hang(2.5, then=finish("too late")) if index == 0 else finish("after the slot freed")

    started = time.monotonic()
    with ScriptedServer(script) as server:
        result = run_lap(repo, server.base_url, request_timeout=1)
    assert (result.outcome, result.summary) == ("ok", "after the slot freed")
    assert len(server.requests) >= 3 and time.monotonic() - started >= 2.5


def test_an_endpoint_that_always_hangs_ends_the_lap_with_an_error(repo: Path) -> None:
    with ScriptedServer(lambda body, index: Hang(10)) as server:
        result = run_lap(repo, server.base_url, request_timeout=0.4)
    assert result.outcome == "error" and len(server.requests) == 5
    assert result.detail == (
        f"model request to {server.base_url} failed 5 times; last error: "
        "no answer for 0.4 s (the endpoint may be down or stuck)"
    )


def test_the_lap_deadline_stops_the_agent_with_timeout(repo: Path) -> None:
    # 3 s: the first model call must leave the shell at least 1 s (under less, the agent is told to
    # finish instead), which a loaded CI machine did not within 1.5 s.
    started = time.monotonic()
    with ScriptedServer([bash("sleep 30"), finish()]) as server:
        result = run_lap(repo, server.base_url, timeout=3)
    assert (result.outcome, len(server.requests)) == ("timeout", 1)
    assert result.detail == "the lap's 3s ran out after 1 model calls"
    assert time.monotonic() - started < 8


def test_max_turns_reached_is_still_ok(repo: Path) -> None:
    with ScriptedServer(lambda body, index: bash(f"echo {index} >> turns.txt")) as server:
        result = run_lap(repo, server.base_url, max_turns=3)
    assert (result.outcome, result.detail) == ("ok", "max_turns reached (3 model calls) without finish")
    assert (repo / "turns.txt").read_text() == "0\n1\n2\n" and result.usage.requests == 3


def test_red_checks_at_finish_go_back_to_the_model(repo: Path, logs: Path) -> None:
    checked = []

    def check() -> str | None:
        checked.append(time.monotonic())
        return None if (repo / "fixed.txt").exists() else "check regressed: `test -f fixed.txt` (exit 1)"

    script: list[Step] = [finish("first try"), bash("touch fixed.txt"), finish("fixed")]
    with ScriptedServer(script) as server:
        result = run_lap(repo, server.base_url, check=check, fix_attempts=2)
    assert (result.outcome, result.summary, len(checked)) == ("ok", "fixed", 2)
    assert sent(server, 1)[-1]["content"] == (
        "Not finished: check regressed: `test -f fixed.txt` (exit 1)\nFix this, then call finish again."
    )
    assert [event["failure"] for event in events(logs, "check")] == [
        "check regressed: `test -f fixed.txt` (exit 1)",
        None,
    ]


@pytest.mark.parametrize(("fix_attempts", "requests"), [(0, 1), (1, 2)])
def test_fix_attempts_are_bounded(repo: Path, fix_attempts: int, requests: int) -> None:
    checked: list[int] = []

    def check() -> str:
        checked.append(1)
        return "still red"

    with ScriptedServer([finish("one"), finish("two")]) as server:
        result = run_lap(repo, server.base_url, fix_attempts=fix_attempts, check=check)
    assert (result.outcome, len(server.requests), len(checked)) == ("ok", requests, fix_attempts)


def test_calls_after_a_finish_that_failed_checks_are_answered_not_run(repo: Path) -> None:
    reply = tool_calls(call("finish", {"summary": "s", "status": "done"}), call("bash", {"command": "touch ran"}))
    with ScriptedServer([reply, finish()]) as server:
        run_lap(repo, server.base_url, check=lambda: "red")
    assert sent(server, 1)[-1]["content"] == "not run: it came after finish"
    assert not (repo / "ran").exists()


def test_blocked_is_ok_with_a_blocked_summary_and_no_checks(repo: Path) -> None:
    with ScriptedServer([finish("calc.py is missing a spec", status="blocked")]) as server:
        result = run_lap(repo, server.base_url, check=lambda: pytest.fail("checks ran for a blocked lap"))
    assert (result.outcome, result.summary) == ("ok", "blocked: calc.py is missing a spec")


def test_usage_is_estimated_when_the_server_reports_none(repo: Path, logs: Path) -> None:
    with ScriptedServer([bash("echo hi", usage=False), finish(usage=False)]) as server:
        result = run_lap(repo, server.base_url)
    estimates = [event["prompt_tokens"] for event in events(logs, "response")]
    assert result.usage.estimated and result.usage.requests == 2
    assert result.usage.prompt_tokens == sum(estimates) and 0 < estimates[0] < estimates[1]
    assert result.usage.completion_tokens > 0


def test_the_api_key_reaches_the_endpoint_but_not_the_tools_or_the_transcript(
    repo: Path, logs: Path, monkeypatch
) -> None:
    canary = "sk-canary-8d1f0c2e9b7a4c55"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    with ScriptedServer([bash("env; echo end"), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    assert server.requests[0].headers["authorization"] == f"Bearer {canary}"
    environment = sent(server, 1)[-1]["content"]
    assert "PATH=" in environment and canary not in environment
    for log in logs.iterdir():
        assert canary not in log.read_text(), log


def test_the_config_selects_this_agent() -> None:
    agent = make_agent(AgentConfig(kind="openai", model="any", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(agent, OpenAIAgent) and agent.kind == "openai"


def test_every_transcript_record_carries_its_format_and_a_newer_one_is_named(repo: Path, logs: Path) -> None:
    with ScriptedServer([bash("echo hi"), finish()]) as server:
        assert run_lap(repo, server.base_url).outcome == "ok"
    records = transcript.read(logs / "transcript.jsonl")
    assert records[0]["event"] == "start" and records[0]["role"] == "lap" and records[-1]["event"] == "end"
    assert {record["format"] for record in records} == {transcript.FORMAT}

    older = logs / "older.jsonl"  # written before transcripts had a format: read as it is
    older.write_text('{"event": "start", "time": 1}\n{"event": "end", "time": 2}\n')
    assert [record["event"] for record in transcript.read(older)] == ["start", "end"]
    newer = logs / "newer.jsonl"
    newer.write_text(json.dumps({"format": transcript.FORMAT + 1, "event": "start"}) + "\n")
    with pytest.raises(RalphError, match=f"newer.jsonl is a transcript of format {transcript.FORMAT + 1}, newer"):
        transcript.read(newer)
