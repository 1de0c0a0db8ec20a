"""What agent CLIs print, as their documentation shows it, read for tokens, cost, the summary,
a usage limit and its reset."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from ralph.agents import reports
from ralph.agents.limited import limit_hit, reset_at
from ralph.agents.reports import read
from ralph.facts.presets import PRESETS

NOW = datetime(2026, 11, 30, 14, 0, 0).astimezone()


def lines(*objects: dict) -> str:
    return "".join(json.dumps(found) + "\n" for found in objects)


def test_claude_code_json_result():
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "result": "API Error: Rate limit reached",
        "num_turns": 2,
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3},
    }
    report = read("claude-json", "some log line\n" + lines(result))
    assert report.failed and report.summary == "API Error: Rate limit reached"
    assert (report.usage.requests, report.usage.prompt_tokens, report.usage.completion_tokens) == (2, 15, 3)
    assert report.usage.cost_usd == 0.0123
    assert read("claude-json", "not json at all").usage.requests == 0


def test_codex_exec_json_events():
    output = lines(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "changed calc.py"}},
        {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 60, "output_tokens": 9}},
        {"type": "turn.completed", "usage": {"input_tokens": 50, "output_tokens": 1}},
    )
    report = read("codex-jsonl", output)
    assert report.summary == "changed calc.py" and report.usage.cost_usd is None  # codex tells no cost
    assert (report.usage.requests, report.usage.prompt_tokens, report.usage.completion_tokens) == (2, 150, 10)


def test_gemini_json_and_opencode_events_and_aider_text():
    gemini = {
        "response": "done",
        "stats": {
            "models": {"gemini-2.5-pro": {"tokens": {"prompt": 40, "candidates": 4}, "api": {"totalRequests": 3}}}
        },
    }
    report = read("gemini-json", "Loaded cached credentials.\n" + json.dumps(gemini, indent=2))
    assert (report.summary, report.usage.prompt_tokens, report.usage.completion_tokens, report.usage.requests) == (
        "done",
        40,
        4,
        3,
    )
    assert read("gemini-json", json.dumps({"response": "", "error": {"message": "x"}})).failed

    step = {"tokens": {"input": 10, "output": 2, "reasoning": 1, "cache": {"read": 5, "write": 0}}, "cost": 0.5}
    opencode = lines(
        {"type": "text", "part": {"text": "editing"}},
        {"type": "step_finish", "part": step},
        {"type": "step_finish", "part": dict(step, cost=0.25)},
    )
    report = read("opencode-jsonl", opencode)
    assert (report.summary, report.usage.prompt_tokens, report.usage.completion_tokens) == ("editing", 30, 6)
    assert report.usage.cost_usd == 0.75
    unknown = lines({"type": "step_finish", "part": {"tokens": {"input": 1}}})
    assert read("opencode-jsonl", unknown).usage.cost_usd is None  # a step without its cost: the lap's is unknown

    aider = "Tokens: 12k sent, 340 received. Cost: $0.04 message, $0.09 session.\nApplied edit to calc.py\n"
    assert read("aider-text", aider).usage.cost_usd == 0.09
    assert read("text", aider).usage.cost_usd is None


@pytest.mark.parametrize(
    "said, resets",
    [
        (f"Claude AI usage limit reached|{int(NOW.timestamp()) + 3600}", NOW + timedelta(hours=1)),
        ("Claude AI usage limit reached|1750708800", None),  # already past: no reset to wait for
        ("rate limit reached, try again in 100000000 hours", None),  # past any date: none either
        ("You've hit your limit · resets 4:99am", None),
        ("You've hit your limit · resets 4:50am (Europe/Rome)", NOW.replace(hour=4, minute=50) + timedelta(days=1)),
        ("You've hit your usage limit. … or try again at 3:28 PM.", NOW.replace(hour=15, minute=28)),
        ("[API Error: … Your quota will reset after 2h52m39s.]", NOW + timedelta(hours=2, minutes=52, seconds=39)),
        ("rate limited [retrying in 2h 45m attempt #1]", NOW + timedelta(hours=2, minutes=45)),
        ("Retrying in 2.0 seconds...", NOW + timedelta(seconds=2)),
        ("The API provider has rate limited you. Try again later or check your quotas.", None),
    ],
)
def test_when_a_limit_resets(said: str, resets: datetime | None):
    assert reset_at(said, NOW) == resets


def test_each_presets_limit_messages_are_recognised_and_ordinary_output_is_not():
    said = {
        "claude": "You've hit your session limit · resets 3:50pm (Asia/Tokyo)",
        "codex": "You've hit your usage limit. Upgrade to Pro",
        "aider": "litellm.RateLimitError: The API provider has rate limited you.",
        "gemini": "[API Error: You have exhausted your capacity on this model.]",
        "opencode": "429 Too Many Requests: rate limit exceeded",
        "goose": "Error: rate limit exceeded",
        "mini-swe-agent": "litellm.RateLimitError: OpenAIException",
    }
    for name, preset in PRESETS.items():
        assert limit_hit("working…\n" + said[name], list(preset.limits)), name
        assert not limit_hit("added a rate limiter to the API client; tests pass", list(preset.limits)), name


def test_a_log_longer_than_what_is_read_keeps_its_final_result_and_counts_no_partial_sum(tmp_path, monkeypatch):
    monkeypatch.setattr(reports, "LOG_CAP", 2000)
    log = tmp_path / "agent.log"
    step = {"type": "step_finish", "part": {"tokens": {"input": 1}, "cost": 0.5}}
    log.write_text(lines(*[step] * 100))
    assert reports.read_log("opencode-jsonl", log).usage.cost_usd is None  # a sum of its end would be too low
    result = {"type": "result", "result": "done", "total_cost_usd": 1.5, "usage": {"output_tokens": 2}}
    log.write_text("x" * 10_000 + "\n" + lines(result))
    assert reports.read_log("claude-json", log).usage.cost_usd == 1.5


def test_claudes_model_usage_counts_every_model_the_lap_called():
    """`usage` leaves out the small model's title request; `modelUsage` has both."""
    result = {
        "type": "result",
        "is_error": False,
        "result": "ok",
        "num_turns": 2,
        "total_cost_usd": 0,
        "usage": {"input_tokens": 2468, "output_tokens": 112},
        "modelUsage": {
            "claude-sonnet": {"inputTokens": 2400, "cacheReadInputTokens": 68, "outputTokens": 112, "costUSD": 0},
            "claude-haiku": {"inputTokens": 1234, "outputTokens": 56, "costUSD": 0},
        },
    }
    usage = read("claude-json", lines(result)).usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (3702, 168)
    assert usage.cost_usd is None  # $0 for 3,870 tokens: a model the tool has no price for


def test_geminis_json_is_found_among_stderr_lines_before_and_after_it():
    said = {"response": "done", "stats": {"models": {"m": {"tokens": {"prompt": 7, "candidates": 2}}}}}
    output = (
        "[WARN] {braces} in a log line\n"
        + json.dumps(said, indent=2)
        + '\n{"not": "the result"}\nError flushing telemetry {x}\n'
    )
    report = read("gemini-json", output)
    assert (report.summary, report.usage.prompt_tokens, report.usage.completion_tokens) == ("done", 7, 2)
    assert read("gemini-json", "{" * 100_000).usage.prompt_tokens == 0  # nested past Python: nothing, no crash


def test_opencodes_free_step_for_tokens_spent_makes_the_laps_cost_unknown():
    priced = {"tokens": {"input": 10, "output": 2}, "cost": 0.5}
    title = {"tokens": {"input": 30, "output": 5}, "cost": 0}  # a provider of the user's, no price known
    assert read("opencode-jsonl", lines({"type": "step_finish", "part": priced})).usage.cost_usd == 0.5
    both = lines({"type": "step_finish", "part": priced}, {"type": "step_finish", "part": title})
    assert read("opencode-jsonl", both).usage.cost_usd is None
    nothing = {"tokens": {"input": 0, "output": 0}, "cost": 0}  # no tokens: truly free
    assert read("opencode-jsonl", lines({"type": "step_finish", "part": nothing})).usage.cost_usd == 0


def test_codex_requests_are_counted_in_its_sessions_own_log(tmp_path):
    thread = "0199a0c2-5d1e-7a30-b2f4-9c1d2e3f4a5b"
    day = tmp_path / "sessions" / "2026" / "12" / "06"
    day.mkdir(parents=True)
    record = {"type": "token_usage_record", "payload": {"usage": {"input_tokens": 1}}}
    (day / f"rollout-2026-12-06T10-00-00-{thread}.jsonl").write_text(lines(record, {"type": "event_msg"}, record))
    assert read("codex-jsonl", lines({"type": "thread.started", "thread_id": thread})).session == thread
    assert reports.codex_requests(tmp_path, thread) == 2
    assert reports.codex_requests(tmp_path, "0199a0c2-0000-0000-0000-000000000000") is None
    assert reports.codex_requests(tmp_path, "../../etc") is None  # an id is no path


def test_aiders_analytics_log_gives_each_answers_tokens_and_a_rate_limit_it_gave_up_on_failed_it():
    said = {"prompt_tokens": 52940, "completion_tokens": 7, "cost": 0.01}
    sent = {"event": "message_send", "properties": said}
    report = read("aider-text", "Tokens: 53k sent, 7 received.\n", lines({"event": "launched"}, sent, sent))
    assert (report.usage.requests, report.usage.prompt_tokens, report.usage.completion_tokens) == (2, 105880, 14)
    assert report.usage.cost_usd == 0.02 and not report.failed
    unpriced = {"event": "message_send", "properties": dict(said, cost=0)}
    assert read("aider-text", "", lines(unpriced)).usage.cost_usd is None
    gave_up = "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached\nRetrying in 32.0 seconds\n"
    assert read("aider-text", "Tokens: 1k sent, 3 received.\n" + gave_up).failed  # exited 0 all the same
    assert not read("aider-text", gave_up + "Tokens: 1k sent, 3 received.\nApplied edit to x.py\n").failed
    assert read("aider-text", "litellm.BadRequestError: OpenAIException - invalid key\n").failed


def test_mini_swe_agents_trajectory_gives_its_requests_tokens_and_cost():
    trajectory = {
        "info": {"model_stats": {"api_calls": 2, "instance_cost": 0.5}, "submission": "ticked it"},
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "extra": {"response": {"usage": {"prompt_tokens": 100, "completion_tokens": 5}}}},
            {"role": "assistant", "extra": {"response": {"usage": {"prompt_tokens": 120, "completion_tokens": 6}}}},
        ],
    }
    report = read("mini-trajectory", "whatever it printed", json.dumps(trajectory))
    assert (report.usage.requests, report.usage.prompt_tokens, report.usage.completion_tokens) == (2, 220, 11)
    assert (report.usage.cost_usd, report.summary) == (0.5, "ticked it")
    unpriced = dict(trajectory, info={"model_stats": {"api_calls": 2, "instance_cost": 0.0}})
    assert read("mini-trajectory", "", json.dumps(unpriced)).usage.cost_usd is None
    assert read("mini-trajectory", "", "[1, 2") == reports.Report()
