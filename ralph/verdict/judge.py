"""The judge: a model of its own scores a lap the checks passed, and can hold it back.

It sees the goal, the items the lap ticked, the whole diff, the new text of the files the
lap changed, PROGRESS.md and the agent's summary, and answers by calling `verdict` with a
score per dimension — each with an evidence quote, which must occur in the diff or in a
changed file or the score does not count — plus blocking items and suggestions. The lap's
score mixes the judge's (the mean of the scores that count) with ralph's own measurable
signals; below the threshold, or with any blocking item, the lap is red ("judge"). A judge
that cannot answer (its endpoint down, no valid verdict) leaves the lap to the checks alone,
and says so in the note.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError

from ralph import git
from ralph.agents.base import Usage
from ralph.agents.mcp_tools import McpTools
from ralph.agents.openai import PREFLIGHT, chat_request, endpoint_of, open_client
from ralph.agents.replies import ReplyReader, ToolCall, assistant_message, schema_problems
from ralph.agents.retry import RequestFailed, call_with_retry
from ralph.agents.tools import function_schema
from ralph.agents.transcript import Transcript
from ralph.config import AgentConfig, Config, JudgeConfig
from ralph.errors import RalphError
from ralph.git.ledger import JudgeRecord, Score
from ralph.show import ui

if TYPE_CHECKING:
    from openai import OpenAI

LOOKUPS = 8  # MCP tool calls the judge may make before its verdict (mcp.roles has judge)
LOOKUP_SECONDS = 120  # for all of them together
RETRY_SECONDS = 60  # the judge's own budget for retries: an outage costs a lap about a minute
ATTEMPTS = 3  # verdicts that do not fit the schema, then "unavailable"
DIFF_CAP = 60_000  # characters of diff the judge sees
FILE_CAP = 20_000  # characters of each changed file's new text
FILES_CAP = 120_000
DIFF_BUDGET = 400  # changed lines beyond which the "diff within budget" signal is 0
EVIDENCE_MIN = 8  # characters of a quote (whitespace runs as one): shorter ones occur anywhere
PROGRESS_BUDGET = 8_000  # characters of PROGRESS.md
DIMENSIONS = (
    "does what the ticked items ask",
    "complete",
    "clear and minimal",
    "tests adequate for it",
    "follows the repository's conventions",
)
SYSTEM_PROMPT = f"""\
You review one lap of a coding job: a diff that already passes the repository's checks. The
tests are the floor, not the ceiling: judge whether the work is what was asked, complete and
good. Call the tool `verdict` once. For each dimension — {"; ".join(DIMENSIONS)} — first
quote the evidence (copied exactly from the diff or a changed file: ralph checks that it
occurs there, and a score whose quote is not found does not count), then give a reason, then
the score from 0 to 1:
- 0.3: wrong or mostly missing; a reviewer would reject it.
- 0.6: works but with real gaps: a case missed, a test absent, noise in the diff.
- 0.9: what a careful reviewer would approve as is.
`blocking`: what must change before this lap can be kept (each one concrete and checkable),
or nothing. `suggestions`: improvements that should not block."""
LOOKUP_NOTE = f"""
Before the verdict you may look things up with the mcp__ tools (at most {LOOKUPS} calls): the
documentation or the issue the work is about. Evidence must still be quoted from the diff."""
VERDICT_TOOL = function_schema(
    "verdict",
    "Your verdict on the lap.",
    {
        "scores": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "dimension": {"type": "string"},
                    "evidence": {"type": "string"},
                    "reason": {"type": "string"},
                    "score": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["dimension", "evidence", "reason", "score"],
            },
        },
        "blocking": {"type": "array", "items": {"type": "string"}},
        "suggestions": {"type": "array", "items": {"type": "string"}},
    },
    ["scores", "blocking", "suggestions"],
)


class Verdict(BaseModel):
    scores: list[Score] = Field(min_length=1)
    blocking: list[str] = []
    suggestions: list[str] = []


@dataclass(frozen=True)
class Material:
    """What the judge sees of a lap."""

    goal: str
    ticked: list[str]
    diff: str
    files: dict[str, str]  # changed path -> its new text
    progress: str
    summary: str


def check_independence(cfg: Config, role: JudgeConfig, judge: AgentConfig) -> None:
    """A judge on the agent's own model or provider tends to approve its own kind of work."""
    if cfg.agent.kind != "openai":
        return
    same_model = judge.model == cfg.agent.model
    same_provider = urlsplit(endpoint_of(judge)).netloc == urlsplit(endpoint_of(cfg.agent)).netloc
    if not (same_model or same_provider):
        return
    what = f"the agent's model ({judge.model})" if same_model else f"the agent's provider ({endpoint_of(judge)})"
    if role.require_independent:
        raise RalphError(f"roles.judge runs on {what} and roles.judge.require_independent is true — pick another")
    ui.warn(f"the judge runs on {what}: it may approve what the agent does; a judge of its own judges better")


def material(
    cfg: Config,
    top: Path,
    green: str,
    commit: str,
    changes: dict[str, tuple[str, str]],
    ticked: list[str],
    summary: str,
) -> Material:
    """What the judge is shown of a lap: the diff whole (a lap whose diff does not fit is held,
    not judged on a part), changed files within a budget, PROGRESS.md and the summary capped."""
    diff = git.run(top, "diff", "--no-color", "--no-renames", green, commit, "--").output
    files: dict[str, str] = {}
    total = 0
    for path, (status, mode) in changes.items():
        if status == "D" or mode not in ("100644", "100755"):  # regular files only
            continue
        text = _capped(git.show_file(top, commit, path) or "", min(FILE_CAP, max(0, FILES_CAP - total)))
        files[path] = text
        total += len(text)
    progress = _capped(git.show_file(top, commit, cfg.files.progress) or "", PROGRESS_BUDGET)
    return Material(
        cfg.goal, [_capped(item, 500) for item in ticked[:50]], diff, files, progress, _capped(summary, 4000)
    )


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


def signals(
    material: Material, all_pass: bool, passing_before: int, passing_after: int, progress_changed: bool
) -> dict[str, float]:
    """ralph's own measurable signals, each 0 or 1 (README: The judge)."""
    changed_lines = sum(
        1 for line in material.diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )
    return {
        "checks all pass": float(all_pass),
        "passing tests not fewer": float(passing_after >= passing_before),
        "PROGRESS.md rewritten, within budget": float(progress_changed and len(material.progress) <= PROGRESS_BUDGET),
        "diff within budget": float(changed_lines <= DIFF_BUDGET),
    }


class Judge:
    def __init__(self, role: JudgeConfig, config: AgentConfig):
        self.role, self.config = role, config
        self.mcp: McpTools | None = None  # tools to look things up with before the verdict (mcp.roles has judge)
        self.endpoint = endpoint_of(config)
        self.api_key = os.environ.get(config.api_key_env)

    def check_endpoint(self) -> None:
        """A judge that is down at the start is a warning: laps fall back to the checks."""
        try:
            with open_client(self.api_key, self.endpoint) as client:
                call_with_retry(
                    lambda: chat_request(
                        client,
                        self.config,
                        [{"role": "user", "content": PREFLIGHT}],
                        self.endpoint,
                        time.monotonic() + 30,
                        16,
                        tools=[VERDICT_TOOL],
                    ),
                    endpoint=self.endpoint,
                    deadline=time.monotonic() + 30,
                    attempts=2,
                )
        except RequestFailed as exc:
            ui.warn(
                f"the judge's endpoint does not answer ({exc.message}); laps are judged by the checks until it does"
            )

    def judge(self, material: Material, signals: dict[str, float], log_dir: Path) -> JudgeRecord:
        role = self.role
        transcript = Transcript(log_dir / "judge.jsonl", secret=self.api_key)
        usage = Usage()
        if len(material.diff) > DIFF_CAP:  # the judge vouches only for what it saw whole
            size = f"{len(material.diff):,} characters; at most {DIFF_CAP:,}"
            too_big = f"The diff is too large to review ({size}): make smaller laps"
            transcript.write("end", held=too_big)
            return JudgeRecord(status="held", signals=signals, blocking=[too_big], usage=usage)
        try:
            verdict = self._ask(material, transcript, usage)
        except _Unavailable as exc:
            transcript.write("end", unavailable=str(exc))
            return JudgeRecord(status="unavailable", signals=signals, detail=str(exc), usage=usage)
        for given in verdict.scores:
            given.counted = _found(given.evidence, material)
        counted = [given.score for given in verdict.scores if given.counted]
        judge_score = sum(counted) / len(counted) if counted else 0.0
        deterministic = sum(signals.values()) / len(signals)
        total = round((1 - role.weight) * deterministic + role.weight * judge_score, 3)
        held = total < role.threshold or bool(verdict.blocking)
        record = JudgeRecord(
            status="held" if held else "passed",
            score=total,
            judge_score=round(judge_score, 3),
            signals=signals,
            scores=verdict.scores,
            blocking=verdict.blocking,
            suggestions=verdict.suggestions,
            usage=usage,
        )
        transcript.write("end", record=record.model_dump())
        return record

    def _post(self, client: OpenAI, messages: list[dict], deadline: float) -> dict:
        tools = [VERDICT_TOOL, *(self.mcp.declarations if self.mcp else [])]
        return chat_request(client, self.config, messages, self.endpoint, deadline, tools=tools)[0]

    def _ask(self, material: Material, transcript: Transcript, usage: Usage) -> Verdict:
        system = SYSTEM_PROMPT + (LOOKUP_NOTE if self.mcp else "")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": _shown(material)}]
        reader = ReplyReader(("verdict", *(self.mcp.names if self.mcp else ())))
        attempts = lookups = 0  # replies without a valid verdict (lookups aside); MCP calls
        lookups_until = time.monotonic() + LOOKUP_SECONDS
        with open_client(self.api_key, self.endpoint) as client:
            while attempts < ATTEMPTS:
                deadline = time.monotonic() + RETRY_SECONDS
                transcript.write("request", messages=messages)
                try:
                    body = call_with_retry(
                        partial(self._post, client, list(messages), deadline),
                        endpoint=self.endpoint,
                        deadline=deadline,
                    )
                except RequestFailed as exc:
                    raise _Unavailable(f"judge unavailable: {exc.message}") from None
                transcript.write("response", body=body)
                usage.add_reply(body)
                reply = reader.read(body)
                messages.append(assistant_message(reply))
                if not reply.calls:
                    attempts += 1
                    messages.append({"role": "user", "content": "Call the tool verdict."})
                    continue
                answers = []  # every call is answered (the protocol), the first valid verdict wins
                looked_up = False
                for call in reply.calls:
                    problem = call.problem
                    if problem is None and call.name != "verdict":  # an MCP tool: a lookup
                        lookups += 1
                        if lookups <= LOOKUPS:
                            looked_up = True
                            answers.append(self._look_up(call, transcript, lookups_until))
                            continue
                        problem = f"no more lookups (at most {LOOKUPS}); call verdict now"
                    if problem is None:
                        try:
                            return Verdict.model_validate(call.arguments)
                        except ValidationError as exc:
                            problem = f"format error: {schema_problems(exc)}; call verdict again"
                    answers.append({"role": "tool", "tool_call_id": call.id, "content": problem})
                messages += answers
                attempts += 0 if looked_up else 1
        raise _Unavailable(f"judge unavailable: no valid verdict in {ATTEMPTS} replies")

    def _look_up(self, call: ToolCall, transcript: Transcript, until: float) -> dict:
        assert self.mcp is not None
        left = until - time.monotonic()
        result = (
            self.mcp.call(call.name, call.arguments, transcript, left)
            if left >= 1
            else f"error: the {LOOKUP_SECONDS}s for lookups are spent; call verdict now"
        )
        return {"role": "tool", "tool_call_id": call.id, "content": result}


class _Unavailable(Exception):
    pass


def _found(evidence: str, material: Material) -> bool:
    """Does the quote occur in what the lap changed: the diff's lines without their markers (no
    headers, no hunk lines), or a changed file's text? Whitespace runs compare as one space."""
    quote = " ".join(evidence.split())
    if len(quote) < EVIDENCE_MIN:
        return False
    changed = [line[1:] for line in material.diff.splitlines() if line[:1] in "+- " and line[:3] not in ("+++", "---")]
    return any(quote in " ".join(text.split()) for text in ["\n".join(changed), *material.files.values()])


def _shown(material: Material) -> str:
    """The lap in markdown, every fence longer than any run of backticks inside it, so nothing a
    lap wrote can close one and speak as ralph."""
    ticked = "\n".join(f"- {item}" for item in material.ticked) or "(none)"
    files = "\n\n".join(f"## {json.dumps(path)}\n{_fenced(text)}" for path, text in material.files.items())
    return (
        f"# Goal\n{material.goal}\n\n# Items the lap ticked\n{_fenced(ticked)}\n\n"
        f"# The agent's summary\n{_fenced(material.summary or '(none)')}\n\n"
        f"# The diff\n{_fenced(material.diff, 'diff')}\n\n"
        f"# The changed files, as they are now\n{files or '(none)'}\n\n"
        f"# PROGRESS.md\n{_fenced(material.progress or '(empty)')}\n"
    )


def _fenced(text: str, language: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def next_lap_text(record: JudgeRecord) -> str:
    """What the next lap is told of a lap the judge held back."""
    blocking = "".join(f"- [ ] {item}\n" for item in record.blocking)
    suggestions = "".join(f"- {item}\n" for item in record.suggestions)
    low = "".join(
        f"- {score.dimension}: {score.score:g} — {score.reason}\n" for score in record.scores if score.counted
    )
    return (
        "The judge held the lap back"
        + (f" (score {record.score}).\n" if record.score is not None else ".\n")
        + (f"Blocking, fix these:\n{blocking}" if blocking else "")
        + (f"Suggestions:\n{suggestions}" if suggestions else "")
        + (f"Scores:\n{low}" if low else "")
    )
