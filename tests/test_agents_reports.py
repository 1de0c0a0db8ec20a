"""What agent CLIs print, as their documentation shows it, read for tokens, cost, the summary,
a usage limit and its reset."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from ralph.agents import reports
from ralph.agents.limited import limit_hit, reset_at
from ralph.agents.presets import PRESETS
from ralph.agents.reports import read

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
