"""The built-in agent's replies streamed: a slow server told from a dead one, servers that will
not stream, and what the scripted server sends (OpenAI's wire format, read by the real client).
The real `openai` client over real HTTP to the scripted server; retries' waits are recorded."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path
from typing import Any, cast

import openai
import pytest
from helpers.repos import make_repo

from ralph.agents.base import LapTask
from ralph.agents.openai import OpenAIAgent
from ralph.agents.retry import StreamBroken
from ralph.agents.scripted import (
    Hang,
    HttpError,
    Raw,
    Reply,
    ScriptedServer,
    Step,
    bash,
    call,
    finish,
    text,
    tool_calls,
)
from ralph.agents.tools import TOOL_SCHEMAS
from ralph.config.agent import AgentConfig
from ralph.isolation import proc


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})


def agent(base_url: str, **config: Any) -> OpenAIAgent:
    return OpenAIAgent(AgentConfig(kind="openai", model="scripted", base_url=base_url, **config), sleep=lambda _: None)


def run_lap(repo: Path, base_url: str, *, timeout: float = 60, chosen: OpenAIAgent | None = None, **config: Any):
    log_dir = repo.parent / "logs"
    log_dir.mkdir(exist_ok=True)
    task = LapTask("run", 1, repo, "Do the job.", timeout, log_dir, proc.clean_env())
    return (chosen or agent(base_url, **config)).run_lap(task)


def records(repo: Path, kind: str) -> list[dict]:
    lines = (repo.parent / "logs" / "transcript.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if record["event"] == kind]


def slow(reply: Reply, pace: float) -> Reply:
    return dataclasses.replace(reply, pace=pace)


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


def test_a_slow_reply_that_keeps_coming_is_not_cut_by_the_request_timeout(repo: Path) -> None:
    """The issue: a CPU server's long reply outlasted request_timeout and counted as an outage."""
    started = time.monotonic()
    with ScriptedServer([slow(text(words(30)), 0.05), slow(bash("echo streamed"), 0.05), finish("ok")]) as server:
        result = run_lap(repo, server.base_url, request_timeout=0.5)
    assert (result.outcome, result.summary, result.endpoint_failed) == ("ok", "ok", False)
    assert time.monotonic() - started > 1.5  # each of the first two replies took longer than request_timeout
    body = server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    responses = records(repo, "response")
    assert responses[0]["chunks"] > 30 and not responses[0]["estimated"]  # the usage came in the stream
    assert responses[0]["body"]["choices"][0]["message"]["content"] == words(30)
    assert server.requests[2].body["messages"][-1]["content"] == "streamed\n[exit code 0]"


def test_a_reply_still_coming_when_the_lap_time_runs_out_is_a_slow_server_not_an_outage(repo: Path) -> None:
    with ScriptedServer([slow(text(words(200)), 0.05)]) as server:
        result = run_lap(repo, server.base_url, timeout=2, request_timeout=0.5)
    assert (result.outcome, result.endpoint_failed) == ("timeout", False)
    assert result.detail.startswith("the lap's 2s ran out in model call 1 with the model still answering after 2 s")
    rate = re.search(r" at about (\d+(?:\.\d)?) tokens/s — a slow server, not a dead one", result.detail)
    assert rate is not None and 1 <= float(rate[1]) <= 60  # 20 a second as sent; a loaded machine reads unevenly
    assert "docs/agents.md: Slow servers" in result.detail
    (said,) = records(repo, "slow")
    assert said["completion_tokens"] > 20  # what it wrote was spent: counted, as an estimate
    assert result.usage.requests == 1 and result.usage.completion_tokens == said["completion_tokens"]
    assert result.usage.estimated


def test_silence_is_an_endpoint_down_or_stuck_and_says_how_long(repo: Path) -> None:
    with ScriptedServer(lambda body, index: Hang(10)) as server:
        result = run_lap(repo, server.base_url, request_timeout=0.3)
    assert (result.outcome, result.endpoint_failed, len(server.requests)) == ("error", True, 5)
    assert result.detail == (
        f"model request to {server.base_url} failed 5 times; last error: "
        "no answer for 0.3 s (the endpoint may be down or stuck)"
    )
    assert [retry["error"] for retry in records(repo, "retry")] == [
        "no answer for 0.3 s (the endpoint may be down or stuck)"
    ] * 4


def test_a_stream_that_falls_silent_mid_reply_is_asked_again(repo: Path) -> None:
    stalled = dataclasses.replace(bash("touch half"), stall=(6, 5))  # lenient: the stalled reply's slot stays busy
    with ScriptedServer([stalled, bash("touch whole"), finish("ok")], strict=False) as server:
        result = run_lap(repo, server.base_url, request_timeout=0.4)
    assert (result.outcome, result.summary) == ("ok", "ok")
    assert (repo / "whole").exists() and not (repo / "half").exists()
    (retry,) = records(repo, "retry")
    assert retry["error"].startswith("no answer for 0.4 s (the endpoint may be down or stuck), about ")
    assert retry["error"].endswith(" tokens into its reply")


def test_a_stream_closed_before_its_end_is_asked_again(repo: Path) -> None:
    cut = dataclasses.replace(bash("touch half"), stall=(6, 0))  # closed at once after six chunks
    with ScriptedServer([cut, finish("ok")]) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, result.summary, len(server.requests)) == ("ok", "ok", 2)
    (retry,) = records(repo, "retry")
    assert retry["error"].startswith("the connection closed after about ")


def test_keep_alives_while_a_long_prompt_is_read_count_as_an_answer(repo: Path) -> None:
    """A recent llama-server says `: ping` every 30 s while it reads a prompt (--sse-ping-interval)."""
    with ScriptedServer([Hang(1.5, then=finish("after reading"), ping=0.2)]) as server:
        result = run_lap(repo, server.base_url, request_timeout=0.5)
    assert (result.outcome, result.summary, len(server.requests)) == ("ok", "after reading", 1)


def test_a_lap_that_ends_while_only_keep_alives_came_says_the_prompt_was_still_read(repo: Path) -> None:
    with ScriptedServer([Hang(10, then=finish(), ping=0.2)]) as server:
        result = run_lap(repo, server.base_url, timeout=1.5, request_timeout=0.5)
    assert result.outcome == "timeout"
    assert re.search(r"still answering after \d s at about 0\.0 tokens/s \(nothing but keep-alives yet", result.detail)


def test_a_server_that_cannot_stream_with_tools_is_asked_in_one_piece_once_refused(repo: Path) -> None:
    """llama-server before May 2025: HTTP 500 "Cannot use tools with stream"; asked again at once,
    and the rest of the conversation is not streamed."""
    with ScriptedServer([bash("echo one piece"), finish("ok")], streams=False) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, result.summary) == ("ok", "ok")
    assert len(server.refused) == 1 and server.refused[0].body["stream"] is True
    assert ["stream" in request.body for request in server.requests] == [False, False]
    assert server.requests[1].body["messages"][-1]["content"] == "one piece\n[exit code 0]"
    assert [record["chunks"] for record in records(repo, "response")] == [None, None]
    assert records(repo, "retry") == []  # a refusal of streaming is no failure to wait out


def test_a_server_that_refuses_stream_options_is_asked_without_them(repo: Path) -> None:
    with ScriptedServer([bash("true"), finish("ok")], stream_options=False) as server:
        result = run_lap(repo, server.base_url)
    assert result.outcome == "ok" and len(server.refused) == 1
    assert [(request.body["stream"], "stream_options" in request.body) for request in server.requests] == [
        (True, False),
        (True, False),
    ]
    assert result.usage.estimated  # no usage in a stream not asked for it: estimated, as for servers without


def test_a_slow_server_that_does_not_stream_says_that_it_cannot_tell(repo: Path) -> None:
    with ScriptedServer(lambda body, index: slow(text(words(40)), 0.05), streams=False, strict=False) as server:
        result = run_lap(repo, server.base_url, request_timeout=0.3)
    assert (result.outcome, result.endpoint_failed) == ("error", True)
    assert result.detail.endswith(
        "no answer for 0.3 s (the endpoint may be down or stuck); it does not stream, so a reply slower "
        "than that looks the same (docs/agents.md: Slow servers)"
    )


def test_an_error_the_server_sends_inside_its_stream_fails_the_request_naming_it(repo: Path) -> None:
    error = HttpError(500, {"error": {"message": "the slot's context is full", "type": "server_error"}})
    with ScriptedServer([Hang(0.2, then=error, ping=0.1)]) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, result.endpoint_failed, len(server.requests)) == ("error", True, 1)
    assert result.detail.startswith(
        f"model request to {server.base_url} failed: the server sent an error before the reply began: "
        "the slot's context is full"
    )


def test_cached_prompt_tokens_are_counted_from_usage_or_llama_cpp_timings(repo: Path) -> None:
    script: list[Step] = [
        dataclasses.replace(bash("true"), cached_tokens=120),
        dataclasses.replace(bash("true"), usage=False, extra={"timings": {"cache_n": 30, "prompt_n": 4}}),
        dataclasses.replace(finish("ok"), extra={"timings": {"cache_n": 7}}),  # usage's cached_tokens first
    ]
    with ScriptedServer(script) as server:
        result = run_lap(repo, server.base_url)
    assert [record["cached_tokens"] for record in records(repo, "response")] == [120, 30, 7]
    assert result.usage.cached_tokens == 157 and result.usage.cached_tokens < result.usage.prompt_tokens


def test_the_endpoint_checks_tokens_count_in_the_first_lap_not_its_requests(repo: Path) -> None:
    chosen = None
    with ScriptedServer([finish("one"), finish("two")]) as server:
        chosen = agent(server.base_url)
        chosen.check_endpoint(time.monotonic() + 30)
        first = run_lap(repo, server.base_url, chosen=chosen)
        (checked,) = records(repo, "endpoint_check")
        second = run_lap(repo, server.base_url, chosen=chosen)
    assert len(server.preflights) == 1 and checked["usage"]["prompt_tokens"] > 0
    responses = records(repo, "response")  # both laps' (the same folder)
    lap_prompt = [record["prompt_tokens"] for record in responses]
    assert first.usage.requests == second.usage.requests == 1
    assert first.usage.prompt_tokens == lap_prompt[0] + checked["usage"]["prompt_tokens"]
    assert second.usage.prompt_tokens == lap_prompt[1]  # counted once
    assert first.usage.largest_prompt_tokens == lap_prompt[0]


def test_the_scripted_server_streams_what_the_openai_client_reads() -> None:
    """Faithful to the wire format: the SDK's own typed stream reads it, usage last, without choices;
    and a request that does not ask to stream gets one JSON completion, as before."""
    reply = tool_calls(call("bash", {"command": "ls -l"}, call_id="c1"), call("finish", {"summary": "s"}), content="hm")
    messages: Any = [{"role": "user", "content": "go"}]
    with (
        ScriptedServer([reply, reply]) as server,
        openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client,
    ):
        chunks = list(
            client.chat.completions.create(
                model="m",
                messages=messages,
                tools=cast(Any, TOOL_SCHEMAS),
                tool_choice="auto",
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        whole = client.chat.completions.create(
            model="m", messages=messages, tools=cast(Any, TOOL_SCHEMAS), tool_choice="auto"
        )
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    *parts, last = chunks
    assert last.choices == [] and last.usage is not None and last.usage.completion_tokens > 0
    assert "".join(part.choices[0].delta.content or "" for part in parts) == "hm"
    arguments: dict[int, str] = {}
    for part in parts:
        for piece in part.choices[0].delta.tool_calls or []:
            arguments[piece.index] = arguments.get(piece.index, "") + (piece.function.arguments or "")  # type: ignore[union-attr]
    assert [json.loads(arguments[index]) for index in sorted(arguments)] == [{"command": "ls -l"}, {"summary": "s"}]
    assert parts[-1].choices[0].finish_reason == "tool_calls"
    assert whole.object == "chat.completion" and whole.choices[0].message.tool_calls is not None


def test_a_stream_from_a_less_tidy_server_is_put_together_as_sent() -> None:
    """What servers other than OpenAI send: calls without an index, a name or an id sent again with
    every piece, arguments as an object (text pieces after it, even "", are dropped), reasoning
    under either name, events without the blank line between them, keep-alive comments, fields of
    their own beside the choices."""
    from ralph.agents import stream

    def data(delta: dict, finish_reason: str | None = None) -> str:
        return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    lines = [
        ": ping",
        data({"role": "assistant", "reasoning_content": "think", "reasoning": "think"}),
        "",
        data({"tool_calls": [{"id": "a", "function": {"name": "bash", "arguments": '{"comm'}}]}),
        data({"tool_calls": [{"function": {"name": "bash", "arguments": 'and": "ls"}'}}]}),  # no blank line before
        "",
        data({"tool_calls": [{"id": "b", "function": {"name": "finish", "arguments": {"summary": "s"}}}]}),
        "",
        data({"tool_calls": [{"function": {"arguments": ""}}]}),  # an object is whole: a text piece cannot extend it
        "",
        data({"tool_calls": [{"id": "b", "function": {"name": "finish", "arguments": " "}}]}),  # its id again: still it
        "",
        data({}, "tool_calls"),
        "",
        'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}, "timings": {"cache_n": 3}}',
        "",
        "data: [DONE]",
        "",
        data({"content": "after the end"}),
    ]
    reading = stream.Reading(started=time.monotonic(), deadline=time.monotonic() + 60, silence=5)
    body = reading.read(iter(lines)).body()
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["reasoning_content"] == "think"
    assert choice["message"]["tool_calls"] == [
        {"id": "a", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
        {"id": "b", "type": "function", "function": {"name": "finish", "arguments": '{"summary": "s"}'}},
    ]
    assert body["usage"]["completion_tokens"] == 4 and body["timings"] == {"cache_n": 3}

    cut_short = lines[:6]  # the connection closed before the reply's end: asked again, not taken as done
    with pytest.raises(StreamBroken, match="the connection closed after about 3 tokens"):
        stream.Reading(started=time.monotonic(), deadline=time.monotonic() + 60, silence=5).read(iter(cut_short))


def sse(*events: dict | str, end: str = "\n", done: bool = True) -> bytes:
    """An event stream as a server writes it: each event a `data:` line (a string: the line as it
    is) and a blank line, `end` between lines."""
    lines = [event if isinstance(event, str) else "data: " + json.dumps(event) for event in events]
    lines += ["data: [DONE]"] if done else []
    return "".join(line + end + end for line in lines).encode()


def delta(content: dict | None, finish_reason: str | None = None, **choice: Any) -> dict:
    return {"choices": [{"index": 0, "delta": content, "finish_reason": finish_reason, **choice}]}


def call_piece(arguments: object, **piece: Any) -> dict:
    return delta({"tool_calls": [{**piece, "function": {"name": "bash", "arguments": arguments}}]})


UNTIDY = [  # odd but possible: each still a reply to read, and it runs `touch ran`
    sse(  # CRLF line ends, comments and SSE fields, no [DONE], usage only in a last chunk
        ": hello",
        "event: message",
        "id: 1",
        call_piece('{"command": ', index=0, id="c1"),
        call_piece('"touch ran"}', index=0),
        delta({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
        end="\r\n",
        done=False,
    ),
    sse(  # chunks without choices, a null delta, pieces without an index, a finish_reason alone
        {"id": "x"},
        delta(None),
        {"choices": None},
        "data: this is not JSON",
        "data: " + "[" * 5000 + "]" * 5000,  # nested past Python's recursion limit
        call_piece({"command": "touch ran"}, id="c1"),
        call_piece(""),  # a text piece after an object: dropped
        {"choices": [{"finish_reason": "tool_calls"}]},
    ),
    sse(  # a very long line before the call, and the call's arguments in one object
        delta({"content": "x" * 2_000_000}),
        call_piece({"command": "touch ran"}, index=0),
        delta({}, "tool_calls"),
    ),
]


@pytest.mark.parametrize("stream_body", UNTIDY, ids=["crlf-no-done", "missing-parts", "long-line"])
def test_an_untidy_stream_is_read_as_the_reply_it_is(repo: Path, stream_body: bytes) -> None:
    with ScriptedServer([Raw(stream_body), finish("ok")]) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, result.summary) == ("ok", "ok")
    assert (repo / "ran").exists() and records(repo, "retry") == []


BROKEN = [  # a stream that cannot be read: the endpoint's problem, named in its first line
    (
        Raw(b"data: \x1f\x8b not really gzip\n\n", headers={"Content-Encoding": "gzip"}),
        "failed 5 times; last error: the connection broke before the reply began (",
    ),
    (Raw(sse("data: {", ": only a comment", done=False)), "failed 5 times; last error: the connection closed before"),
    (Raw(sse({"error": {"message": "out of\nmemory"}})), "failed: the server sent an error before the reply began: "),
    (Raw(b'{"choices": ' * 3000, content_type="application/json"), "got an answer that is not a chat completion"),
]


@pytest.mark.parametrize(("step", "said"), BROKEN, ids=["undecodable", "never-ends", "error-event", "deep-json"])
def test_a_stream_that_cannot_be_read_ends_the_lap_as_the_endpoints_failure_in_one_line(
    repo: Path, step: Raw, said: str
) -> None:
    with ScriptedServer(lambda body, index: step) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, result.endpoint_failed) == ("error", True)
    first = result.detail.splitlines()[0]  # what the lap's note and `ralph log` keep
    assert first.startswith(f"model request to {server.base_url} ") and said in first, first
    if "sent an error" in said:
        assert first.endswith("the server sent an error before the reply began: out of memory")


def test_a_character_split_over_two_chunks_is_put_back_together(repo: Path) -> None:
    """A pair of JSON escapes for one character (a server that escapes non-ASCII) sent in two
    chunks: the next request carries the character, not two halves no request can encode."""
    split = sse(delta({"content": "smile \ud83d"}), delta({"content": "\ude00 \ud800"}), delta({}, "stop"))
    with ScriptedServer([Raw(split), finish("ok")]) as server:
        result = run_lap(repo, server.base_url)
    assert result.outcome == "ok"
    assert server.requests[1].body["messages"][2] == {"role": "assistant", "content": "smile \U0001f600 ?"}


@pytest.mark.parametrize("streams", [True, False], ids=["streamed", "in-one-piece"])
def test_silence_the_lap_time_cut_short_of_request_timeout_is_out_of_time_not_an_outage(
    repo: Path, streams: bool
) -> None:
    """A CPU server reading a long prompt when 1.5 s of the lap are left, with request_timeout 30:
    the lap's time ran out, not the endpoint."""
    with ScriptedServer([Hang(10, then=finish())], streams=streams) as server:
        result = run_lap(repo, server.base_url, timeout=1.5, request_timeout=30)
    assert (result.outcome, result.endpoint_failed, len(server.requests)) == ("timeout", False, 1)
    assert re.fullmatch(
        r"the lap's 1\.5s ran out in model call 1 before the server answered \(silent for \d\.\d s, less than "
        r"agent\.request_timeout's 30 s: too soon to tell a slow server, one still reading a long prompt, from a "
        r"dead one\) — give it more time \(docs/agents\.md: Slow servers\)",
        result.detail,
    ), result.detail
    (said,) = records(repo, "slow")
    assert said["error"].startswith("not answering yet after ") and records(repo, "retry") == []


def test_a_request_silent_for_request_timeout_is_an_outage_though_the_retry_runs_out_of_time(repo: Path) -> None:
    """Silent for the whole request_timeout, then again with less than that left (the test's
    retries do not wait their backoff out; the first is at most 1 s, which must fit): what the
    endpoint did first is what the lap says."""
    with ScriptedServer(lambda body, index: Hang(10), strict=False) as server:
        # 3 s silent, the retry by 4 s (its backoff at most 1 s) with 2 s left: room for a busy machine
        result = run_lap(repo, server.base_url, timeout=6, request_timeout=3)
    assert (result.outcome, result.endpoint_failed, len(server.requests)) == ("error", True, 2)
    assert result.detail == (
        f"model request to {server.base_url} failed once, then ran out of time before it answered again; "
        "last error: no answer for 3 s (the endpoint may be down or stuck)"
    )
