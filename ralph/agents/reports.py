"""What agent CLIs report of a lap in their machine-readable output, or in a report file of
their own the preset asks for ($RALPH_REPORT_FILE): tokens, requests, cost in USD, the summary,
and whether they failed although they exited 0. What a tool does not report stays unknown:
ralph never estimates another tool's tokens or cost."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ralph.agents.base import Usage
from ralph.agents.replies import is_count


@dataclass
class Report:
    usage: Usage = field(default_factory=Usage)
    summary: str | None = None  # None: the output's last line says it
    failed: bool = False  # the tool said it failed (Claude Code's is_error) whatever its exit code
    session: str | None = None  # the tool's id for the lap's session (codex's thread), where it keeps its own log


LOG_CAP = 32 << 20  # bytes of an agent's log read for its report: the end, where the tools put it
SUMMED = ("codex-jsonl", "opencode-jsonl")  # reports added up over the whole output


def read_log(kind: str, log: Path, kept: Path | None = None) -> Report:
    """`read` on an agent's log and the report file it `kept`; of a log longer than LOG_CAP, its
    end, and then a report that adds up every step counts nothing (what was cut would be missing)."""
    with open(log, "rb") as spilled:
        size = spilled.seek(0, os.SEEK_END)
        spilled.seek(max(0, size - LOG_CAP))
        output = spilled.read().decode("utf-8", "replace")
    report = read(kind, output, _text(kept))
    if size > LOG_CAP and kind in SUMMED:
        report.usage = Usage()
    return report


def _text(path: Path | None) -> str:
    """A tool's report file, if it wrote one: a regular file, opened without following a link and
    without waiting on a FIFO (the lap wrote it), its first LOG_CAP bytes."""
    if path is None:
        return ""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(descriptor, "rb") as kept:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return ""
        return kept.read(LOG_CAP).decode("utf-8", "replace")


def read(kind: str, output: str, kept: str = "") -> Report:
    """The report of a tool's `output` (its stdout and stderr) and of the report file it `kept`."""
    if kind == "aider-text":
        return _aider(output, kept)
    if kind == "mini-trajectory":
        return _mini(kept)
    reader = {
        "claude-json": _claude,
        "codex-jsonl": _codex,
        "gemini-json": _gemini,
        "opencode-jsonl": _opencode,
    }.get(kind)
    return reader(output) if reader else Report()


def _objects(output: str) -> Iterator[dict]:
    """Each line of the output that is a JSON object, in order."""
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: nested deep on purpose
                continue
            if isinstance(found, dict):
                yield found


def _count(mapping: object, *names: str) -> int:
    """The sum of the token counts `mapping` holds under `names` (base.is_count)."""
    if not isinstance(mapping, dict):
        return 0
    return sum(value for name in names if is_count(value := mapping.get(name)))


def _cost(value: object, spent: int = 0) -> float | None:
    """A cost as reported: a finite number of dollars, not negative; anything else is unknown. So
    is $0 for tokens or requests `spent`: what a tool says of a model it has no price for
    (opencode, a provider of the user's), and a max_cost_usd must never take it for free."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e9:
        return None
    return None if value == 0 and spent > 0 else float(value)


def _claude(output: str) -> Report:
    """`claude -p --output-format json`: one result object at the end. Its `modelUsage` counts every
    model the lap called (the small one that titles the session too); `usage`, the main loop's only."""
    result = next((found for found in reversed(list(_objects(output))) if found.get("type") == "result"), None)
    if result is None:
        return Report()
    models = result.get("modelUsage")
    models = [model for model in models.values() if isinstance(model, dict)] if isinstance(models, dict) else []
    if models:
        prompt = sum(
            _count(model, "inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens") for model in models
        )
        completion = sum(_count(model, "outputTokens") for model in models)
    else:
        usage = result.get("usage")
        prompt = _count(usage, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        completion = _count(usage, "output_tokens")
    turns = result.get("num_turns")
    return Report(
        Usage(
            # Its turns, each a request; none when no token was spent (not logged in, say).
            requests=(turns if isinstance(turns, int) and turns > 0 else 1) if prompt + completion else 0,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=_cost(result.get("total_cost_usd"), prompt + completion),
        ),
        str(result.get("result") or ""),
        result.get("is_error") is True,
    )


def _codex(output: str) -> Report:
    """`codex exec --json`: `turn.completed` with the turn's usage, the sum over its requests; no
    cost. How many requests: codex_requests, from the session's own log."""
    usage, summary, session = Usage(), None, None
    for event in _objects(output):
        if event.get("type") == "thread.started" and isinstance(event.get("thread_id"), str):
            session = event["thread_id"]
        if event.get("type") == "turn.completed":
            usage.requests += 1
            usage.prompt_tokens += _count(event.get("usage"), "input_tokens")  # cached ones are among them
            usage.completion_tokens += _count(event.get("usage"), "output_tokens")
        item = event.get("item")
        if event.get("type") == "item.completed" and isinstance(item, dict) and item.get("type") == "agent_message":
            summary = str(item.get("text") or "")
    return Report(usage, summary, session=session)


_THREAD = re.compile(r"[0-9a-f-]{8,64}")


def codex_requests(codex_home: Path, thread: str) -> int | None:
    """The model requests of codex's session `thread`: one `token_usage_record` line each in its
    rollout file ($CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl). None: no such file."""
    if not _THREAD.fullmatch(thread):
        return None
    found = sorted((codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread}.jsonl"))
    if not found:
        return None
    return sum(1 for record in _objects(_text(found[0])) if record.get("type") == "token_usage_record")


def _gemini(output: str) -> Report:
    """`gemini --output-format json`: one object, {response, stats: {models: {…: {tokens, api}}}},
    printed whole over many lines, among whatever else the log holds (its stderr is merged in)."""
    result = _last_object(output, ("response", "stats", "error"))
    if result is None:
        return Report()
    usage = Usage()
    stats = result.get("stats")
    models = stats.get("models") if isinstance(stats, dict) else None
    for model in models.values() if isinstance(models, dict) else ():
        if isinstance(model, dict):
            usage.prompt_tokens += _count(model.get("tokens"), "prompt")
            usage.completion_tokens += _count(model.get("tokens"), "candidates")
            usage.requests += _count(model.get("api"), "totalRequests")
    return Report(usage, str(result.get("response") or ""), isinstance(result.get("error"), dict))


_OBJECT_START = re.compile(r"^[ \t]*\{", re.M)


def _last_object(output: str, keys: tuple[str, ...]) -> dict | None:
    """The last JSON object that starts a line, spans one line or many, and has one of `keys`.
    Objects nested in one already read are skipped, not read again."""
    decoder, found, at = json.JSONDecoder(), None, 0
    while (start := _OBJECT_START.search(output, at)) is not None:
        brace = start.end() - 1
        try:
            value, end = decoder.raw_decode(output, brace)
        except (ValueError, RecursionError):
            at = brace + 1
            continue
        if isinstance(value, dict) and any(key in value for key in keys):
            found = value
        at = end
    return found


def _opencode(output: str) -> Report:
    """`opencode run --format json`: a `step_finish` event a step, with its tokens and cost."""
    usage, summary, costs = Usage(), None, []
    for event in _objects(output):
        part = event.get("part")
        part = part if isinstance(part, dict) else {}
        if event.get("type") == "step_finish":
            tokens = part.get("tokens")
            cache = tokens.get("cache") if isinstance(tokens, dict) else None
            usage.requests += 1
            spent = _count(tokens, "input", "output", "reasoning") + _count(cache, "read", "write")
            usage.prompt_tokens += _count(tokens, "input") + _count(cache, "read", "write")
            usage.completion_tokens += _count(tokens, "output", "reasoning")
            costs.append(_cost(part.get("cost"), spent))
        elif event.get("type") == "text" and part.get("text"):
            summary = str(part["text"])
    known = [cost for cost in costs if cost is not None]
    usage.cost_usd = round(sum(known), 6) if costs and len(known) == len(costs) else None
    return Report(usage, summary)


_AIDER_COST = re.compile(r"Cost: \$(\d+(?:\.\d+)?) message, \$(\d+(?:\.\d+)?) session")
_AIDER_TOKENS = re.compile(r"^Tokens: .+ sent, .+ received\.", re.M)
_AIDER_ERROR = re.compile(r"litellm\.\w+Error|rate limited you", re.I)  # a rate limit, a refused key, …


def _aider(output: str, analytics: str) -> Report:
    """aider's analytics log (`--analytics-log`, written with analytics disabled too): a
    `message_send` event an answer, with its exact tokens and cost. Without one, its output's
    `Tokens: 12k sent, 340 received. Cost: $0.04 message, $0.09 session.` (rounded tokens: only
    the cost is taken). aider exits 0 whatever the API answered (a rate limit it gave up on, a
    refused key): an output whose last word is an API error, after its last answer, failed."""
    events = [event.get("properties") for event in _objects(analytics) if event.get("event") == "message_send"]
    sent: list[dict] = [properties for properties in events if isinstance(properties, dict)]
    usage = Usage()
    if sent:
        usage.requests = len(sent)
        usage.prompt_tokens = sum(_count(properties, "prompt_tokens") for properties in sent)
        usage.completion_tokens = sum(_count(properties, "completion_tokens") for properties in sent)
        costs = [_cost(properties.get("cost"), _count(properties, "prompt_tokens")) for properties in sent]
        known = [cost for cost in costs if cost is not None]
        usage.cost_usd = round(sum(known), 6) if len(known) == len(costs) else None
    elif costs_said := _AIDER_COST.findall(output):
        usage.cost_usd = _cost(float(costs_said[-1][1]))
    answered = [match.end() for match in _AIDER_TOKENS.finditer(output)]
    errors = [match.start() for match in _AIDER_ERROR.finditer(output)]
    return Report(usage, failed=bool(errors) and errors[-1] > max(answered, default=-1))


def _mini(trajectory: str) -> Report:
    """mini-swe-agent's trajectory (`--output`): `info.model_stats` {api_calls, instance_cost}, and
    each answer's usage in its message's `extra.response.usage`."""
    try:
        found = json.loads(trajectory) if trajectory else None
    except (ValueError, RecursionError):
        found = None
    if not isinstance(found, dict):
        return Report()
    stats = _dig(found, "info", "model_stats")
    messages = found.get("messages")
    answers = (
        [_dig(message, "extra", "response", "usage") for message in messages] if isinstance(messages, list) else []
    )
    usage = Usage(
        requests=_count(stats, "api_calls"),
        prompt_tokens=sum(_count(answer, "prompt_tokens") for answer in answers),
        completion_tokens=sum(_count(answer, "completion_tokens") for answer in answers),
    )
    usage.cost_usd = _cost(_dig(stats, "instance_cost"), usage.total + usage.requests)
    summary = _dig(found, "info", "submission")
    return Report(usage, summary if isinstance(summary, str) and summary.strip() else None)


def _dig(value: object, *keys: str) -> object:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value
